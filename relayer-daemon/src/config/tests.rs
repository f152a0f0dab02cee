//! The configuration read from settings as the daemon reads its environment.

use std::collections::HashMap;

use super::{budget::share, chain::DEFAULT_RPC_URL, keys::DEFAULT_LEASE_SECS, store::DEFAULT_DB_PATH, *};
use crate::store::{DatabaseUrl, Location};

const KEY: &str = "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6";

fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> =
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    move |name| map.get(name).cloned()
}

fn base() -> Vec<(&'static str, &'static str)> {
    vec![
        ("REGISTRY_ADDRESS", "0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23"),
        ("FORWARDER_ADDRESS", "0x70c2fdD0CDada6b43195981928D76f5D32AE29e5"),
        ("RELAYER_KEY", KEY),
    ]
}

#[test]
fn defaults_are_the_specs_limits() {
    let config = Config::from_lookup(lookup(&base())).unwrap();
    assert_eq!(config.server.port, 3001);
    assert_eq!(config.relay.rate_limit_per_ip, 20);
    assert_eq!(config.relay.rate_limit_per_signer, 10);
    assert_eq!(config.budget.daily_gas_budget_wei, 50_000_000_000_000_000);
    assert_eq!(config.relay.min_balance_wei, 1_000_000_000_000_000);
    assert_eq!(config.chain.rpc_url.as_str(), DEFAULT_RPC_URL);
    assert_eq!(config.keys.signers[0].address().to_string(), "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720");
    assert_eq!(config.budget.signer_share_wei(), 2_500_000_000_000_000, "5% of 0.05 ETH");
    assert_eq!(config.budget.client_share_wei(), 5_000_000_000_000_000, "10% of 0.05 ETH");
    assert_eq!(config.relay.deadline_margin_secs, 120);
    assert_eq!((config.budget.slices.get(), config.budget.window_secs), (24, 86_400), "an hour a slice");
    assert_eq!(config.keys.handoff_wait, std::time::Duration::from_secs(10));
    assert!(config.server.trusted_proxies.is_empty());
    assert_eq!(config.server.metrics_address.to_string(), "127.0.0.1:9464");
}

#[test]
fn shares_round_down_without_overflow() {
    assert_eq!(share(199, 50), 99);
    assert_eq!(share(u128::MAX, 100), u128::MAX);
    assert_eq!(share(u128::MAX, 1), u128::MAX / 100);
    let mut settings = base();
    settings.push(("CLIENT_BUDGET_SHARE_PERCENT", "0"));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(error.contains("CLIENT_BUDGET_SHARE_PERCENT must be a whole percent"), "{error}");
    let mut settings = base();
    settings.push(("TRUSTED_PROXIES", "10.0.0.0/8, nginx"));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(error.contains("TRUSTED_PROXIES") && error.contains("nginx"), "{error}");
    let mut settings = base();
    settings.push(("RELAY_RETENTION_DAYS", "1"));
    assert!(Config::from_lookup(lookup(&settings)).is_err());
}

#[test]
fn the_key_never_shows_in_debug_or_errors() {
    let config = Config::from_lookup(lookup(&base())).unwrap();
    let printed = format!("{config:?}");
    assert!(!printed.contains(&KEY[2..]), "{printed}");
    assert!(printed.to_lowercase().contains("0xa0ee7a142d267c1f36714e4a8f75612f20a79720"));

    let mut hosted = base();
    hosted.push(("RPC_URL", "https://user:PASSWORD@node.example/v2/PATHKEY?apikey=QUERYKEY"));
    let printed = format!("{:?}", Config::from_lookup(lookup(&hosted)).unwrap());
    for secret in ["PASSWORD", "PATHKEY", "QUERYKEY", "user"] {
        assert!(!printed.contains(secret), "{printed}");
    }
    assert!(printed.contains("https://node.example/…"), "{printed}");

    let mut broken = base();
    broken[2] = ("RELAYER_KEY", "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d4");
    let error = Config::from_lookup(lookup(&broken)).unwrap_err().to_string();
    assert!(!error.contains("2a871d07"), "{error}");
    assert!(error.contains("RELAYER_KEY"));
}

