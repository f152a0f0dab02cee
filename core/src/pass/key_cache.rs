//! How a verifier keeps the issuer's keys between fetches of `/.well-known/jwks.json`, so that
//! no stranger can steer it: whoever sends a pass chooses its `kid`, and any keypair can sign
//! one, so "fetch again for a key not held yet" must not become a fetch per request, nor a key
//! set that outlives its issuer's say-so.
//!
//! - **Attempts, not successes, are throttled**: at most one fetch starts per
//!   [`KeyCachePolicy::refetch_interval_ms`], whether the last one worked or not, and one at a
//!   time. 200 requests naming made-up kids at once cause one fetch; while the endpoint fails,
//!   one a window.
//! - **Trust is bounded**: keys are fresh for their `Cache-Control` lifetime (`max-age`, clamped
//!   to a day; `no-store` and `no-cache` are no lifetime at all) and trusted until one more
//!   lifetime has passed (at least one refetch interval). A key set that cannot be refreshed by
//!   then stops verifying anything: a key its operator removed is not trusted forever because
//!   the endpoint went down.
//!
//! No I/O and no clock: the host fetches, and passes the time in (milliseconds, as hosts
//! count). One implementation for the Rust verifier, the browser package and the Python one.

use super::keys::Jwks;

/// The settings of a [`KeyCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyCachePolicy {
    /// The shortest time between two fetch attempts.
    pub refetch_interval_ms: u64,
    /// How long keys are fresh when the JWKS's `Cache-Control` says nothing (the Worker sends
    /// `max-age=300`).
    pub default_lifetime_ms: u64,
    /// The longest lifetime a `max-age` may give.
    pub max_lifetime_ms: u64,
}

impl KeyCachePolicy {
    /// 10 s between attempts (INTERFACE.md section 7's "at most every 10 s").
    pub const DEFAULT_REFETCH_INTERVAL_MS: u64 = 10_000;
    pub const DEFAULT_LIFETIME_MS: u64 = 300_000;
    /// A day: a `max-age` of years (or of 2^64 - 1) must not pin a key set.
    pub const MAX_LIFETIME_MS: u64 = 86_400_000;
}

impl Default for KeyCachePolicy {
    fn default() -> Self {
        Self {
            refetch_interval_ms: Self::DEFAULT_REFETCH_INTERVAL_MS,
            default_lifetime_ms: Self::DEFAULT_LIFETIME_MS,
            max_lifetime_ms: Self::MAX_LIFETIME_MS,
        }
    }
}

impl KeyCachePolicy {
    /// How long a JWKS served with `cache_control` (the header's values, joined or not) is
    /// fresh: 0 for `no-store` or `no-cache` (revalidate on every use, throttled), `max-age`
    /// clamped to [`KeyCachePolicy::max_lifetime_ms`] (any number of digits, never overflowing),
    /// else the default. An unreadable `max-age` is no `max-age`.
    pub fn lifetime_ms(&self, cache_control: Option<&str>) -> u64 {
        let directives = cache_control.into_iter().flat_map(|value| value.split(',')).map(str::trim);
        let mut max_age = None;
        for directive in directives {
            let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
            let name = name.trim();
            if name.eq_ignore_ascii_case("no-store") || name.eq_ignore_ascii_case("no-cache") {
                return 0;
            }
            if name.eq_ignore_ascii_case("max-age") && max_age.is_none() {
                max_age = seconds_ms(value.trim().trim_matches('"'));
            }
        }
        max_age.unwrap_or(self.default_lifetime_ms).min(self.max_lifetime_ms)
    }
}

/// `delta-seconds` (RFC 9111 section 1.2.2: digits only) in milliseconds, saturating.
fn seconds_ms(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Digits only, so the one parse failure left is overflow.
    let seconds = match digits.trim_start_matches('0') {
        "" => 0,
        significant => significant.parse::<u64>().unwrap_or(u64::MAX),
    };
    Some(seconds.saturating_mul(1_000))
}

/// Why a verifier wants the keys fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchReason {
    /// None held, or past their freshness.
    Stale,
    /// A pass names a `kid` the held keys do not have: perhaps a rotation, perhaps made up.
    UnknownKey,
}

/// A fetch the cache let start; hand it back with the outcome.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a started fetch must be finished with `fetched` or `failed`, or no other starts"]
pub struct FetchTicket {
    attempt: u64,
}

/// The issuer's keys as a verifier holds them (`K`: parsed, or the host's own value of the
/// document, as the browser package keeps it), and when to fetch them again.
#[derive(Debug, Clone)]
pub struct KeyCache<K = Jwks> {
    policy: KeyCachePolicy,
    jwks: Option<K>,
    fresh_until_ms: u64,
    trusted_until_ms: u64,
    last_attempt_ms: Option<u64>,
    /// Attempts started so far.
    attempts: u64,
    /// Attempts finished so far, with keys or without: a caller that checked a pass against the
    /// keys held when `n` had finished, and reads more, has new keys (or a failure) to go by,
    /// and asks for no fetch of its own.
    outcomes: u64,
    in_flight: bool,
}

