//! The provider-side pass verifier (`kya_client::PassVerifier`, which `PassGate` and `kya verify`
//! use) cannot be steered by whoever sends it passes (issue 65): a pass's `kid` is the sender's
//! choice and any keypair can sign one, so
//! - a crowd of passes naming made-up keys causes at most one JWKS fetch per refetch interval,
//!   one at a time, whether the fetches succeed or fail (it made one per pass);
//! - a key set that cannot be refreshed stops being trusted one lifetime past its freshness (it
//!   was trusted forever while the issuer was down, a key its operator removed included);
//! - `Cache-Control` is honoured within bounds: `no-store` is fetched again on use, and a
//!   `max-age` of 2^64 - 1 neither panics (it did: `Instant + Duration`) nor pins the keys.
//!
//! The issuer here is a real HTTP server on loopback whose JWKS, `Cache-Control` and
//! availability the test sets, and which counts its fetches: the Worker serves a fixed
//! `max-age=300` and cannot be made to fail on cue.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use alloy::primitives::{Address, B256, address};
use futures::future::join_all;
use kya_client::{ApiClient, Error, PassVerifier};
use kya_core::pass::{
    KeyCachePolicy, PassBlock, PassClaims, PassRefusal, PassTrust, SigningKey, SigningKeys, claims::Issue,
    jws,
};
use warp::Filter;

const ISSUER: &str = "https://kya.example";
const CHAIN_ID: u64 = 84532;
const REGISTRY: Address = address!("0x00000000000000000000000000000000000000a1");

/// What the issuer serves, as the test sets it.
struct Served {
    jwks: String,
    cache_control: String,
    up: bool,
}

/// The issuer's JWKS endpoint on loopback, counting the fetches it is asked.
struct Issuer {
    base: String,
    served: Arc<Mutex<Served>>,
    fetches: Arc<AtomicU64>,
    server: tokio::task::JoinHandle<()>,
}

impl Issuer {
    async fn start(keys: &[&SigningKey], cache_control: &str) -> Self {
        let served = Arc::new(Mutex::new(Served {
            jwks: jwks_of(keys),
            cache_control: cache_control.to_owned(),
            up: true,
        }));
        let fetches = Arc::new(AtomicU64::new(0));
        let route = {
            let (served, fetches) = (served.clone(), fetches.clone());
            warp::path!(".well-known" / "jwks.json").and(warp::get()).then(move || {
                let (served, fetches) = (served.clone(), fetches.clone());
                async move {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    // Slow enough that a crowd's requests all arrive while one fetch runs.
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    let served = served.lock().unwrap();
                    let (status, body) = match served.up {
                        true => (200, served.jwks.clone()),
                        false => (503, r#"{"error":"down"}"#.to_owned()),
                    };
                    warp::http::Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .header("cache-control", served.cache_control.clone())
                        .body(body)
                        .unwrap()
                }
            })
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let server = tokio::spawn(warp::serve(route).incoming(listener).run());
        Self { base: format!("http://{addr}"), served, fetches, server }
    }

    fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::SeqCst)
    }

    fn serve(&self, keys: &[&SigningKey]) {
        self.served.lock().unwrap().jwks = jwks_of(keys);
    }

    fn set_up(&self, up: bool) {
        self.served.lock().unwrap().up = up;
    }

