//! A provider's offline check of KYA passes (INTERFACE.md section 7): the issuer's JWKS fetched
//! once and kept as its `Cache-Control` allows (within bounds), fetched again for a key it does
//! not hold yet (a rotation; throttled), and, when the verifier follows the change feed, a pass
//! older than its wallet's loss of compliance refused. Each check is `kya_core::pass`'s, in microseconds, with no call
//! to the API.

use std::{
    collections::HashMap,
    sync::{RwLock, RwLockReadGuard, RwLockWriteGuard},
    time::{SystemTime, UNIX_EPOCH},
};

use alloy::primitives::Address;
use kya_core::{
    feed::Event,
    pass::{
        FetchReason, FetchTicket, Jwks, KeyCache, KeyCachePolicy, PassRefusal, PassTrust, VerifiedPass,
        verify::{admit_pass, verify_pass},
    },
};

use crate::{ApiClient, ChangeFollower, Error, Result};

/// Checks passes offline against one issuer. Shared by a provider's request handlers (it is
/// `Sync`); [`PassVerifier::follow`] keeps its revocations while it runs.
///
/// The keys are `kya_core::pass::KeyCache`'s: fetched at most once per refetch interval (10 s),
/// one fetch at a time, for keys past their freshness or a `kid` not held; trusted one lifetime
/// past their freshness and no longer when they cannot be refreshed. So passes naming made-up
/// keys, which anyone can sign, cannot make this verifier call the API per request, and a key
/// its operator removed is not trusted forever because the API is down.
#[derive(Debug)]
pub struct PassVerifier {
    api: ApiClient,
    trust: PassTrust,
    keys: RwLock<KeyCache>,
    /// Held for a fetch: callers that want one meanwhile wait, then use its outcome.
    fetching: tokio::sync::Mutex<()>,
    /// The latest block at which each wallet was seen not compliant, from the change feed.
    lost_at: RwLock<HashMap<Address, u64>>,
}

impl PassVerifier {
    /// A verifier of the passes `api` issues, trusting `trust` (the API's origin as issuer, the
    /// chain and the registry); fetches the JWKS now.
    pub async fn new(api: ApiClient, trust: PassTrust) -> Result<Self> {
        Self::with_policy(api, trust, KeyCachePolicy::default()).await
    }

    /// [`PassVerifier::new`] keeping the keys by `policy` (the refetch interval, the lifetimes).
    pub async fn with_policy(api: ApiClient, trust: PassTrust, policy: KeyCachePolicy) -> Result<Self> {
        let verifier = Self {
            api,
            trust,
            keys: RwLock::new(KeyCache::new(policy)),
            fetching: tokio::sync::Mutex::new(()),
            lost_at: RwLock::new(HashMap::new()),
        };
        verifier.refresh(0, FetchReason::Stale).await?;
        Ok(verifier)
    }

    /// What the verifier trusts.
    pub fn trust(&self) -> &PassTrust {
        &self.trust
    }

    /// How many times the JWKS was fetched, or tried (the first fetch included).
    pub fn key_fetches(&self) -> u64 {
        self.cache().attempts()
    }

    /// Admits `jws` for a request whose ERC-8128 signature `signer` made (verified already): the
    /// pass verifies, is the signer's, states a compliant agent, and is not older than a loss of
    /// compliance the feed reported. [`crate::Error::PassRefused`] says why not;
    /// [`crate::Error::IssuerKeysUnavailable`] that no key is trusted now.
    pub async fn admit(&self, jws: &str, signer: Address) -> Result<VerifiedPass> {
        let pass = self.check(|jwks, now| admit_pass(jws, jwks, &self.trust, signer, now)).await?;
        pass.check_not_revoked(self.lost_at(pass.wallet))?;
        Ok(pass)
    }

    /// Verifies `jws` as a statement (compliant or not, whoever's), without admitting anyone.
    pub async fn verify(&self, jws: &str) -> Result<VerifiedPass> {
        self.check(|jwks, now| verify_pass(jws, jwks, &self.trust, now)).await
    }