impl<K> KeyCache<K> {
    pub fn new(policy: KeyCachePolicy) -> Self {
        Self {
            policy,
            jwks: None,
            fresh_until_ms: 0,
            trusted_until_ms: 0,
            last_attempt_ms: None,
            attempts: 0,
            outcomes: 0,
            in_flight: false,
        }
    }

    pub fn policy(&self) -> &KeyCachePolicy {
        &self.policy
    }

    /// The keys to verify with at `now_ms`: `None` when none were ever fetched, or when the last
    /// successful fetch is past its trust bound (the issuer could not be asked in time).
    pub fn keys(&self, now_ms: u64) -> Option<&K> {
        self.jwks.as_ref().filter(|_| now_ms < self.trusted_until_ms)
    }

    /// Whether the keys should be fetched again before use: none held, or not fresh.
    pub fn is_stale(&self, now_ms: u64) -> bool {
        self.jwks.is_none() || now_ms >= self.fresh_until_ms
    }

    /// When the held keys stop being trusted (Unix milliseconds; 0 with none).
    pub fn trusted_until_ms(&self) -> u64 {
        self.trusted_until_ms
    }

    /// How many fetches have started.
    pub fn attempts(&self) -> u64 {
        self.attempts
    }

    /// How many fetches have finished, successful or not.
    pub fn outcomes(&self) -> u64 {
        self.outcomes
    }

    /// Whether a fetch is under way.
    pub fn in_flight(&self) -> bool {
        self.in_flight
    }

    /// Starts a fetch for `reason` if one may start at `now_ms`: none under way, and none
    /// attempted within the refetch interval (the very first always may). Fresh keys need no
    /// fetch for [`FetchReason::Stale`].
    pub fn begin_fetch(&mut self, reason: FetchReason, now_ms: u64) -> Option<FetchTicket> {
        if self.in_flight || (reason == FetchReason::Stale && !self.is_stale(now_ms)) {
            return None;
        }
        let throttled = self
            .last_attempt_ms
            .is_some_and(|last| now_ms.saturating_sub(last) < self.policy.refetch_interval_ms);
        if throttled {
            return None;
        }
        self.last_attempt_ms = Some(now_ms);
        self.attempts += 1;
        self.in_flight = true;
        Some(FetchTicket { attempt: self.attempts })
    }

    /// The fetch `ticket` started returned `jwks`, served with `cache_control`, at `now_ms`.
    pub fn fetched(&mut self, ticket: FetchTicket, jwks: K, cache_control: Option<&str>, now_ms: u64) {
        self.finish(ticket);
        let lifetime = self.policy.lifetime_ms(cache_control);
        self.jwks = Some(jwks);
        self.fresh_until_ms = now_ms.saturating_add(lifetime);
        // One lifetime past freshness, and never less than the time until the next attempt may
        // start: keys served `no-store` still verify until they can be asked for again.
        let grace = lifetime.max(self.policy.refetch_interval_ms);
        self.trusted_until_ms = self.fresh_until_ms.saturating_add(grace);
    }

    /// The fetch `ticket` started failed (unreachable, an error status, not a JWKS): the keys
    /// held stay as trusted as they were, no longer.
    pub fn failed(&mut self, ticket: FetchTicket) {
        self.finish(ticket);
    }