#[test]
fn webhook_settings_come_in_pairs_and_the_secret_never_shows() {
    assert!(Config::from_lookup(lookup(&base())).unwrap().webhook.is_none());
    // 32 bytes as Standard Webhooks writes them, and 40 raw bytes.
    let encoded = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwg7duQoLFbaY=";
    let raw = "a-raw-webhook-secret-of-forty-bytes-long";
    for (secret, bytes) in [(encoded, 32), (raw, 40)] {
        let mut settings = base();
        settings.push(("WEBHOOK_URL", "http://hooks.example/relays?token=URLTOKEN"));
        settings.push(("WEBHOOK_SECRET", secret));
        let config = Config::from_lookup(lookup(&settings)).unwrap();
        let webhook = config.webhook.as_ref().unwrap();
        assert_eq!(webhook.secret.bytes().len(), bytes);
        assert_eq!((webhook.concurrency, webhook.timeout.as_secs()), (8, 10));
        let printed = format!("{config:?}");
        for hidden in [&secret[6..], "URLTOKEN", "MfKQ9r8G", "forty-bytes"] {
            assert!(!printed.contains(hidden), "{printed}");
        }
        assert!(printed.contains(&format!("WebhookSecret({bytes} bytes, redacted)")), "{printed}");
    }
    for (pairs, named) in [
        (vec![("WEBHOOK_URL", "http://hooks.example/")], "WEBHOOK_URL is set without WEBHOOK_SECRET"),
        (vec![("WEBHOOK_SECRET", raw)], "WEBHOOK_SECRET is set without WEBHOOK_URL"),
        (
            vec![("WEBHOOK_URL", "http://hooks.example/"), ("WEBHOOK_SECRET", "whsec_c2hvcnQtU0VDUkVU")],
            "WEBHOOK_SECRET must be at least 32 bytes",
        ),
        (
            vec![("WEBHOOK_URL", "http://hooks.example/"), ("WEBHOOK_SECRET", "whsec_!!not-base64-SECRET!!")],
            "whsec_ must be followed by base64",
        ),
        (
            vec![("WEBHOOK_URL", "ftp://hooks.example/"), ("WEBHOOK_SECRET", raw)],
            "must be an http:// or https:// URL",
        ),
    ] {
        let mut settings = base();
        settings.extend(pairs);
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains(named), "{error}");
        for hidden in ["c2hvcnQ", "short-", "forty-bytes", "not-base64"] {
            assert!(!error.contains(hidden), "{error}");
        }
    }
}

#[test]
fn database_url_picks_postgres_and_never_shows_its_password() {
    let config = Config::from_lookup(lookup(&base())).unwrap();
    assert!(
        matches!(config.store.location(), Location::Sqlite(path) if path == std::path::Path::new(DEFAULT_DB_PATH))
    );
    for scheme in ["postgres", "postgresql"] {
        let mut settings = base();
        let url = format!("{scheme}://kya:PG-SECRET@db.internal:5432/relayer");
        settings.push(("DATABASE_URL", &url));
        let config = Config::from_lookup(lookup(&settings)).unwrap();
        let location = config.store.location();
        assert!(matches!(&location, Location::Postgres(_)), "{location:?}");
        assert_eq!(location.to_string(), format!("PostgreSQL {scheme}://db.internal:5432/…"));
        let printed = format!("{config:?}");
        assert!(!printed.contains("PG-SECRET") && !printed.contains("kya:"), "{printed}");
        assert!(printed.contains(&format!("DatabaseUrl({scheme}://db.internal:5432/…)")), "{printed}");
        assert_eq!(
            config.store.database_url.as_ref().map(DatabaseUrl::pool_size),
            Some(8),
            "the default pool"
        );
    }
    let mut settings = base();
    settings.extend([("DATABASE_URL", "postgres://db.internal/relayer"), ("DATABASE_POOL_SIZE", "3")]);
    let config = Config::from_lookup(lookup(&settings)).unwrap();
    assert_eq!(config.store.database_url.as_ref().map(DatabaseUrl::pool_size), Some(3));
    settings.push(("DATABASE_POOL_SIZE", "0"));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(error.contains("DATABASE_POOL_SIZE must be between 1 and 1000"), "{error}");
    // The daemon's own deadline on a store call: 15 s unless set, never 0 (no deadline: a hang).
    let mut settings = base();
    settings.push(("DATABASE_URL", "postgres://db.internal/relayer"));
    let call = |settings: &[(&str, &str)]| {
        Config::from_lookup(lookup(settings)).map(|config| config.store.database_url.unwrap().timeouts().call)
    };
    assert_eq!(call(&settings).unwrap(), std::time::Duration::from_secs(15));
    settings.push(("DATABASE_CALL_TIMEOUT_MS", "2500"));
    assert_eq!(call(&settings).unwrap(), std::time::Duration::from_millis(2_500));
    settings.push(("DATABASE_CALL_TIMEOUT_MS", "0"));
    let error = call(&settings).unwrap_err().to_string();
    assert!(error.contains("DATABASE_CALL_TIMEOUT_MS must be at least 1"), "{error}");
    let mut settings = base();
    settings.push(("DATABASE_URL", "sqlite://kya:PG-SECRET@relayer.db"));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(error.contains("DATABASE_URL must be a postgres:// or postgresql:// URL"), "{error}");
    assert!(!error.contains("PG-SECRET"), "{error}");
}

