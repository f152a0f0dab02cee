//! The issuer's keys as JWKs (RFC 7517, Ed25519 as RFC 8037's `OKP`): the private set the Worker
//! holds as a secret (`PASS_SIGNING_KEYS`, the first key signs) and the public set it serves at
//! `/.well-known/jwks.json`, which verifiers read. A key's `kid` is its RFC 7638 thumbprint.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A private key set that cannot sign passes, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("PASS_SIGNING_KEYS is not a JWK set: {0}")]
    NotAJwkSet(String),
    #[error("PASS_SIGNING_KEYS has no key")]
    Empty,
    #[error("PASS_SIGNING_KEYS key {index}: {reason}")]
    BadKey { index: usize, reason: String },
}

/// One Ed25519 signing key and its `kid`. Its `Debug` names the `kid` only: the key never
/// reaches a log.
#[derive(Clone)]
pub struct SigningKey {
    kid: String,
    key: ed25519_dalek::SigningKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("kid", &self.kid).finish_non_exhaustive()
    }
}

impl SigningKey {
    /// The key of a 32-byte Ed25519 seed (RFC 8032's private key).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let key = ed25519_dalek::SigningKey::from_bytes(seed);
        let kid = thumbprint(&key.verifying_key());
        Self { kid, key }
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public half, as served in the JWKS.
    pub fn public_jwk(&self) -> PublicJwk {
        PublicJwk::of(&self.key.verifying_key())
    }

    /// The private JWK (with `d`): what an operator stores in `PASS_SIGNING_KEYS`.
    pub fn private_jwk(&self) -> Value {
        let mut jwk = serde_json::to_value(self.public_jwk()).expect("a JWK serialises");
        jwk["d"] = Value::String(URL_SAFE_NO_PAD.encode(self.key.to_bytes()));
        jwk
    }

    /// The Ed25519 signature of `message` (RFC 8032: deterministic).
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer;
        self.key.sign(message).to_bytes()
    }

    /// Reads one private JWK: `OKP`/`Ed25519` with `d` and `x` that agree, and a `kid`, if
    /// given, equal to the key's thumbprint.
    fn from_jwk(jwk: &Value) -> Result<Self, String> {
        expect_okp_ed25519(jwk)?;
        let d = jwk.get("d").and_then(Value::as_str).ok_or("no \"d\": not a private key")?;
        let seed: [u8; 32] = decode_32(d).ok_or("\"d\" is not 32 bytes of base64url")?;
        let key = Self::from_seed(&seed);
        if let Some(x) = jwk.get("x").and_then(Value::as_str)
            && x != key.public_jwk().x
        {
            return Err("\"x\" is not the public key of \"d\"".into());
        }
        if let Some(kid) = jwk.get("kid").and_then(Value::as_str)
            && kid != key.kid
        {
            return Err(format!("\"kid\" {kid:?} is not the key's RFC 7638 thumbprint {}", key.kid));
        }
        Ok(key)
    }
}

/// The issuer's private keys: the first signs, the others (a rotation's previous keys) are
/// published so passes they signed verify until they expire.
#[derive(Debug, Clone)]
pub struct SigningKeys {
    keys: Vec<SigningKey>,
}

impl SigningKeys {
    /// Reads the secret `PASS_SIGNING_KEYS`: a JWK set (`{"keys": [...]}`). Errors name the key,
    /// never its value.
    pub fn from_json(text: &str) -> Result<Self, KeyError> {
        let set: Value = serde_json::from_str(text).map_err(|_| KeyError::NotAJwkSet("not JSON".into()))?;
        let keys = set
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| KeyError::NotAJwkSet("no \"keys\" array".into()))?;
        if keys.is_empty() {
            return Err(KeyError::Empty);
        }
        let keys = keys
            .iter()
            .enumerate()
            .map(|(index, jwk)| {
                SigningKey::from_jwk(jwk).map_err(|reason| KeyError::BadKey { index, reason })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { keys })
    }

    /// A set of the given keys, the first signing.
    pub fn new(signer: SigningKey, previous: Vec<SigningKey>) -> Self {
        Self { keys: std::iter::once(signer).chain(previous).collect() }
    }

