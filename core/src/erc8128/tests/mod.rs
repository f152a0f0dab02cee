//! Cross-file tests of ERC-8128, and the helpers they share: a request that signs itself with
//! a test key, tampers, and verifies.

mod interop;
mod refusals;
mod round_trip;

use alloy_primitives::{Address, address, eip191_hash_message, hex};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use proptest::prelude::*;

use super::base::{Message, signature_base};
use super::fields::{select, signature_params};
use super::target::Target;
use super::*;

/// Anvil's first development key (public test material) and its address.
const SECRET: [u8; 32] = hex!("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80");
const SIGNER: Address = address!("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
const CHAIN: u64 = 84532;
const CREATED: u64 = 1_767_225_600;
const EXPIRES: u64 = CREATED + 60;

fn key() -> SigningKey {
    SigningKey::from_bytes(&SECRET.into()).unwrap()
}

/// A request, its headers owned, as a test builds and tampers with it.
#[derive(Clone)]
struct Req {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

impl Req {
    fn new(method: &str, url: &str, body: Option<&[u8]>) -> Self {
        Self { method: method.into(), url: url.into(), headers: vec![], body: body.map(<[u8]>::to_vec) }
    }

    /// Signs with the default parameters and `nonce`, attaching the headers.
    fn signed(mut self, nonce: Option<&str>) -> Self {
        let params =
            SignParams { chain_id: CHAIN, created: CREATED, expires: EXPIRES, nonce, extra_components: &[] };
        let headers = sign_request(&self.as_to_sign(), &params, &key()).unwrap();
        self.headers.retain(|(name, _)| !name.eq_ignore_ascii_case("content-digest"));
        for (name, value) in headers.pairs() {
            self.headers.push((name.into(), value.into()));
        }
        self
    }

    /// Attaches a signature over a hand-written `Signature-Input` member value; when the member
    /// cannot describe a signature base, a filler signature (the refusal comes first anyway).
    fn signed_as(mut self, label: &str, member: &str) -> Self {
        let signature = match select(&format!("{label}={member}"), &format!("{label}=:AA==:"), Some(label)) {
            Ok(_) => self.personal_sign(label, member),
            Err(_) => [1; 65],
        };
        self.headers.push(("signature-input".into(), format!("{label}={member}")));
        self.headers.push(("signature".into(), format!("{label}=:{}:", BASE64.encode(signature))));
        self
    }

    /// The `personal_sign` of the signature base a member value describes, for this request.
    fn personal_sign(&self, label: &str, member: &str) -> [u8; 65] {
        let selected = select(&format!("{label}={member}"), &format!("{label}=:AA==:"), Some(label))
            .unwrap_or_else(|e| panic!("{member}: {e}"));
        let target = Target::parse(&self.url).unwrap();
        let headers = self.header_refs();
        let message = Message { method: &self.method, target: &target, headers: &headers };
        let base = signature_base(&message, &selected.components, &selected.params_line).unwrap();
        personal_sign(&base)
    }

    fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn header_refs(&self) -> Vec<(&str, &str)> {
        self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect()
    }

    fn as_to_sign(&self) -> RequestToSign<'_> {
        RequestToSign { method: &self.method, url: &self.url, headers: &[], body: self.body.as_deref() }
    }

    fn verify_with(&self, policy: &VerifyPolicy, now: u64) -> Result<Verification, Refusal> {
        let headers = self.header_refs();
        let authority = served_authority(&self.url);
        let request = SignedRequest {
            method: &self.method,
            url: &self.url,
            headers: &headers,
            body: self.body.as_deref(),
            label: None,
            authority: &authority,
            now,
        };
        verify_request(&request, policy)
    }

    /// Verifies with the default policy at `CREATED + 1`, refusing ERC-1271 fallbacks so that a
    /// signature from the wrong key is `bad_signature` at once.
    fn verify(&self) -> Result<Verified, Refusal> {
        let policy = VerifyPolicy { allow_erc1271: false, ..VerifyPolicy::new(CHAIN) };
        match self.verify_with(&policy, CREATED + 1)? {
            Verification::Verified(verified) => Ok(verified),
            Verification::Erc1271(_) => panic!("ERC-1271 was disabled"),
        }
    }

    fn reason(&self) -> Reason {
        self.verify().unwrap_err().reason
    }
}

fn personal_sign(base: &str) -> [u8; 65] {
    let hash = eip191_hash_message(base.as_bytes());
    let (signature, recovery) = key().sign_prehash_recoverable(hash.as_slice()).unwrap();
    let mut bytes = [0u8; 65];
    bytes[..64].copy_from_slice(&signature.to_bytes());
    bytes[64] = 27 + u8::from(recovery.is_y_odd());
    bytes
}

/// The host a provider at `url` serves, as it would configure it (empty for a URL that does
/// not parse: the URL's own refusal comes first).
fn served_authority(url: &str) -> String {
    Target::parse(url).map(|target| target.authority).unwrap_or_default()
}

fn keyid() -> String {
    format!("erc8128:{CHAIN}:{}", hex::encode_prefixed(SIGNER))
}

/// A Request-Bound, Non-Replayable member value for `GET https://api.example.com/a`.
fn member(extra: &str) -> String {
    format!(
        "(\"@method\" \"@authority\" \"@path\");created={CREATED};expires={EXPIRES};\
         nonce=\"n1\"{extra};keyid=\"{}\"",
        keyid()
    )
}

const GET: &str = "https://api.example.com/a";