    /// `check` with the keys held, fetched first when stale; once more when the pass names a
    /// key not held and a fetch for it may start, or one finished since (a rotation's crowd:
    /// those that checked while its fetch ran use its outcome, and ask for none of their own).
    async fn check(
        &self,
        check: impl Fn(&Jwks, u64) -> Result<VerifiedPass, PassRefusal>,
    ) -> Result<VerifiedPass> {
        let seen = self.cache().outcomes();
        if self.cache().is_stale(unix_ms()) {
            // A failed fetch leaves the keys as trusted as they were: `keys` bounds it.
            let _ = self.refresh(seen, FetchReason::Stale).await;
        }
        let (seen, outcome) = self.with_keys(&check)?;
        match outcome {
            Err(PassRefusal::UnknownKey(_)) => {
                // A fetch that fails leaves the key unknown: the pass's sender chose its kid,
                // and the provider answers it as a pass this issuer did not sign.
                let _ = self.refresh(seen, FetchReason::UnknownKey).await;
                Ok(self.with_keys(&check)?.1?)
            }
            outcome => Ok(outcome?),
        }
    }

    /// `check` run with the keys held now, and how many fetches had finished when they were read.
    fn with_keys<T>(&self, check: impl FnOnce(&Jwks, u64) -> T) -> Result<(u64, T)> {
        let now = unix_ms();
        let cache = self.cache();
        let jwks = cache.keys(now).ok_or_else(|| {
            Error::IssuerKeysUnavailable(format!(
                "the issuer's keys could not be fetched from {} since {} ms ago, when they stopped being trusted",
                kya_core::pass::JWKS_PATH,
                now.saturating_sub(cache.trusted_until_ms()),
            ))
        })?;
        Ok((cache.outcomes(), check(jwks, now / 1_000)))
    }

    /// Fetches the keys for `reason` if the cache lets a fetch start, unless one finished since
    /// the caller read `seen` outcomes (then that outcome stands). One at a time: callers wait
    /// for the fetch under way. An error only when this call fetched, and failed.
    async fn refresh(&self, seen: u64, reason: FetchReason) -> Result<()> {
        let _one_at_a_time = self.fetching.lock().await;
        let ticket = {
            let mut cache = self.cache_mut();
            if cache.outcomes() != seen {
                return Ok(());
            }
            match cache.begin_fetch(reason, unix_ms()) {
                Some(ticket) => ticket,
                None => return Ok(()),
            }
        };
        let mut in_flight = InFlight { keys: &self.keys, ticket: Some(ticket) };
        let fetched = self.api.jwks().await;
        let ticket = in_flight.ticket.take().expect("the ticket is taken once");
        let mut cache = self.cache_mut();
        match fetched {
            Ok((jwks, cache_control)) => {
                cache.fetched(ticket, jwks, cache_control.as_deref(), unix_ms());
                Ok(())
            }
            Err(error) => {
                cache.failed(ticket);
                Err(error)
            }
        }
    }

    fn cache(&self) -> RwLockReadGuard<'_, KeyCache> {
        self.keys.read().expect("the keys' lock")
    }

    fn cache_mut(&self) -> RwLockWriteGuard<'_, KeyCache> {
        self.keys.write().expect("the keys' lock")
    }

    /// Takes one feed event into account: a wallet not compliant at a block revokes its passes
    /// of that block and before.
    pub fn note(&self, event: &Event) {
        let Some((wallet, block)) = event.lost_compliance_at() else { return };
        let mut lost_at = self.lost_at.write().expect("the revocations' lock");
        lost_at.entry(wallet).and_modify(|seen| *seen = (*seen).max(block)).or_insert(block);
    }

    /// Follows the feed and notes each event, until the follower fails.
    pub async fn follow(&self, mut follower: ChangeFollower) -> Result<()> {
        loop {
            let event = follower.next().await?;
            self.note(&event);
        }
    }

    fn lost_at(&self, wallet: Address) -> Option<u64> {
        self.lost_at.read().expect("the revocations' lock").get(&wallet).copied()
    }
}

/// A fetch under way, failed if its future is dropped (a request cancelled mid-fetch): the
/// cache must not wait for an outcome that never comes.
struct InFlight<'a> {
    keys: &'a RwLock<KeyCache>,
    ticket: Option<FetchTicket>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.keys.write().expect("the keys' lock").failed(ticket);
        }
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}