    /// The key that signs new passes.
    pub fn signer(&self) -> &SigningKey {
        &self.keys[0]
    }

    /// The public JWKS: every key, signer first.
    pub fn public(&self) -> Jwks {
        Jwks::of(self.keys.iter().map(|key| (key.public_jwk(), key.key.verifying_key())).collect())
    }

    /// The private JWK set, as `PASS_SIGNING_KEYS` holds it.
    pub fn private_json(&self) -> String {
        let keys: Vec<Value> = self.keys.iter().map(SigningKey::private_jwk).collect();
        serde_json::json!({ "keys": keys }).to_string()
    }
}

/// One public key as the JWKS serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicJwk {
    pub kty: String,
    pub crv: String,
    pub x: String,
    pub kid: String,
    pub alg: String,
    #[serde(rename = "use")]
    pub use_: String,
}

impl PublicJwk {
    fn of(key: &VerifyingKey) -> Self {
        Self {
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            x: URL_SAFE_NO_PAD.encode(key.as_bytes()),
            kid: thumbprint(key),
            alg: super::ALG.into(),
            use_: "sig".into(),
        }
    }
}

/// A verifier's view of the issuer's JWKS: its Ed25519 keys by `kid`, each decompressed once
/// (a curve point from its 32 bytes costs about a fifth of a signature check).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Jwks {
    keys: Vec<PublicJwk>,
    /// `keys`' verifying keys, in the same order.
    #[serde(skip)]
    verifying: Vec<VerifyingKey>,
}

impl Jwks {
    fn of(keys: Vec<(PublicJwk, VerifyingKey)>) -> Self {
        let (keys, verifying) = keys.into_iter().unzip();
        Self { keys, verifying }
    }

    /// The keys, as the JWKS document lists them.
    pub fn keys(&self) -> &[PublicJwk] {
        &self.keys
    }

    /// Reads a JWKS document. Keys a pass cannot be signed with (other types or curves, a `use`
    /// other than `sig`, an `alg` other than `EdDSA`) are skipped, as RFC 7517 section 5 asks
    /// of keys a reader does not understand; a key without `kid` is known by its thumbprint.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let set: Value =
            serde_json::from_str(text).map_err(|error| format!("the JWKS is not JSON: {error}"))?;
        Self::from_value(&set)
    }

    /// [`Jwks::from_json`] of a document already parsed (a JavaScript object).
    pub fn from_value(set: &Value) -> Result<Self, String> {
        let keys = set.get("keys").and_then(Value::as_array).ok_or("the JWKS has no \"keys\" array")?;
        Ok(Self::of(keys.iter().filter_map(usable_public_key).collect()))
    }

    /// The verifying key whose `kid` is `kid`.
    pub fn find(&self, kid: &str) -> Option<&VerifyingKey> {
        let index = self.keys.iter().position(|jwk| jwk.kid == kid)?;
        self.verifying.get(index)
    }
}

fn usable_public_key(jwk: &Value) -> Option<(PublicJwk, VerifyingKey)> {
    expect_okp_ed25519(jwk).ok()?;
    let field = |name: &str| jwk.get(name).and_then(Value::as_str);
    if field("use").is_some_and(|use_| use_ != "sig") || field("alg").is_some_and(|alg| alg != super::ALG) {
        return None;
    }
    let key = VerifyingKey::from_bytes(&decode_32(field("x")?)?).ok()?;
    let mut public = PublicJwk::of(&key);
    if let Some(kid) = field("kid") {
        kid.clone_into(&mut public.kid);
    }
    Some((public, key))
}

fn expect_okp_ed25519(jwk: &Value) -> Result<(), String> {
    let field = |name: &str| jwk.get(name).and_then(Value::as_str);
    match (field("kty"), field("crv")) {
        (Some("OKP"), Some("Ed25519")) => Ok(()),
        (kty, crv) => {
            Err(format!("not an Ed25519 key (kty {kty:?}, crv {crv:?}; want \"OKP\", \"Ed25519\")"))
        }
    }
}

