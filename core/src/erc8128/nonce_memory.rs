//! A nonce store in memory, for a verifier on one process (a provider's gate, an example, a
//! test): each nonce kept until its signature could no longer pass, and forgotten then. The API
//! keeps its nonces in a Durable Object, worldwide; this is the store for those who decide
//! offline.
//!
//! Forgetting is by a queue ordered by expiry, so a claim costs O(log n) plus the nonces that
//! expired since the last one: a scan of every live nonce on every request (a `retain`) made
//! each request as slow as the nonces kept, which a signer can fill at will with fresh nonces.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::refusal::Refusal;
use super::replay::NonceClaim;

/// Nonces seen, each until its `remember_until`.
#[derive(Debug, Clone, Default)]
pub struct NonceMemory {
    until: HashMap<String, u64>,
    expiry: BinaryHeap<Reverse<(u64, String)>>,
}

impl NonceMemory {
    pub fn new() -> Self {
        Self::default()
    }

    /// Remembers `key` until `remember_until` (Unix seconds), at `now`: `false`, remembering
    /// nothing, when it is remembered already. The check and the insert are one step.
    pub fn claim_key(&mut self, key: &str, remember_until: u64, now: u64) -> bool {
        self.forget_expired(now);
        if self.until.contains_key(key) {
            return false;
        }
        self.until.insert(key.to_owned(), remember_until);
        self.expiry.push(Reverse((remember_until, key.to_owned())));
        true
    }

    /// Claims a verified signature's nonce at `now`, or the `replayed` refusal.
    pub fn claim(&mut self, claim: &NonceClaim, now: u64) -> Result<(), Refusal> {
        match self.claim_key(&claim.key, claim.remember_until, now) {
            true => Ok(()),
            false => Err(claim.replayed()),
        }
    }

    /// How many nonces are remembered (some may have expired since the last claim).
    pub fn len(&self) -> usize {
        self.until.len()
    }

    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }

    /// Forgets the nonces whose signatures expired before `now`: a key is kept through its
    /// `remember_until` second, the last its signature could pass.
    fn forget_expired(&mut self, now: u64) {
        while let Some(Reverse((until, _))) = self.expiry.peek()
            && *until < now
        {
            let Some(Reverse((until, key))) = self.expiry.pop() else { break };
            if self.until.get(&key) == Some(&until) {
                self.until.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_claimed_once_until_it_expires() {
        let mut memory = NonceMemory::new();
        assert!(memory.claim_key("k:1", 100, 50));
        assert!(!memory.claim_key("k:1", 200, 60), "remembered");
        assert!(!memory.claim_key("k:1", 200, 100), "through its last second");
        assert!(memory.claim_key("k:1", 300, 101), "forgotten after it");
        assert!(!memory.claim_key("k:1", 300, 250), "remembered again, to its new end");
        assert_eq!(memory.len(), 1);
    }

    #[test]
    fn expired_nonces_are_forgotten_in_order_of_expiry() {
        let mut memory = NonceMemory::new();
        for i in 0..1_000u64 {
            assert!(memory.claim_key(&format!("k:{i}"), 1_000 + (i * 7919) % 1_000, 0));
        }
        assert_eq!(memory.len(), 1_000);
        assert!(memory.claim_key("k:new", 5_000, 1_500));
        // Those ending before 1,500 are gone; the rest stay.
        let kept = (0..1_000u64).filter(|i| 1_000 + (i * 7919) % 1_000 >= 1_500).count();
        assert_eq!(memory.len(), kept + 1);
        assert!(memory.claim_key("k:999", 9_999, 1_500) == (1_000 + (999 * 7919) % 1_000 < 1_500));
    }
}
