//! A provider's offline check of KYA passes (INTERFACE.md section 7): the issuer's JWKS fetched
//! once and kept as its `Cache-Control` allows, fetched again for a key it does not hold yet (a
//! rotation), and, when the verifier follows the change feed, a pass older than its wallet's
//! loss of compliance refused. Each check is `kya_core::pass`'s, in microseconds, with no call
//! to the API.

use std::{
    collections::HashMap,
    sync::RwLock,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use alloy::primitives::Address;
use kya_core::{
    feed::Event,
    pass::{
        Jwks, PassRefusal, PassTrust, VerifiedPass,
        verify::{admit_pass, verify_pass},
    },
};

use crate::{ApiClient, ChangeFollower, Result};

/// How long keys are kept when the JWKS says nothing (the Worker says 300 s).
const DEFAULT_KEYS_MAX_AGE: Duration = Duration::from_secs(300);
/// The shortest time between two fetches for an unknown `kid`: passes naming made-up keys
/// cannot turn the verifier into a client that calls the API for every request.
const UNKNOWN_KID_REFETCH: Duration = Duration::from_secs(10);

/// The issuer's keys as last fetched.
#[derive(Debug)]
struct Keys {
    jwks: Jwks,
    fresh_until: Instant,
    fetched_at: Instant,
}

/// Checks passes offline against one issuer. Shared by a provider's request handlers (it is
/// `Sync`); [`PassVerifier::follow`] keeps its revocations while it runs.
#[derive(Debug)]
pub struct PassVerifier {
    api: ApiClient,
    trust: PassTrust,
    keys: RwLock<Keys>,
    /// The latest block at which each wallet was seen not compliant, from the change feed.
    lost_at: RwLock<HashMap<Address, u64>>,
}

impl PassVerifier {
    /// A verifier of the passes `api` issues, trusting `trust` (the API's origin as issuer, the
    /// chain and the registry); fetches the JWKS now.
    pub async fn new(api: ApiClient, trust: PassTrust) -> Result<Self> {
        let (jwks, max_age) = api.jwks().await?;
        let now = Instant::now();
        let keys = Keys { jwks, fresh_until: now + max_age.unwrap_or(DEFAULT_KEYS_MAX_AGE), fetched_at: now };
        Ok(Self { api, trust, keys: RwLock::new(keys), lost_at: RwLock::new(HashMap::new()) })
    }

    /// What the verifier trusts.
    pub fn trust(&self) -> &PassTrust {
        &self.trust
    }

    /// Admits `jws` for a request whose ERC-8128 signature `signer` made (verified already): the
    /// pass verifies, is the signer's, states a compliant agent, and is not older than a loss of
    /// compliance the feed reported. [`crate::Error::PassRefused`] says why not.
    pub async fn admit(&self, jws: &str, signer: Address) -> Result<VerifiedPass> {
        let pass = self.check(|jwks, now| admit_pass(jws, jwks, &self.trust, signer, now)).await?;
        pass.check_not_revoked(self.lost_at(pass.wallet))?;
        Ok(pass)
    }

    /// Verifies `jws` as a statement (compliant or not, whoever's), without admitting anyone.
    pub async fn verify(&self, jws: &str) -> Result<VerifiedPass> {
        self.check(|jwks, now| verify_pass(jws, jwks, &self.trust, now)).await
    }

    /// `check` with fresh keys, and once more with keys fetched again when the pass names a key
    /// not held (at most every [`UNKNOWN_KID_REFETCH`]).
    async fn check(
        &self,
        check: impl Fn(&Jwks, u64) -> Result<VerifiedPass, PassRefusal>,
    ) -> Result<VerifiedPass> {
        let (stale, may_refetch) = {
            let keys = self.keys.read().expect("the keys' lock");
            (Instant::now() >= keys.fresh_until, keys.fetched_at.elapsed() >= UNKNOWN_KID_REFETCH)
        };
        if stale {
            // Keys that cannot be fetched again are kept: a provider decides while the API is
            // unreachable, with the keys it has.
            let _ = self.refetch().await;
        }
        let outcome = check(&self.keys.read().expect("the keys' lock").jwks, unix_now());
        match outcome {
            Err(PassRefusal::UnknownKey(_)) if may_refetch && !stale => {
                self.refetch().await?;
                Ok(check(&self.keys.read().expect("the keys' lock").jwks, unix_now())?)
            }
            outcome => Ok(outcome?),
        }
    }

    async fn refetch(&self) -> Result<()> {
        let (jwks, max_age) = self.api.jwks().await?;
        let now = Instant::now();
        *self.keys.write().expect("the keys' lock") =
            Keys { jwks, fresh_until: now + max_age.unwrap_or(DEFAULT_KEYS_MAX_AGE), fetched_at: now };
        Ok(())
    }

    /// Takes one feed event into account: a wallet not compliant at a block revokes its passes
    /// of that block and before.
    pub fn note(&self, event: &Event) {
        if event.change.standing.is_compliant {
            return;
        }
        let mut lost_at = self.lost_at.write().expect("the revocations' lock");
        let block = event.change.block.number;
        lost_at.entry(event.change.wallet).and_modify(|seen| *seen = (*seen).max(block)).or_insert(block);
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

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}
