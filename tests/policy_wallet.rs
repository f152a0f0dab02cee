//! The ERC-1271 test wallet (`contracts/test/PolicyWallet.sol`): signatures by its owner's key
//! count as its own while its owner lets them, so one contract account can be shown consenting
//! (or signing a request) and then, with its policy switched off, refused.

use alloy::{primitives::Address, sol_types::SolValue};
use kya_devchain::dev_accounts::{self, Role};

use crate::TestChain;

alloy::sol!(
    /// The test contract wallet: ERC-1271 signatures by its owner's key count as its own while
    /// its owner lets them (`setAccepting`).
    #[derive(Debug, PartialEq, Eq)]
    PolicyWallet,
    "../contracts/artifacts/PolicyWallet.json"
);

/// Deploys a [`PolicyWallet`] owned by `owner`, accepting.
pub async fn deploy(t: &TestChain, owner: Address) -> Address {
    let mut init = PolicyWallet::BYTECODE.to_vec();
    init.extend_from_slice(&owner.abi_encode());
    t.chain.deploy(dev_accounts::address(Role::Owner), init.into()).await.expect("PolicyWallet deploys")
}

/// The owner of `wallet` switches whether it accepts its signatures.
pub async fn set_accepting(t: &TestChain, wallet: Address, owner: Address, accepting: bool) {
    t.chain.impersonate(owner).await.unwrap();
    t.chain.send(owner, wallet, &PolicyWallet::setAcceptingCall { accepting_: accepting }).await.unwrap();
    assert_eq!(t.chain.view(wallet, &PolicyWallet::acceptingCall {}).await.unwrap(), accepting);
}
