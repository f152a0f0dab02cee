//! Anvil's well-known development accounts (mnemonic "test test … junk") and the deterministic
//! keys of seeded agent wallets. These are public test keys: never use them on a real network.

use alloy::{
    primitives::{Address, B256, keccak256},
    signers::local::PrivateKeySigner,
};

/// Private keys of anvil's first ten default accounts, each funded with 10,000 ETH.
const DEV_KEYS: [&str; 10] = [
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
];

/// Role of each development account in the local set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Deploys the contracts and owns the registry.
    Owner = 0,
    /// Added as a regulator of the registry.
    Regulator = 1,
    /// Creators of demo agents.
    CreatorA = 2,
    /// Creators of demo agents.
    CreatorB = 3,
    /// Creators of demo agents.
    CreatorC = 4,
    /// Holds no role: an outsider for authorization tests.
    Outsider = 5,
    /// The relayer's hot wallet.
    Relayer = 9,
}

/// The signer of a development account.
pub fn signer(role: Role) -> PrivateKeySigner {
    DEV_KEYS[role as usize].parse().expect("the built-in development keys are valid")
}

/// The address of a development account.
pub fn address(role: Role) -> Address {
    signer(role).address()
}

/// The role of the development account at `address`, if it is one.
pub fn role_of(address: Address) -> Option<Role> {
    ALL_ROLES.into_iter().find(|role| self::address(*role) == address)
}

/// Every role, in account order.
pub const ALL_ROLES: [Role; 7] = [
    Role::Owner,
    Role::Regulator,
    Role::CreatorA,
    Role::CreatorB,
    Role::CreatorC,
    Role::Outsider,
    Role::Relayer,
];

/// The hex private key of a development account, for the env file of the local set-up.
pub fn key_hex(role: Role) -> &'static str {
    DEV_KEYS[role as usize]
}

/// The deterministic key of the seeded agent wallet number `index` (not the agent id: wallets are
/// numbered in the order the seed creates them, so the same seed always yields the same wallets).
pub fn agent_wallet(index: u64) -> PrivateKeySigner {
    let mut preimage = b"kya-devchain agent wallet ".to_vec();
    preimage.extend_from_slice(&index.to_be_bytes());
    let secret: B256 = keccak256(preimage);
    PrivateKeySigner::from_bytes(&secret)
        .expect("a keccak digest is a valid secp256k1 key with overwhelming probability")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_keys_give_anvils_default_addresses() {
        assert_eq!(address(Role::Owner).to_string(), "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
        assert_eq!(address(Role::Relayer).to_string(), "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720");
    }

    #[test]
    fn agent_wallets_are_deterministic_and_distinct() {
        assert_eq!(agent_wallet(1).address(), agent_wallet(1).address());
        assert_ne!(agent_wallet(1).address(), agent_wallet(2).address());
    }
}
