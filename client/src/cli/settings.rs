//! Where the command line's settings come from: flags, then the environment (the names the
//! original SDK uses), then `.devchain/env` for the local chain, then the chain preset. Also the
//! parsing of what a user types (addresses, ids, times) and the signer's key.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    time::Duration,
};

use alloy::{
    primitives::{Address, B256},
    signers::local::PrivateKeySigner,
};
use anyhow::{Context, Result, anyhow, bail};

use super::args::{Global, Signing};
use crate::{ApiClient, ChainPreset, RelayerClient, Rpc};

/// The env file `scripts/up.sh` writes, relative to the repository root.
const DEVCHAIN_ENV: &str = ".devchain/env";

/// The resolved settings of one run.
pub(crate) struct Settings {
    pub(crate) chain: ChainPreset,
    /// The chain's id: the preset's, or for `localhost` `.devchain/env`'s `CHAIN_ID`. ERC-8128
    /// keyids name it.
    pub(crate) chain_id: u64,
    api: Option<String>,
    relayer: Option<String>,
    rpc: String,
    /// Given explicitly (flag or environment): overrides the relayer's.
    pub(crate) registry: Option<Address>,
    /// Known from `.devchain/env` or the preset: used where no relayer says otherwise (--direct).
    pub(crate) default_registry: Option<Address>,
    pub(crate) forwarder: Option<Address>,
    pub(crate) json: bool,
    pub(crate) timeout: Duration,
    http: reqwest::Client,
}

impl Settings {
    pub(crate) fn resolve(global: &Global) -> Result<Self> {
        crate::install_crypto_provider();
        let devchain = find_devchain_env(&std::env::current_dir().unwrap_or_default());
        let chain = match &global.chain {
            Some(name) => name.parse::<ChainPreset>()?,
            None if devchain.is_some() => ChainPreset::Localhost,
            None => ChainPreset::BaseSepolia,
        };
        let preset = chain.settings();
        // `.devchain/env` describes the local chain only; another chain's preset wins over it.
        let local: HashMap<String, String> = match (&devchain, chain) {
            (Some(path), ChainPreset::Localhost) => read_env_file(path)?,
            _ => HashMap::new(),
        };
        let registry = global.registry.as_deref().map(|text| address(text, "registry")).transpose()?;
        let default_registry = match local.get("REGISTRY_ADDRESS") {
            Some(text) => Some(address(text, "REGISTRY_ADDRESS in .devchain/env")?),
            None => preset.registry,
        };
        let chain_id = match local.get("CHAIN_ID") {
            Some(text) => text
                .trim()
                .parse()
                .map_err(|_| anyhow!("invalid CHAIN_ID in .devchain/env: {text:?} is not a chain id"))?,
            None => preset.chain_id,
        };
        Ok(Self {
            chain,
            chain_id,
            api: global.api.clone().or(preset.api_url.map(str::to_owned)),
            relayer: global.relayer.clone().or(preset.relayer_url.map(str::to_owned)),
            rpc: global
                .rpc
                .clone()
                .or_else(|| local.get("RPC_URL").cloned())
                .unwrap_or(preset.rpc_url.to_owned()),
            registry,
            default_registry,
            forwarder: global.forwarder.as_deref().map(|text| address(text, "forwarder")).transpose()?,
            json: global.json,
            timeout: Duration::from_secs(global.timeout),
            // Each read bounded, not each request: `kya watch` keeps one change stream open (a
            // heartbeat every 15 s by default), where a total timeout cut it every 30 s.
            http: crate::http::bounded(Duration::from_secs(30))
                .user_agent(concat!("kya/", env!("CARGO_PKG_VERSION")))
                .build()
                .context("HTTP client")?,
        })
    }

    pub(crate) fn api(&self) -> Result<ApiClient> {
        let url = self
            .api
            .as_deref()
            .ok_or_else(|| anyhow!("no API URL for chain {}: pass --api or set KYA_API_URL", self.chain))?;
        Ok(ApiClient::with_http(url, self.http.clone())?)
    }

    pub(crate) fn relayer(&self) -> Result<RelayerClient> {
        let url = self.relayer.as_deref().ok_or_else(|| {
            anyhow!(
                "no relayer URL for chain {}: pass --relayer or set RELAYER_URL (or use --direct)",
                self.chain
            )
        })?;
        Ok(RelayerClient::with_http(url, self.http.clone())?)
    }