fn decode_32(text: &str) -> Option<[u8; 32]> {
    URL_SAFE_NO_PAD.decode(text).ok()?.try_into().ok()
}

/// RFC 7638 thumbprint of an Ed25519 public key (RFC 8037 section 2): SHA-256 of the required
/// members in lexicographic order, without whitespace, base64url.
pub fn thumbprint(key: &VerifyingKey) -> String {
    let x = URL_SAFE_NO_PAD.encode(key.as_bytes());
    let canonical = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8037 appendix A.1's key, and A.3's thumbprint of it.
    const RFC8037_PRIVATE: &str = r#"{"kty":"OKP","crv":"Ed25519",
        "d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
        "x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#;

    #[test]
    fn the_rfc_8037_key_reads_with_its_published_thumbprint() {
        let keys = SigningKeys::from_json(&format!(r#"{{"keys":[{RFC8037_PRIVATE}]}}"#)).unwrap();
        assert_eq!(keys.signer().kid(), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
        let public = keys.public();
        assert_eq!(public.keys[0].x, "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo");
        assert!(public.find("kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k").is_some());
        assert!(public.find("another").is_none());
    }

    #[test]
    fn a_private_set_round_trips_and_its_debug_hides_the_key() {
        let keys = SigningKeys::new(SigningKey::from_seed(&[7; 32]), vec![SigningKey::from_seed(&[8; 32])]);
        let again = SigningKeys::from_json(&keys.private_json()).unwrap();
        assert_eq!(again.public(), keys.public());
        assert_eq!(again.public().keys.len(), 2);
        let shown = format!("{keys:?}");
        assert!(shown.contains(keys.signer().kid()));
        let d = keys.signer().private_jwk()["d"].as_str().unwrap().to_owned();
        assert!(!shown.contains(&d), "{shown}");
        // The public JWKS carries no private member.
        let served = serde_json::to_string(&keys.public()).unwrap();
        assert!(!served.contains("\"d\"") && !served.contains(&d), "{served}");
    }

    #[test]
    fn bad_private_sets_are_refused_by_key_and_reason_without_the_value() {
        let refuse = |text: &str| SigningKeys::from_json(text).unwrap_err().to_string();
        assert_eq!(refuse("nope"), "PASS_SIGNING_KEYS is not a JWK set: not JSON");
        assert_eq!(refuse(r#"{"keys":[]}"#), "PASS_SIGNING_KEYS has no key");
        assert!(
            refuse(r#"{"keys":[{"kty":"RSA"}]}"#).starts_with("PASS_SIGNING_KEYS key 0: not an Ed25519 key")
        );
        let public_only =
            r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
        assert_eq!(refuse(public_only), "PASS_SIGNING_KEYS key 0: no \"d\": not a private key");
        let mut jwk = SigningKey::from_seed(&[7; 32]).private_jwk();
        jwk["x"] = SigningKey::from_seed(&[8; 32]).public_jwk().x.into();
        let message = refuse(&serde_json::json!({ "keys": [jwk] }).to_string());
        assert_eq!(message, "PASS_SIGNING_KEYS key 0: \"x\" is not the public key of \"d\"");
    }

    #[test]
    fn a_verifier_skips_keys_it_cannot_use() {
        let ours = SigningKey::from_seed(&[7; 32]).public_jwk();
        let text = serde_json::json!({ "keys": [
            { "kty": "RSA", "n": "x", "e": "AQAB", "kid": "rsa" },
            { "kty": "OKP", "crv": "X25519", "x": ours.x, "kid": "x25519" },
            { "kty": "OKP", "crv": "Ed25519", "x": ours.x, "kid": "enc", "use": "enc" },
            { "kty": "OKP", "crv": "Ed25519", "x": ours.x },
        ]})
        .to_string();
        let jwks = Jwks::from_json(&text).unwrap();
        assert_eq!(jwks.keys, vec![ours.clone()]);
        assert!(jwks.find(&ours.kid).is_some() && jwks.find("rsa").is_none() && jwks.find("enc").is_none());
    }
}
