//! Which shard a client's streams go to: a keyed hash of the client (an IPv4 address, an IPv6
//! /64), so that one shard sees (and caps) all of a client's streams, clients spread over the
//! shards, and nobody can tell which addresses share a shard without the deployment's key.
//!
//! An unkeyed hash let anyone holding a /48 compute which of its /64s land on a victim's shard
//! and fill that shard's `FEED_STREAM_MAX_LISTENERS` with them. The key is the Worker secret
//! `FEED_STREAM_SHARD_KEY`; without it, one derived from the pass signing keys
//! (`PASS_SIGNING_KEYS`), so a deployment that signs passes is keyed with no setting of its own;
//! without either, a fixed key anyone can read here, and a warning in the log.

use std::{cell::OnceCell, fmt, rc::Rc};

use alloy_primitives::{B256, keccak256};
use worker::Env;

/// The secret naming the key.
const KEY_SECRET: &str = "FEED_STREAM_SHARD_KEY";
/// The pass signing keys' secret (`crate::passes`), the key's source when [`KEY_SECRET`] is unset.
const PASS_KEYS_SECRET: &str = "PASS_SIGNING_KEYS";
/// What a secret is hashed with into a key, so that the key is never the secret itself and a key
/// derived from the pass signing keys says nothing about them.
const DERIVATION: &[u8] = b"kya feed stream shard key\0";

/// The deployment's key of the shards' hash. Its `Debug` names no byte of it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ShardKey(B256);

impl fmt::Debug for ShardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ShardKey(redacted)")
    }
}

thread_local! {
    /// The key, derived once per isolate (a secret does not change under a running isolate).
    static KEY: OnceCell<Rc<ShardKey>> = const { OnceCell::new() };
}

impl ShardKey {
    /// The key from `secret` (any text: a setting's value, or the pass signing keys' JSON).
    pub(crate) fn derive(secret: &str) -> Self {
        Self(keccak256([DERIVATION, secret.as_bytes()].concat()))
    }

    /// The deployment's key: from `FEED_STREAM_SHARD_KEY`, else from `PASS_SIGNING_KEYS`, else
    /// the fixed key of a deployment with neither (warned about once per isolate).
    pub(crate) fn of(env: &Env) -> Rc<Self> {
        KEY.with(|key| {
            Rc::clone(key.get_or_init(|| {
                let secret = |name| {
                    env.secret(name).ok().map(|value| value.to_string()).filter(|value| !value.trim().is_empty())
                };
                let key = match (secret(KEY_SECRET), secret(PASS_KEYS_SECRET)) {
                    (Some(own), _) => Self::derive(own.trim()),
                    (None, Some(pass_keys)) => Self::derive(&pass_keys),
                    (None, None) => {
                        worker::console_warn!(
                            "feed stream: neither {KEY_SECRET} nor {PASS_KEYS_SECRET} is set, so anyone can \
                             compute which clients share a stream shard; set {KEY_SECRET} (docs/change-feed.md)"
                        );
                        Self::derive("")
                    }
                };
                Rc::new(key)
            }))
        })
    }
}

/// The shard of `client`'s streams among `shards`: the first 8 bytes of keccak256(key ‖ client),
/// modulo the shards. Keccak, unlike SHA-256, has no length extension, so the key prefixed to the
/// message makes a sound keyed hash. A shard holds no state a listener must come back to: a
/// client whose address changes simply lands elsewhere.
pub(crate) fn shard_of(key: &ShardKey, client: &str, shards: u64) -> u64 {
    let hash = keccak256([key.0.as_slice(), client.as_bytes()].concat());
    let mut first = [0; 8];
    first.copy_from_slice(&hash[..8]);
    u64::from_be_bytes(first) % shards.max(1)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// 64 /64s of one /48, as their holder would spread them.
    fn clients() -> Vec<String> {
        (0..64).map(|subnet| format!("2001:db8:7:{subnet:x}::")).collect()
    }

    #[test]
    fn a_clients_streams_share_a_shard_and_clients_spread_over_them() {
        let key = ShardKey::derive("a deployment's secret");
        assert_eq!(shard_of(&key, "203.0.113.7", 4), shard_of(&key, "203.0.113.7", 4));
        let used: BTreeSet<u64> = clients().iter().map(|client| shard_of(&key, client, 4)).collect();
        assert_eq!(used.len(), 4, "64 clients use every shard");
        assert_eq!(shard_of(&key, "anything", 1), 0);
    }

    #[test]
    fn which_clients_share_a_shard_depends_on_the_key() {
        let placed =
            |key: &ShardKey| clients().iter().map(|client| shard_of(key, client, 4)).collect::<Vec<_>>();
        let (one, other) = (ShardKey::derive("one deployment"), ShardKey::derive("another deployment"));
        assert_eq!(placed(&one), placed(&ShardKey::derive("one deployment")), "stable for one key");
        // Of the /64s on the first client's shard under one key, most sit elsewhere under the
        // other: what the holder of a /48 learns about one deployment says nothing of another.
        let (with_first, moved) = {
            let (one, other) = (placed(&one), placed(&other));
            let with_first: Vec<usize> = (1..64).filter(|&n| one[n] == one[0]).collect();
            let moved = with_first.iter().filter(|&&n| other[n] != other[0]).count();
            (with_first.len(), moved)
        };
        assert!(with_first >= 8 && moved >= with_first / 2, "{moved} of {with_first} moved");
        // A key derived from a secret is neither the secret nor the fixed key of no secret.
        assert_ne!(ShardKey::derive("s").0, B256::right_padding_from(b"s"));
        assert_ne!(ShardKey::derive("s"), ShardKey::derive(""));
        assert_eq!(format!("{one:?}"), "ShardKey(redacted)");
    }
}
