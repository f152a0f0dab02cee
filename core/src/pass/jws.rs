//! The compact JWS serialisation of a pass (RFC 7515 section 7.1): three base64url parts, the
//! signature over the first two as sent.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ed25519_dalek::{Signature, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::{PassClaims, PassRefusal, SigningKey};

/// A pass's protected header. Nothing else is accepted in it: a `crit` or `jku` a verifier
/// would have to act on is refused rather than ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub alg: String,
    pub typ: String,
    pub kid: String,
}

/// The compact JWS of `claims`, signed by `key`.
pub fn sign(claims: &PassClaims, key: &SigningKey) -> String {
    let unsigned = Unsigned::new(claims, key.kid());
    let signature = key.sign(unsigned.signing_input());
    unsigned.signed(&signature)
}

/// A pass's first two parts, for a signer outside this crate (the Worker's runtime signs with
/// its own Ed25519, RFC 8032's deterministic signature: the same bytes [`sign`] makes).
#[derive(Debug, Clone)]
pub struct Unsigned {
    /// The header and payload, base64url, and their dot: what the signature covers.
    jws: String,
}

impl Unsigned {
    /// The header naming `kid` and the payload of `claims`.
    pub fn new(claims: &PassClaims, kid: &str) -> Self {
        let header = Header { alg: super::ALG.into(), typ: super::TYP.into(), kid: kid.to_owned() };
        let header = serde_json::to_vec(&header).expect("a header serialises");
        let payload = serde_json::to_vec(claims).expect("claims serialise");
        let mut jws = String::with_capacity(64 + (header.len() + payload.len()) * 4 / 3 + 88);
        URL_SAFE_NO_PAD.encode_string(header, &mut jws);
        jws.push('.');
        URL_SAFE_NO_PAD.encode_string(payload, &mut jws);
        Self { jws }
    }

    /// The bytes the Ed25519 signature is over.
    pub fn signing_input(&self) -> &[u8] {
        self.jws.as_bytes()
    }

    /// The compact JWS with `signature` (64 bytes, Ed25519 over [`Unsigned::signing_input`]).
    pub fn signed(mut self, signature: &[u8; 64]) -> String {
        self.jws.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut self.jws);
        self.jws
    }
}

/// A compact JWS taken apart, its signature not yet checked.
#[derive(Debug)]
pub struct Parsed<'a> {
    pub header: Header,
    /// The first two parts and their dot, as sent: what the signature covers.
    signing_input: &'a str,
    payload: Vec<u8>,
    signature: Signature,
}

impl<'a> Parsed<'a> {
    /// Takes `jws` apart: three base64url parts (no padding), a header of a pass.
    pub fn new(jws: &'a str) -> Result<Self, PassRefusal> {
        let malformed = |what: &str| PassRefusal::Malformed(what.to_owned());
        let mut parts = jws.splitn(4, '.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed("a pass is a compact JWS: three base64url parts joined by dots"));
        };
        let signing_input = &jws[..header.len() + 1 + payload.len()];
        let decode = |part: &str, name: &str| {
            URL_SAFE_NO_PAD.decode(part).map_err(|_| malformed(&format!("its {name} is not base64url")))
        };
        let header: Header = serde_json::from_slice(&decode(header, "header")?)
            .map_err(|error| malformed(&format!("its header is not a pass's: {error}")))?;
        if header.alg != super::ALG || header.typ != super::TYP {
            return Err(PassRefusal::WrongType { alg: header.alg, typ: header.typ });
        }
        let signature: [u8; 64] = decode(signature, "signature")?
            .try_into()
            .map_err(|_| malformed("its signature is not 64 bytes"))?;
        Ok(Self {
            header,
            signing_input,
            payload: decode(payload, "payload")?,
            signature: Signature::from_bytes(&signature),
        })
    }

    /// The claims, once the signature verifies under `key` (RFC 8032's strict check: no
    /// malleable signature, no small-order key).
    pub fn verified_claims(&self, key: &VerifyingKey) -> Result<PassClaims, PassRefusal> {
        key.verify_strict(self.signing_input.as_bytes(), &self.signature)
            .map_err(|_| PassRefusal::BadSignature)?;
        serde_json::from_slice(&self.payload)
            .map_err(|error| PassRefusal::Malformed(format!("its claims are not a pass's: {error}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8037 appendix A.4: the Ed25519 signature of a JWS with header `{"alg":"EdDSA"}` over
    /// "Example of Ed25519 signing", by appendix A.1's key.
    #[test]
    fn signs_as_rfc_8037s_example() {
        let seed: [u8; 32] = URL_SAFE_NO_PAD
            .decode("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
            .unwrap()
            .try_into()
            .unwrap();
        let key = SigningKey::from_seed(&seed);
        let signing_input = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc";
        let signature = URL_SAFE_NO_PAD.encode(key.sign(signing_input.as_bytes()));
        assert_eq!(
            signature,
            "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
        );
    }

    #[test]
    fn malformed_passes_are_named() {
        let reason = |jws: &str| Parsed::new(jws).unwrap_err().to_string();
        assert!(reason("a.b").contains("three base64url parts"));
        assert!(reason("a.b.c.d").contains("three base64url parts"));
        assert!(reason("!!.e30.AA").contains("header is not base64url"));
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"EdDSA","typ":"kya-pass+jwt","kid":"k","crit":["x"]}"#);
        assert!(reason(&format!("{header}.e30.AA")).contains("header is not a pass's"));
        let none = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"kya-pass+jwt","kid":"k"}"#);
        assert_eq!(
            reason(&format!("{none}.e30.")),
            "the pass's alg is \"none\" and typ \"kya-pass+jwt\": a pass is EdDSA, kya-pass+jwt"
        );
        let ok = URL_SAFE_NO_PAD.encode(r#"{"alg":"EdDSA","typ":"kya-pass+jwt","kid":"k"}"#);
        assert!(reason(&format!("{ok}.e30.AAAA")).contains("not 64 bytes"));
    }
}