#[test]
fn bad_values_name_their_variable() {
    let mut settings = base();
    settings.push(("DAILY_GAS_BUDGET", "lots"));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(error.contains("DAILY_GAS_BUDGET"), "{error}");
    let mut settings = base();
    settings.push(("FEE_BUMP_PERCENT", "5"));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(error.contains("FEE_BUMP_PERCENT must be at least 10"), "{error}");
    for (name, value, told) in [
        ("BUDGET_SLICES", "0", "BUDGET_SLICES must be at least 1 (1: no pacing)"),
        ("BUDGET_WINDOW_SECS", "0", "BUDGET_WINDOW_SECS must be at least 1"),
        ("BUDGET_SLICES", "hourly", "BUDGET_SLICES is not a whole number"),
    ] {
        let mut settings = base();
        settings.push((name, value));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains(told), "{error}");
    }
    let mut settings = base();
    settings.extend([("BUDGET_SLICES", "1"), ("BUDGET_WINDOW_SECS", "60")]);
    let config = Config::from_lookup(lookup(&settings)).unwrap();
    assert_eq!(config.budget.pacing(), crate::rules::pacing::Pacing::off(60));
    assert_eq!(config.budget.limits().slices.get(), 1);
    let error = Config::from_lookup(lookup(&base()[1..])).unwrap_err().to_string();
    assert!(error.contains("REGISTRY_ADDRESS"), "{error}");
}

#[test]
fn relayer_keys_give_a_pool_in_order_and_errors_name_the_entry_never_the_key() {
    const SECOND: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
    let mut settings = base();
    settings.retain(|(name, _)| *name != "RELAYER_KEY");
    let both = format!("{KEY}, {SECOND}");
    settings.push(("RELAYER_KEYS", &both));
    let config = Config::from_lookup(lookup(&settings)).unwrap();
    let addresses: Vec<String> = config.keys.signers.iter().map(|s| s.address().to_string()).collect();
    assert_eq!(
        addresses,
        ["0xa0Ee7A142d267C1f36714E4a8F75612F20a79720", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"]
    );
    let printed = format!("{config:?}");
    assert!(!printed.contains(&KEY[2..]) && !printed.contains(&SECOND[2..]), "{printed}");
    assert!(printed.contains("0x70997970c51812dc3a010c7d01b50e0d17dc79c8"), "{printed}");

    let broken = format!("{KEY},{}", &SECOND[..60]);
    settings.retain(|(name, _)| *name != "RELAYER_KEYS");
    settings.push(("RELAYER_KEYS", &broken));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert_eq!(error, "configuration: RELAYER_KEYS entry 2 is not a valid private key");

    let twice = format!("{KEY},{SECOND},{}", KEY.to_uppercase().replace("0X", "0x"));
    settings.retain(|(name, _)| *name != "RELAYER_KEYS");
    settings.push(("RELAYER_KEYS", &twice));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(
        error.contains("relayer key 3 (0xa0Ee7A142d267C1f36714E4a8F75612F20a79720) is given twice"),
        "{error}"
    );
    assert!(!error.contains("2a871d07"), "{error}");

    settings.push(("RELAYER_KEY", KEY));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(error.contains("RELAYER_KEYS or RELAYER_KEY, not both"), "{error}");
}

#[test]
fn relayer_id_is_configured_or_the_host_name() {
    let config = Config::from_lookup(lookup(&base())).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(config.keys.relayer_id, host.trim());
    assert_eq!(config.keys.lease_secs, DEFAULT_LEASE_SECS);
    let mut settings = base();
    settings.push(("RELAYER_ID", " relayer-eu-1 "));
    assert_eq!(Config::from_lookup(lookup(&settings)).unwrap().keys.relayer_id, "relayer-eu-1");
    settings.pop();
    settings.push(("RELAYER_ID", "two words"));
    assert!(Config::from_lookup(lookup(&settings)).is_err());
}

#[test]
fn a_keystore_file_works_instead_of_a_key() {
    // Anvil's account 9 encrypted by eth-account (pbkdf2, few iterations: a test fixture).
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/relayer-keystore.json");
    let mut settings = base();
    settings.pop();
    settings.push(("RELAYER_KEYSTORE", path));
    settings.push(("RELAYER_KEYSTORE_PASSWORD", "relayer-test-password"));
    let config = Config::from_lookup(lookup(&settings)).unwrap();
    assert_eq!(config.keys.signers[0].address().to_string(), "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720");
    settings.pop();
    settings.push(("RELAYER_KEYSTORE_PASSWORD", "wrong"));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(error.contains("cannot decrypt"), "{error}");
}

#[test]
fn the_handoff_wait_is_a_setting() {
    let mut settings = base();
    settings.push(("RELAYER_HANDOFF_WAIT_SECS", "3"));
    let config = Config::from_lookup(lookup(&settings)).unwrap();
    assert_eq!(config.keys.handoff_wait, std::time::Duration::from_secs(3));
    settings.pop();
    settings.push(("RELAYER_HANDOFF_WAIT_SECS", "soon"));
    let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
    assert!(error.contains("RELAYER_HANDOFF_WAIT_SECS is not a whole number"), "{error}");
}
