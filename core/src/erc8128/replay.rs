//! Replay protection the caller enforces with its own state (ERC-8128 3.1.2, 5.1 and 5.2): a
//! nonce to accept exactly once, or a Replayable signature's early-invalidation checks.

use alloy_primitives::B256;

use super::keyid::KeyId;
use super::refusal::{Reason, Refusal};

/// What stands between a verified signature and its reuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayGuard {
    /// Non-Replayable: claim the nonce in a shared store, atomically, exactly once.
    Nonce(NonceClaim),
    /// Replayable (only with a policy that allows it): check the signer's early invalidations.
    Replayable(ReplayableCheck),
}

/// A nonce to remember: the store must accept `key` once and refuse it until `remember_until`
/// ([`NonceClaim::replayed`] is the refusal). The check and the insert must be one atomic step,
/// or two concurrent requests could both pass (ERC-8128, "Nonce enforcement and concurrency").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonceClaim {
    /// `<keyid>:<nonce>`, with the keyid in its canonical lowercase form, so that two spellings
    /// of one address share their nonces. The keyid's fixed shape keeps the pair unambiguous.
    pub key: String,
    /// The canonical keyid.
    pub keyid: String,
    /// The nonce as signed.
    pub nonce: String,
    /// Unix seconds until which the key must be kept: `expires` plus the clock skew, the last
    /// moment the same signature could still pass the time checks.
    pub remember_until: u64,
}

impl NonceClaim {
    pub(crate) fn new(key: KeyId, nonce: &str, remember_until: u64) -> Self {
        let keyid = key.to_string();
        Self { key: format!("{keyid}:{nonce}"), keyid, nonce: nonce.to_owned(), remember_until }
    }

    /// The refusal to answer when the store already held [`NonceClaim::key`].
    pub fn replayed(&self) -> Refusal {
        Refusal::replayed(&self.keyid, &self.nonce)
    }
}

/// A Replayable signature's early invalidation (ERC-8128 5.2), which a verifier that accepts
/// Replayable signatures MUST offer. Both mechanisms the ERC names are supported: a per-keyid
/// not-before time, and per-signature invalidation by fingerprint. The invalidating request
/// itself must be Request-Bound, which every signature this module accepts is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayableCheck {
    /// The canonical keyid, under which a not-before time is kept.
    pub keyid: String,
    /// The signature's `created`.
    pub created: u64,
    /// The signature's fingerprint: the EIP-191 hash of its signature base, which the signer
    /// can compute to invalidate it. Not the signature's bytes, which a third party could
    /// rewrite (a high `s`) without changing what was signed.
    pub fingerprint: B256,
}

impl ReplayableCheck {
    /// Refuses the signature if its keyid's not-before time (from the caller's store) is after
    /// its `created`, or if its fingerprint was invalidated.
    pub fn enforce(&self, not_before: Option<u64>, invalidated: bool) -> Result<(), Refusal> {
        if let Some(not_before) = not_before.filter(|not_before| self.created < *not_before) {
            return Err(Refusal::new(
                Reason::Expired,
                format!(
                    "{} invalidated its signatures created before {not_before}; this one was \
                     created at {}",
                    self.keyid, self.created
                ),
            ));
        }
        if invalidated {
            return Err(Refusal::new(
                Reason::Expired,
                format!("the signer invalidated this signature ({}) early", self.fingerprint),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::address;

    use super::*;

    #[test]
    fn nonce_key_uses_the_canonical_keyid() {
        let key = KeyId { chain_id: 1, address: address!("0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045") };
        let claim = NonceClaim::new(key, "n:1", 1_060);
        assert_eq!(claim.key, "erc8128:1:0xd8da6bf26964af9d7eed9e03e53415d37aa96045:n:1");
        assert_eq!(claim.replayed().reason, Reason::Replayed);
    }

    #[test]
    fn replayable_early_invalidation() {
        let check = ReplayableCheck { keyid: "erc8128:1:0x00".into(), created: 100, fingerprint: B256::ZERO };
        assert_eq!(check.enforce(None, false), Ok(()));
        assert_eq!(check.enforce(Some(100), false), Ok(()));
        assert_eq!(check.enforce(Some(101), false).unwrap_err().reason, Reason::Expired);
        assert_eq!(check.enforce(None, true).unwrap_err().reason, Reason::Expired);
    }
}