    async fn verifier(&self, policy: KeyCachePolicy) -> kya_client::Result<PassVerifier> {
        let trust = PassTrust { issuer: ISSUER.to_owned(), chain_id: CHAIN_ID, registry: REGISTRY };
        PassVerifier::with_policy(ApiClient::new(&self.base)?, trust, policy).await
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn jwks_of(keys: &[&SigningKey]) -> String {
    let set = SigningKeys::new((*keys[0]).clone(), keys[1..].iter().map(|key| (*key).clone()).collect());
    serde_json::to_string(&set.public()).unwrap()
}

/// A key of its own for each `n`.
fn key(n: u32) -> SigningKey {
    let mut seed = [7u8; 32];
    seed[..4].copy_from_slice(&n.to_be_bytes());
    SigningKey::from_seed(&seed)
}

/// A pass signed by `key`: a statement about an unregistered wallet, current for 300 s.
fn pass(key: &SigningKey) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let issue = Issue {
        issuer: ISSUER,
        chain_id: CHAIN_ID,
        registry: REGISTRY,
        wallet: address!("0x00000000000000000000000000000000000000b2"),
        block: PassBlock { number: 7, hash: B256::repeat_byte(0xab), time: now },
        grace_period: 604_800,
        now,
        ttl_secs: 300,
        jti: format!("pass-{}", key.kid()),
    };
    jws::sign(&PassClaims::new(issue, None), key)
}

fn policy(refetch_interval_ms: u64) -> KeyCachePolicy {
    KeyCachePolicy { refetch_interval_ms, ..KeyCachePolicy::default() }
}

/// The verifier made `attempts` fetches of the keys (its own count), and the issuer was asked
/// for them that many times, or up to twice as many: an attempt whose kept-alive connection the
/// server had closed is sent once more (`send_once_more_if_closed`: one attempt, sent twice).
fn assert_fetches(issuer: &Issuer, verifier: &PassVerifier, attempts: u64, when: &str) {
    assert_eq!(verifier.key_fetches(), attempts, "{when}: the verifier's attempts");
    let asked = issuer.fetches();
    assert!((attempts..=2 * attempts).contains(&asked), "{when}: the issuer was asked {asked} times");
}

/// As [`assert_fetches`], for a crowd let loose `since` the window opened: the policy allows
/// one attempt per `interval_ms`, so a crowd that took longer than a window (a loaded machine:
/// each check is a signature verified) may have started one more per window it spanned.
fn assert_crowd_fetches(
    issuer: &Issuer,
    verifier: &PassVerifier,
    attempts: u64,
    since: Instant,
    interval_ms: u64,
    when: &str,
) {
    let windows_spanned = since.elapsed().as_millis() as u64 / interval_ms;
    let made = verifier.key_fetches();
    assert!(
        (attempts..=attempts + windows_spanned).contains(&made),
        "{when}: the verifier made {made} attempts, {attempts} expected ({windows_spanned} more windows spanned)"
    );
    let asked = issuer.fetches();
    assert!((made..=2 * made).contains(&asked), "{when}: the issuer was asked {asked} times");
}

fn is_unknown_key(outcome: &kya_client::Result<kya_core::pass::VerifiedPass>) -> bool {
    matches!(outcome, Err(Error::PassRefused(PassRefusal::UnknownKey(_))))
}

#[tokio::test]
async fn made_up_kids_cause_one_fetch_per_window_and_a_rotation_one_for_all() {
    let issuer_key = key(0);
    let issuer = Issuer::start(&[&issuer_key], "public, max-age=300").await;
    let verifier = issuer.verifier(policy(2_000)).await.unwrap();
    assert_fetches(&issuer, &verifier, 1, "at start");
    assert!(verifier.verify(&pass(&issuer_key)).await.is_ok());

    // 200 passes at once, each naming a key nobody serves: one fetch (a window has passed
    // since the first), then none until the next window.
    const WINDOW_MS: u64 = 2_000;
    let strangers: Vec<String> = (1..=200).map(|n| pass(&key(n))).collect();
    tokio::time::sleep(Duration::from_millis(WINDOW_MS + 100)).await;
    let window = Instant::now();
    let outcomes = join_all(strangers.iter().map(|jws| verifier.verify(jws))).await;
    assert!(outcomes.iter().all(is_unknown_key), "{:?}", outcomes.iter().find(|o| !is_unknown_key(o)));
    assert_crowd_fetches(&issuer, &verifier, 2, window, WINDOW_MS, "one fetch for 200 made-up kids");
    let outcomes = join_all(strangers.iter().map(|jws| verifier.verify(jws))).await;
    assert!(outcomes.iter().all(is_unknown_key));
    assert_crowd_fetches(&issuer, &verifier, 2, window, WINDOW_MS, "none more within the window");

    // Failing fetches are attempts too: the issuer down, a crowd each window makes one.
    issuer.set_up(false);
    for _ in 1..=2 {
        tokio::time::sleep(Duration::from_millis(WINDOW_MS + 100)).await;
        let before = verifier.key_fetches();
        let window = Instant::now();
        let outcomes = join_all(strangers.iter().map(|jws| verifier.verify(jws))).await;
        assert!(outcomes.iter().all(is_unknown_key));
        let made = verifier.key_fetches() - before;
        let spanned = window.elapsed().as_millis() as u64 / WINDOW_MS;
        assert!(
            (1..=1 + spanned).contains(&made),
            "failed attempts in a window: {made} ({spanned} more spanned)"
        );
    }
    // The keys held still verify meanwhile (fresh for 300 s).
    assert!(verifier.verify(&pass(&issuer_key)).await.is_ok());

    // A real rotation: the new key's passes, 50 at once, all verify after one fetch, those
    // that arrived during it included (they wait for its outcome, and those that checked
    // while it ran ask for none of their own, however long the crowd takes).
    issuer.set_up(true);
    let rotated = key(1_000);
    issuer.serve(&[&rotated, &issuer_key]);
    let rotated_passes: Vec<String> = (0..50).map(|_| pass(&rotated)).collect();
    tokio::time::sleep(Duration::from_millis(WINDOW_MS + 100)).await;
    let before = verifier.key_fetches();
    let outcomes = join_all(rotated_passes.iter().map(|jws| verifier.verify(jws))).await;
    let kids: Vec<String> = outcomes.into_iter().map(|outcome| outcome.unwrap().kid).collect();
    assert!(kids.iter().all(|kid| kid == rotated.kid()));
    assert_eq!(verifier.key_fetches(), before + 1, "one fetch for 50 passes of a new key");
}

#[tokio::test]
async fn a_removed_key_is_refused_within_the_bound_while_the_issuer_is_down() {
    let removed = key(0);
    // Fresh for 2 s, so trusted until 4 s after the fetch (one lifetime past freshness).
    let issuer = Issuer::start(&[&removed], "max-age=2").await;
    let fetched = Instant::now();
    let verifier = issuer.verifier(policy(1_000)).await.unwrap();
    let jws = pass(&removed);
    assert!(verifier.verify(&jws).await.is_ok());

    // The operator removes the key, and the endpoint is down: past freshness, the keys held
    // still decide (the issuer may be down for a moment)...
    issuer.serve(&[&key(1)]);
    issuer.set_up(false);
    tokio::time::sleep(Duration::from_millis(2_500).saturating_sub(fetched.elapsed())).await;
    assert!(verifier.verify(&jws).await.is_ok(), "stale keys decide within the bound");
    // ...and no longer once it has passed: no pass at all is trusted, the removed key's first.
    let refused = loop {
        match verifier.verify(&jws).await {
            Ok(_) => {
                assert!(fetched.elapsed() < Duration::from_secs(6), "trusted past its bound");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => break error,
        }
    };
    assert!(fetched.elapsed() >= Duration::from_millis(3_900), "refused at {:?}", fetched.elapsed());
    let Error::IssuerKeysUnavailable(message) = &refused else { panic!("{refused:?}") };
    assert!(message.contains("/.well-known/jwks.json"), "{message}");
    let attempts = verifier.key_fetches();
    assert!((2..=6).contains(&attempts), "about one failed attempt a second: {attempts}");

    // Back up: the key set read again, and the removed key is unknown.
    issuer.set_up(true);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let outcome = verifier.verify(&jws).await;
    assert!(is_unknown_key(&outcome), "{outcome:?}");
    assert!(verifier.verify(&pass(&key(1))).await.is_ok());
}

#[tokio::test]
async fn cache_control_is_honoured_within_bounds() {
    // `max-age` of 2^64 - 1: no panic, and the keys verify.
    let issuer_key = key(0);
    let issuer = Issuer::start(&[&issuer_key], "max-age=18446744073709551615").await;
    let verifier = issuer.verifier(policy(1_000)).await.unwrap();
    assert!(verifier.verify(&pass(&issuer_key)).await.is_ok());
    drop(issuer);

    // `no-store`: fetched again on use, at most once an interval (it was kept 300 s).
    let issuer = Issuer::start(&[&issuer_key], "no-store").await;
    let verifier = issuer.verifier(policy(1_000)).await.unwrap();
    let jws = pass(&issuer_key);
    let window = Instant::now();
    for _ in 0..20 {
        assert!(verifier.verify(&jws).await.is_ok());
    }
    assert_crowd_fetches(&issuer, &verifier, 1, window, 1_000, "throttled within the interval");
    let before = verifier.key_fetches();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert!(verifier.verify(&jws).await.is_ok());
    assert_eq!(verifier.key_fetches(), before + 1, "read again once the interval passed");
    // A JWKS that is not one: the first fetch fails, and says so.
    let broken = Issuer::start(&[&issuer_key], "max-age=300").await;
    broken.served.lock().unwrap().jwks = "{\"keys\": 5}".to_owned();
    let error = broken.verifier(policy(1_000)).await.unwrap_err();
    assert!(matches!(error, Error::Unexpected { .. }), "{error:?}");
}