    pub(crate) fn rpc(&self) -> Result<Rpc> {
        Ok(Rpc::new(&self.rpc)?)
    }

    /// The registry a `--direct` write goes to: given, or known for the chain.
    pub(crate) fn direct_registry(&self) -> Result<Address> {
        self.registry.or(self.default_registry).ok_or_else(|| {
            anyhow!("no registry address for chain {}: pass --registry or set REGISTRY_ADDRESS", self.chain)
        })
    }

    /// The registry a write goes to: given, else for `--direct` the chain's, else the relayer's.
    pub(crate) async fn write_registry(&self, direct: bool) -> Result<Address> {
        match self.registry {
            Some(registry) => Ok(registry),
            None if direct => self.direct_registry(),
            None => Ok(self.relayer()?.status().await?.contracts.registry),
        }
    }
}

/// `.devchain/env` in `start` or the nearest folder above it.
fn find_devchain_env(start: &Path) -> Option<PathBuf> {
    start.ancestors().map(|dir| dir.join(DEVCHAIN_ENV)).find(|path| path.is_file())
}

/// `NAME=value` lines; `#` comments and blank lines skipped.
fn read_env_file(path: &Path) -> Result<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse_env(&text))
}

fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().trim_matches('"').to_owned()))
        .collect()
}

/// An address as a user types it: `0x` and 40 hex digits, all lower case, all upper case, or
/// with a valid EIP-55 checksum (a wrong checksum is most likely a typo, so it is refused).
pub(crate) fn address(text: &str, what: &str) -> Result<Address> {
    let text = text.trim();
    let hex = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"));
    let Some(hex) = hex.filter(|hex| hex.len() == 40 && hex.bytes().all(|byte| byte.is_ascii_hexdigit()))
    else {
        bail!("invalid {what} {text:?}: expected 0x and 40 hex digits");
    };
    let mixed = hex.bytes().any(|byte| byte.is_ascii_lowercase())
        && hex.bytes().any(|byte| byte.is_ascii_uppercase());
    if mixed {
        return Address::parse_checksummed(format!("0x{hex}"), None)
            .map_err(|_| anyhow!("invalid {what} {text:?}: its EIP-55 checksum is wrong (a typo?); check it, or give it in lower case"));
    }
    Ok(format!("0x{hex}").parse()?)
}

/// An agent id: a positive integer.
pub(crate) fn agent_id(text: &str) -> Result<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| anyhow!("invalid agent id {text:?}: must be a positive integer"))
}

/// A hash: `0x` and 64 hex digits.
pub(crate) fn hash(text: &str, what: &str) -> Result<B256> {
    let text = text.trim();
    if text.len() != 66 || !text.starts_with("0x") {
        bail!("invalid {what} {text:?}: expected 0x and 64 hex digits");
    }
    text.parse().map_err(|_| anyhow!("invalid {what} {text:?}: expected 0x and 64 hex digits"))
}

/// Unix seconds, or an ISO 8601 UTC time (`2025-01-01T00:00:00Z`, milliseconds optional).
pub(crate) fn time(text: &str, what: &str) -> Result<u64> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(seconds);
    }
    let with_millis = match text.strip_suffix('Z') {
        Some(rest) if !rest.contains('.') => format!("{rest}.000Z"),
        _ => text.to_owned(),
    };
    kya_core::api::time::parse_iso8601(&with_millis)
        .ok_or_else(|| anyhow!("invalid {what} {text:?}: expected Unix seconds or 2025-01-01T00:00:00Z"))
}