    fn finish(&mut self, ticket: FetchTicket) {
        debug_assert_eq!(ticket.attempt, self.attempts, "one fetch at a time");
        self.in_flight = false;
        self.outcomes += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: KeyCachePolicy = KeyCachePolicy {
        refetch_interval_ms: 10_000,
        default_lifetime_ms: 300_000,
        max_lifetime_ms: 86_400_000,
    };

    fn jwks() -> Jwks {
        Jwks::from_json(r#"{"keys":[]}"#).unwrap()
    }

    #[test]
    fn cache_control_lifetimes() {
        let lifetime = |value: &str| POLICY.lifetime_ms(Some(value));
        assert_eq!(POLICY.lifetime_ms(None), 300_000);
        assert_eq!(lifetime("public, max-age=300"), 300_000);
        assert_eq!(lifetime("MAX-AGE=60"), 60_000);
        assert_eq!(lifetime("max-age=\"120\""), 120_000);
        assert_eq!(lifetime("max-age=0"), 0);
        // Clamped to a day, whatever the digits: 2^64 - 1 seconds panicked `Instant + Duration`.
        assert_eq!(lifetime("max-age=18446744073709551615"), 86_400_000);
        assert_eq!(lifetime(&format!("max-age={}", "9".repeat(400))), 86_400_000);
        assert_eq!(lifetime("max-age=00000000000000000000000000000007"), 7_000);
        // no-store and no-cache: nothing to keep, wherever they stand.
        assert_eq!(lifetime("no-store"), 0);
        assert_eq!(lifetime("max-age=300, no-cache"), 0);
        assert_eq!(lifetime("private, No-Cache=\"set-cookie\""), 0);
        // Unreadable max-age: the default.
        for value in ["max-age=-1", "max-age=1.5", "max-age=", "max-age=ten", "s-maxage=5", ""] {
            assert_eq!(lifetime(value), 300_000, "{value}");
        }
        // The first max-age counts (RFC 9111 4.2.1 leaves duplicates to the cache).
        assert_eq!(lifetime("max-age=5, max-age=500"), 5_000);
    }

    #[test]
    fn attempts_are_throttled_whether_they_succeed_or_not() {
        let mut cache = KeyCache::<Jwks>::new(POLICY);
        let first = cache.begin_fetch(FetchReason::Stale, 1_000).expect("the first fetch");
        // One at a time: 200 callers while it runs start nothing.
        for _ in 0..200 {
            assert_eq!(cache.begin_fetch(FetchReason::UnknownKey, 1_001), None);
        }
        assert_eq!((cache.attempts(), cache.outcomes()), (1, 0), "started, not finished");
        cache.failed(first);
        assert_eq!(cache.outcomes(), 1, "a failure is an outcome");
        // Failed, and within the interval: still nothing (a success did not reset the clock,
        // nor does a failure).
        assert_eq!(cache.begin_fetch(FetchReason::UnknownKey, 10_999), None);
        let second = cache.begin_fetch(FetchReason::UnknownKey, 11_000).expect("a window later");
        cache.fetched(second, jwks(), Some("max-age=300"), 11_200);
        assert_eq!(cache.begin_fetch(FetchReason::UnknownKey, 20_999), None);
        assert!(cache.begin_fetch(FetchReason::UnknownKey, 21_000).is_some());
        assert_eq!((cache.attempts(), cache.outcomes()), (3, 2));
    }

    #[test]
    fn fresh_keys_need_no_fetch_and_stale_ones_do() {
        let mut cache = KeyCache::<Jwks>::new(POLICY);
        assert!(cache.is_stale(0) && cache.keys(0).is_none());
        let ticket = cache.begin_fetch(FetchReason::Stale, 0).unwrap();
        cache.fetched(ticket, jwks(), Some("max-age=60"), 0);
        assert!(!cache.is_stale(59_999));
        assert_eq!(cache.begin_fetch(FetchReason::Stale, 30_000), None, "fresh");
        assert!(cache.is_stale(60_000));
        assert!(cache.begin_fetch(FetchReason::Stale, 60_000).is_some());
    }

    #[test]
    fn keys_that_cannot_be_refreshed_stop_being_trusted_one_lifetime_past_freshness() {
        let mut cache = KeyCache::<Jwks>::new(POLICY);
        let ticket = cache.begin_fetch(FetchReason::Stale, 0).unwrap();
        cache.fetched(ticket, jwks(), Some("max-age=60"), 0);
        assert_eq!(cache.trusted_until_ms(), 120_000);
        // The endpoint is down from here: every attempt fails.
        for now in (60_000..120_000).step_by(10_000) {
            let ticket = cache.begin_fetch(FetchReason::Stale, now).expect("one a window");
            cache.failed(ticket);
            assert!(cache.keys(now).is_some(), "still trusted at {now}");
        }
        assert!(cache.keys(119_999).is_some());
        assert!(cache.keys(120_000).is_none(), "no longer trusted");
        // A fetch that works again restores them.
        let ticket = cache.begin_fetch(FetchReason::Stale, 130_000).unwrap();
        cache.fetched(ticket, jwks(), None, 130_000);
        assert!(cache.keys(130_000).is_some());
        assert_eq!(cache.trusted_until_ms(), 130_000 + 600_000);
    }

    #[test]
    fn no_store_keys_verify_until_they_may_be_asked_for_again() {
        let mut cache = KeyCache::<Jwks>::new(POLICY);
        let ticket = cache.begin_fetch(FetchReason::Stale, 5_000).unwrap();
        cache.fetched(ticket, jwks(), Some("no-store"), 5_000);
        assert!(cache.is_stale(5_000), "revalidated on every use");
        assert!(cache.keys(14_999).is_some());
        assert!(cache.keys(15_000).is_none());
        assert_eq!(cache.begin_fetch(FetchReason::Stale, 14_999), None, "throttled");
        assert!(cache.begin_fetch(FetchReason::Stale, 15_000).is_some());
    }

    #[test]
    fn a_huge_max_age_neither_overflows_nor_pins_the_keys() {
        let mut cache = KeyCache::<Jwks>::new(POLICY);
        let ticket = cache.begin_fetch(FetchReason::Stale, u64::MAX - 5).unwrap();
        cache.fetched(ticket, jwks(), Some("max-age=18446744073709551615"), u64::MAX - 5);
        assert_eq!(cache.trusted_until_ms(), u64::MAX);
        let mut cache = KeyCache::<Jwks>::new(POLICY);
        let ticket = cache.begin_fetch(FetchReason::Stale, 0).unwrap();
        cache.fetched(ticket, jwks(), Some("max-age=18446744073709551615"), 0);
        assert!(cache.is_stale(86_400_000), "a day at most");
    }
}
