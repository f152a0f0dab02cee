//! The relayer's keys and this daemon's part in a cluster: its name, its leases on the keys,
//! and how long it waits for another daemon to send a relay it handed off.

use alloy::signers::local::PrivateKeySigner;

use super::reader::Settings;
use crate::error::{Error, Result};

/// Default length of a daemon's lease on a key: renewed every third of it, taken over by
/// another daemon this long after its holder stopped renewing (died, or lost the database).
pub(crate) const DEFAULT_LEASE_SECS: u64 = 30;
/// Shortest lease: renewals every second.
const MIN_LEASE_SECS: u64 = 3;
/// Default time a standby waits for a key's holder to send a relay it handed off before
/// answering 202 (accepted, not sent yet: the client reads the relay by its id).
pub(crate) const DEFAULT_HANDOFF_WAIT_SECS: u64 = 10;

/// The keys and this daemon's name and leases.
#[derive(Debug, Clone)]
pub struct KeyConfig {
    /// The relayer's hot wallets, one nonce lane each, in the order given (`RELAYER_KEYS`, or
    /// `RELAYER_KEY`, or `RELAYER_KEYSTORE` + `RELAYER_KEYSTORE_PASSWORD`): never empty, no key
    /// twice.
    pub signers: Signers,
    /// This daemon's name in the lane leases and in `/status` (`RELAYER_ID`, default the host's
    /// name): unique per daemon of a cluster, and kept across restarts, so a restarted daemon
    /// takes back at once the keys its killed run still held.
    pub relayer_id: String,
    /// How long a lease on a key lasts without renewal (`RELAYER_LEASE_SECS`, default 30, at
    /// least 3).
    pub lease_secs: u64,
    /// How long a standby waits for the key's holder to send a relay it handed off before
    /// answering 202 (`RELAYER_HANDOFF_WAIT_SECS`, default 10).
    pub handoff_wait: std::time::Duration,
}

impl KeyConfig {
    pub(crate) fn read(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Self> {
        Ok(Self {
            signers: Signers(signers(settings)?),
            relayer_id: relayer_id(settings)?,
            lease_secs: settings.number("RELAYER_LEASE_SECS", DEFAULT_LEASE_SECS)?.max(MIN_LEASE_SECS),
            handoff_wait: settings.secs("RELAYER_HANDOFF_WAIT_SECS", DEFAULT_HANDOFF_WAIT_SECS)?,
        })
    }
}

/// The relayer's keys. Never formatted: `Debug` shows only their addresses.
#[derive(Clone)]
pub struct Signers(Vec<PrivateKeySigner>);

impl std::ops::Deref for Signers {
    type Target = [PrivateKeySigner];

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::fmt::Debug for Signers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(PrivateKeySigner::address)).finish()
    }
}

/// The relayer's keys: `RELAYER_KEYS` (hex, comma-separated), `RELAYER_KEY` (one), or encrypted
/// JSON keystores (`RELAYER_KEYSTORE`, comma-separated paths, one `RELAYER_KEYSTORE_PASSWORD`).
/// Errors name the variable and the entry's position, never a key. A key given twice would be
/// two lanes handing out one account's nonces: refused.
fn signers(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Vec<PrivateKeySigner>> {
    let signers = match (settings.text("RELAYER_KEYS"), settings.text("RELAYER_KEY")) {
        (Some(_), Some(_)) => {
            return Err(Error::Config("set RELAYER_KEYS or RELAYER_KEY, not both".into()));
        }
        (Some(keys), None) => keys
            .split(',')
            .enumerate()
            .map(|(index, key)| {
                key.trim().parse().map_err(|_| {
                    Error::Config(format!("RELAYER_KEYS entry {} is not a valid private key", index + 1))
                })
            })
            .collect::<Result<Vec<PrivateKeySigner>>>()?,
        (None, Some(key)) => vec![
            key.trim().parse().map_err(|_| Error::Config("RELAYER_KEY is not a valid private key".into()))?,
        ],
        (None, None) => keystores(settings)?,
    };
    for (index, signer) in signers.iter().enumerate() {
        if signers[..index].iter().any(|earlier| earlier.address() == signer.address()) {
            return Err(Error::Config(format!(
                "relayer key {} ({}) is given twice: each key is one nonce lane",
                index + 1,
                signer.address()
            )));
        }
    }
    Ok(signers)
}

/// The keys of `RELAYER_KEYSTORE` (comma-separated paths), all under `RELAYER_KEYSTORE_PASSWORD`.
fn keystores(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Vec<PrivateKeySigner>> {
    let Some(paths) = settings.text("RELAYER_KEYSTORE") else {
        return Err(Error::Config(
            "set RELAYER_KEYS, RELAYER_KEY, or RELAYER_KEYSTORE and RELAYER_KEYSTORE_PASSWORD".into(),
        ));
    };
    let password = settings
        .text("RELAYER_KEYSTORE_PASSWORD")
        .ok_or_else(|| Error::Config("RELAYER_KEYSTORE_PASSWORD is not set".into()))?;
    paths
        .split(',')
        .map(str::trim)
        .map(|path| {
            PrivateKeySigner::decrypt_keystore(path, &password).map_err(|_| {
                Error::Config(format!(
                    "RELAYER_KEYSTORE {path}: cannot decrypt (wrong password or not a keystore)"
                ))
            })
        })
        .collect()
}

/// `RELAYER_ID`, or the host's name: how the lane leases and `/status` name the daemon holding
/// each lane. Shown to anyone, so a configured one is checked to be short and printable. Not
/// the process id: a restarted daemon is the same daemon, and takes back its keys at once.
fn relayer_id(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<String> {
    if let Some(id) = settings.text("RELAYER_ID") {
        let id = id.trim();
        if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_graphic()) {
            return Err(Error::Config("RELAYER_ID must be 1 to 64 printable ASCII characters".into()));
        }
        return Ok(id.to_owned());
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_owned())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "relayer".to_owned());
    Ok(host)
}