/// The signer of a write: `--key` / `AGENT_PRIVATE_KEY`, or `--keystore` with its password from
/// `KYA_KEYSTORE_PASSWORD` or a prompt. Errors never quote the key.
pub(crate) fn signer(signing: &Signing) -> Result<PrivateKeySigner> {
    if let Some(signer) = key(signing.key.as_deref(), "--key or AGENT_PRIVATE_KEY")? {
        return Ok(signer);
    }
    if let Some(path) = &signing.keystore {
        let password = match std::env::var("KYA_KEYSTORE_PASSWORD") {
            Ok(password) => password,
            Err(_) => rpassword::prompt_password(format!("Password for {}: ", path.display())).context(
                "reading the keystore password (set KYA_KEYSTORE_PASSWORD when there is no terminal)",
            )?,
        };
        return PrivateKeySigner::decrypt_keystore(path, password).map_err(|_| {
            anyhow!("keystore {}: cannot decrypt (wrong password, or not a keystore file)", path.display())
        });
    }
    bail!("no signing key: set AGENT_PRIVATE_KEY, or pass --key or --keystore")
}

/// A hex private key given as `from` (the flag and variable, for the message), if one was given
/// (an empty value counts as none). Errors never quote the key.
pub(crate) fn key(text: Option<&str>, from: &str) -> Result<Option<PrivateKeySigner>> {
    let Some(text) = text.map(str::trim).filter(|text| !text.is_empty()) else { return Ok(None) };
    text.parse::<PrivateKeySigner>()
        .map(Some)
        .map_err(|_| anyhow!("the private key ({from}) is not a valid secp256k1 key: expected 64 hex digits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_need_a_valid_checksum_when_mixed_case() {
        let good = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        assert_eq!(address(good, "wallet").unwrap().to_checksum(None), good);
        assert_eq!(address(&good.to_lowercase(), "wallet").unwrap().to_checksum(None), good);
        assert_eq!(
            address(&format!("0x{}", good[2..].to_uppercase()), "wallet").unwrap().to_checksum(None),
            good
        );
        let bad = "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        let error = address(bad, "wallet").unwrap_err().to_string();
        assert!(error.contains("EIP-55 checksum is wrong"), "{error}");
        for malformed in
            ["0x12", "f39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "0xg39fd6e51aad88f6f4ce6ab8827279cfffb92266"]
        {
            let error = address(malformed, "wallet").unwrap_err().to_string();
            assert!(error.contains("expected 0x and 40 hex digits"), "{error}");
        }
    }

    #[test]
    fn ids_times_and_hashes() {
        assert_eq!(agent_id("7").unwrap(), 7);
        for bad in ["0", "-1", "x", "1.5"] {
            assert!(agent_id(bad).unwrap_err().to_string().contains("must be a positive integer"));
        }
        assert_eq!(time("1700000000", "t").unwrap(), 1_700_000_000);
        assert_eq!(time("2023-11-14T22:13:20Z", "t").unwrap(), 1_700_000_000);
        assert_eq!(time("2023-11-14T22:13:20.000Z", "t").unwrap(), 1_700_000_000);
        assert!(time("yesterday", "t").is_err());
        assert!(hash("0x12", "constitution hash").is_err());
        assert_eq!(hash(&format!("0x{}", "ab".repeat(32)), "h").unwrap(), B256::repeat_byte(0xab));
    }

    #[test]
    fn env_files_and_their_discovery() {
        let env = parse_env("# comment\nRPC_URL=http://127.0.0.1:8545\n\nREGISTRY_ADDRESS=\"0xabc\"\n");
        assert_eq!(env["RPC_URL"], "http://127.0.0.1:8545");
        assert_eq!(env["REGISTRY_ADDRESS"], "0xabc");
        let root = std::env::temp_dir().join(format!("kya-cli-test-{}", std::process::id()));
        let nested = root.join("a/b");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::create_dir_all(root.join(".devchain")).unwrap();
        std::fs::write(root.join(DEVCHAIN_ENV), "RPC_URL=x\n").unwrap();
        assert_eq!(find_devchain_env(&nested), Some(root.join(DEVCHAIN_ENV)));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn key_errors_never_quote_the_key() {
        let secret = "0xnot-a-key-but-secret-looking-0123456789abcdef";
        let signing = Signing { key: Some(secret.into()), keystore: None, direct: false, gas: None };
        let error = signer(&signing).unwrap_err().to_string();
        assert!(!error.contains(secret) && !error.contains("secret-looking"), "{error}");
        let none = Signing { key: None, keystore: None, direct: false, gas: None };
        assert_eq!(
            signer(&none).unwrap_err().to_string(),
            "no signing key: set AGENT_PRIVATE_KEY, or pass --key or --keystore"
        );
    }
}
