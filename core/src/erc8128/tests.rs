//! Cross-file tests of ERC-8128: sign then verify, every refusal, the ERC's own example, and
//! signatures made by the TypeScript implementation by the ERC's authors.

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
        let request = SignedRequest {
            method: &self.method,
            url: &self.url,
            headers: &headers,
            body: self.body.as_deref(),
            label: None,
            authority: None,
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

#[test]
fn round_trip_with_body_and_query() {
    let body = br#"{"amount":"100"}"#;
    let req = Req::new("POST", "https://api.example.com/orders?x=1&y=two", Some(body)).signed(Some("n-1"));
    let verified = req.verify().unwrap();
    assert_eq!(verified.signer, SIGNER);
    assert_eq!(verified.keyid, keyid());
    assert_eq!((verified.chain_id, verified.created, verified.expires), (CHAIN, CREATED, EXPIRES));
    assert_eq!(verified.nonce.as_deref(), Some("n-1"));
    assert_eq!(verified.components, ["@method", "@authority", "@path", "@query", "content-digest"]);
    assert_eq!(verified.label, "eth");
    let ReplayGuard::Nonce(claim) = &verified.replay else { panic!("a nonce was signed") };
    assert_eq!(claim.key, format!("{}:n-1", keyid()));
    assert_eq!(claim.remember_until, EXPIRES + 60);

    let json = serde_json::to_value(&verified).unwrap();
    let mut keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["chainId", "components", "created", "expires", "keyid", "nonce", "signer"]);
}

#[test]
fn signing_writes_the_erc_layout() {
    let req = Req::new("POST", "https://api.example.com/foo?a=1&b=two", Some(b"abc")).signed(Some("n"));
    let input = &req.headers.iter().find(|(n, _)| n == "signature-input").unwrap().1;
    assert_eq!(
        *input,
        format!(
            "eth=(\"@method\" \"@authority\" \"@path\" \"@query\" \"content-digest\");\
             created={CREATED};expires={EXPIRES};nonce=\"n\";keyid=\"{}\"",
            keyid()
        )
    );
    let signature = &req.headers.iter().find(|(n, _)| n == "signature").unwrap().1;
    let bytes = BASE64.decode(signature.strip_prefix("eth=:").unwrap().strip_suffix(':').unwrap());
    assert_eq!(bytes.unwrap().len(), 65);
}

/// ERC-8128 3.4.3's example signature base, its RFC 8792 line wrapping undone.
#[test]
fn erc_example_signature_base() {
    let keyid = "erc8128:1:0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045";
    let member = format!(
        "(\"@method\" \"@authority\" \"@path\" \"@query\" \"content-digest\");created=1736940000;\
         expires=1736940060;nonce=\"b64url_r4Nd0mN0nCEK0YQY4d4r7A\";keyid=\"{keyid}\""
    );
    let digest = "sha-256=:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad:";
    let expected = format!(
        "\"@method\": POST\n\"@authority\": api.example.com\n\"@path\": /foo\n\"@query\": ?a=1&b=two\n\
         \"content-digest\": {digest}\n\"@signature-params\": {member}"
    );
    let selected = select(&format!("eth={member}"), "eth=:AA==:", None).unwrap();
    let target = Target::parse("https://api.example.com/foo?a=1&b=two").unwrap();
    let headers = [("Content-Digest", digest)];
    let message = Message { method: "POST", target: &target, headers: &headers };
    assert_eq!(signature_base(&message, &selected.components, &selected.params_line).unwrap(), expected);
    // And a signer writes the same `@signature-params` for the same inputs.
    let components = selected.components.clone();
    let written =
        signature_params(&components, 1736940000, 1736940060, Some("b64url_r4Nd0mN0nCEK0YQY4d4r7A"), keyid);
    assert_eq!(written.unwrap(), member);
}

/// ERC-8128 section 2's header example mixes labels (`sig1` and `eth`) and leaves `@path` and
/// `@query` unquoted, which RFC 8941 cannot parse: an illustration, refused as malformed.
#[test]
fn erc_section_2_example_is_not_well_formed() {
    let req = Req::new("GET", GET, None)
        .with_header(
            "Signature-Input",
            "sig1=(\"@method\" \"@authority\" @path @query \"content-digest\" \"cache-control\");\
             created=1700000000;expires=1700000060;nonce=\"b64url_r4Nd0mN0nCEK0YQY4d4r7A\";\
             keyid=\"erc8128:1:0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045\"",
        )
        .with_header(
            "Signature",
            "eth=:dmSonRcA8ydqKFPQ+/f/dN2I0XviLbXIO4VPl9/41l5byGyBYO1SXY9eWixdKvB6cOaw96kUKFg50LZ60255jhs=:",
        );
    assert_eq!(req.reason(), Reason::Malformed);
}

/// Headers made by `@slicekit/erc8128` 0.2.0 (the ERC authors' TypeScript implementation,
/// signing with viem) for the same key, times and nonces: they verify here, and our signing
/// primitive, given their signature base, makes their exact signature bytes (RFC 6979).
#[test]
fn verifies_signatures_of_the_typescript_implementation() {
    let get = Req::new("GET", "https://api.example.com/api/v1/agents?status=Active&page=2", None)
        .with_header(
            "signature-input",
            "eth=(\"@authority\" \"@method\" \"@path\" \"@query\");created=1767225600;expires=1767225660;\
             nonce=\"nonce-get-1\";keyid=\"erc8128:84532:0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266\"",
        )
        .with_header(
            "signature",
            "eth=:68yUX/M8Xa0RBhgUDqkbJZs7ThYkXDto0JXgFQwK6Zs0PbanJN0YriwKyh2F58OY47L8o6dQd4+ew1ibn7qqjRs=:",
        );
    let post = Req::new("POST", "https://api.example.com/api/v1/kya/verify", Some(br#"{"hello": "world"}"#))
        .with_header("content-type", "application/json")
        .with_header("content-digest", "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:")
        .with_header(
            "signature-input",
            "eth=(\"@authority\" \"@method\" \"@path\" \"content-digest\");created=1767225600;\
             expires=1767225660;nonce=\"nonce-post-1\";\
             keyid=\"erc8128:84532:0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266\"",
        )
        .with_header(
            "signature",
            "eth=:3QDyaPBdT0uE0Qssiy3Ds3SZckvF2TVMz7IrxeR9kpVnlJw9+S9BzrbAUZQHuAJN8HkuSCOEEyzEpJYkZyluzRw=:",
        );
    for req in [get, post] {
        let verified = req.verify().unwrap();
        assert_eq!(verified.signer, SIGNER);
        let input = &req.headers.iter().find(|(n, _)| n == "signature-input").unwrap().1;
        let signature = &req.headers.iter().find(|(n, _)| n == "signature").unwrap().1;
        let ours = req.personal_sign("eth", input.strip_prefix("eth=").unwrap());
        assert_eq!(format!("eth=:{}:", BASE64.encode(ours)), *signature);
    }
}

#[test]
fn tampering_fails_with_the_right_reason() {
    let body: &[u8] = b"{\"a\":1}";
    let req = Req::new("POST", "https://api.example.com/p/q?x=1", Some(body)).signed(Some("n"));
    req.verify().unwrap();

    let mut method = req.clone();
    method.method = "PUT".into();
    assert_eq!(method.reason(), Reason::BadSignature);
    let mut path = req.clone();
    path.url = "https://api.example.com/p/r?x=1".into();
    assert_eq!(path.reason(), Reason::BadSignature);
    let mut query = req.clone();
    query.url = "https://api.example.com/p/q?x=2".into();
    assert_eq!(query.reason(), Reason::BadSignature);
    let mut no_query = req.clone();
    no_query.url = "https://api.example.com/p/q".into();
    assert_eq!(no_query.reason(), Reason::BadSignature);
    let mut host = req.clone();
    host.url = "https://evil.example/p/q?x=1".into();
    assert_eq!(host.reason(), Reason::BadSignature);
    let mut tampered_body = req.clone();
    tampered_body.body = Some(b"{\"a\":2}".to_vec());
    assert_eq!(tampered_body.reason(), Reason::DigestMismatch);
    let mut header = req.clone();
    for (name, value) in &mut header.headers {
        if name == "content-digest" {
            *value = content_digest(b"{\"a\":2}");
        }
    }
    header.body = Some(b"{\"a\":2}".to_vec());
    assert_eq!(header.reason(), Reason::BadSignature);
}

#[test]
fn a_query_or_body_added_after_signing_is_not_request_bound() {
    let req = Req::new("GET", GET, None).signed(Some("n"));
    let mut query = req.clone();
    query.url = format!("{GET}?admin=1");
    assert_eq!(query.reason(), Reason::NotRequestBound);
    let mut body = req.clone();
    body.body = Some(b"x".to_vec());
    assert_eq!(body.reason(), Reason::NotRequestBound);
    // An empty query adds nothing to bind.
    let mut empty = req.clone();
    empty.url = format!("{GET}?");
    empty.verify().unwrap();
}

#[test]
fn class_bound_signatures_are_refused() {
    let only_authority =
        format!("(\"@authority\");created={CREATED};expires={EXPIRES};nonce=\"n\";keyid=\"{}\"", keyid());
    let req = Req::new("GET", GET, None).signed_as("eth", &only_authority);
    let refusal = req.verify().unwrap_err();
    assert_eq!(refusal.reason, Reason::NotRequestBound);
    assert!(refusal.message.contains("@method, @path"), "{}", refusal.message);
}

#[test]
fn every_time_refusal() {
    let req = Req::new("GET", GET, None).signed(Some("n"));
    let policy = VerifyPolicy::new(CHAIN);
    let at = |now| req.verify_with(&policy, now).map(|_| ()).map_err(|e| e.reason);
    assert_eq!(at(CREATED - 60), Ok(()));
    assert_eq!(at(CREATED - 61), Err(Reason::NotYetValid));
    assert_eq!(at(EXPIRES + 60), Ok(()));
    assert_eq!(at(EXPIRES + 61), Err(Reason::Expired));

    let long = format!(
        "(\"@method\" \"@authority\" \"@path\");created={CREATED};expires={};nonce=\"n\";keyid=\"{}\"",
        CREATED + 301,
        keyid()
    );
    assert_eq!(Req::new("GET", GET, None).signed_as("eth", &long).reason(), Reason::WindowTooLong);
    let backwards = format!(
        "(\"@method\" \"@authority\" \"@path\");created={CREATED};expires={CREATED};nonce=\"n\";keyid=\"{}\"",
        keyid()
    );
    assert_eq!(Req::new("GET", GET, None).signed_as("eth", &backwards).reason(), Reason::Malformed);
}

#[test]
fn wrong_chain_and_wrong_authority() {
    let req = Req::new("GET", GET, None).signed(Some("n"));
    let other_chain = req.verify_with(&VerifyPolicy::new(1), CREATED).unwrap_err();
    assert_eq!(other_chain.reason, Reason::WrongChain);

    let headers = req.header_refs();
    let with_authority = |authority| {
        let request = SignedRequest {
            method: "GET",
            url: GET,
            headers: &headers,
            body: None,
            label: None,
            authority: Some(authority),
            now: CREATED,
        };
        verify_request(&request, &VerifyPolicy::new(CHAIN)).map(|_| ()).map_err(|e| e.reason)
    };
    assert_eq!(with_authority("API.example.com:443"), Ok(()));
    assert_eq!(with_authority("api.example.com:8443"), Err(Reason::WrongAuthority));
    assert_eq!(with_authority("other.example"), Err(Reason::WrongAuthority));
    assert_eq!(with_authority("api.example.com/x"), Err(Reason::Malformed));
}

#[test]
fn malformed_and_unsupported_inputs() {
    let req = Req::new("GET", GET, None);
    let without_signature = req.clone().with_header("signature-input", &format!("eth={}", member("")));
    assert_eq!(without_signature.reason(), Reason::Malformed);
    let garbage = req.clone().with_header("signature-input", "eth=(").with_header("signature", "eth=:AA==:");
    assert_eq!(garbage.reason(), Reason::Malformed);
    let not_binary = req.clone().signed_as("eth", &member(""));
    let mut not_binary = not_binary;
    not_binary.headers[1].1 = "eth=\"abc\"".into();
    assert_eq!(not_binary.reason(), Reason::Malformed);
    let mut bad_url = req.clone().signed_as("eth", &member(""));
    bad_url.url = "/a".into();
    assert_eq!(bad_url.reason(), Reason::Malformed);

    // The ERC advises refusing `alg`; other namespaces and component parameters are not ours.
    let alg = req.clone().signed_as("eth", &member(";alg=\"ecdsa-p256-sha256\""));
    assert_eq!(alg.reason(), Reason::Unsupported);
    let eip155 = member("").replace("erc8128:", "eip155:");
    assert_eq!(req.clone().signed_as("eth", &eip155).reason(), Reason::Unsupported);
    let sf = member("").replace("\"@path\")", "\"@path\" \"x-a\";sf)");
    assert_eq!(req.clone().with_header("x-a", "1").signed_as("eth", &sf).reason(), Reason::Unsupported);
    let twice = member("").replace("\"@path\")", "\"@path\" \"@path\")");
    let twice = req.clone().with_header("signature-input", &format!("eth={twice}"));
    assert_eq!(twice.with_header("signature", "eth=:AA==:").reason(), Reason::Malformed);
    let integer_nonce = member("").replace("nonce=\"n1\"", "nonce=7");
    assert_eq!(req.clone().signed_as("eth", &integer_nonce).reason(), Reason::Malformed);
    let long_nonce = member("").replace("n1", &"n".repeat(MAX_NONCE_LEN + 1));
    assert_eq!(req.clone().signed_as("eth", &long_nonce).reason(), Reason::Malformed);
    let missing = req.clone().signed_as("eth", &member("").replace(&format!("created={CREATED};"), ""));
    assert_eq!(missing.reason(), Reason::Malformed);
    // A covered header the request does not carry.
    let absent = member("").replace("\"@path\")", "\"@path\" \"x-absent\")");
    let absent = req.clone().with_header("signature-input", &format!("eth={absent}"));
    assert_eq!(absent.with_header("signature", "eth=:AA==:").reason(), Reason::Malformed);
}

#[test]
fn unknown_parameters_are_covered_and_ignored() {
    let req = Req::new("GET", GET, None).signed_as("eth", &member(";tag=\"kya\";x-ext=?1"));
    let verified = req.verify().unwrap();
    assert_eq!(verified.nonce.as_deref(), Some("n1"));
    // The parameter is in the base: changing it breaks the signature.
    let mut changed = req.clone();
    changed.headers[0].1 = changed.headers[0].1.replace("tag=\"kya\"", "tag=\"other\"");
    assert_eq!(changed.reason(), Reason::BadSignature);
}

#[test]
fn label_selection() {
    let eth = Req::new("GET", GET, None).personal_sign("eth", &member(""));
    let sig1 = Req::new("GET", GET, None).personal_sign("sig1", &member(";tag=\"one\""));
    let sig2 = Req::new("GET", GET, None).personal_sign("sig2", &member(";tag=\"two\""));
    let b64 = |s: [u8; 65]| BASE64.encode(s);
    let req = |inputs: &str, signatures: &str| {
        Req::new("GET", GET, None).with_header("Signature-Input", inputs).with_header("SIGNATURE", signatures)
    };
    let labelled = |r: &Req, label: Option<&str>| {
        let headers = r.header_refs();
        let request = SignedRequest {
            method: "GET",
            url: GET,
            headers: &headers,
            body: None,
            label,
            authority: None,
            now: CREATED,
        };
        match verify_request(&request, &VerifyPolicy::new(CHAIN)) {
            Ok(Verification::Verified(v)) => Ok(v.label),
            Ok(Verification::Erc1271(_)) => Err(Reason::BadSignature),
            Err(e) => Err(e.reason),
        }
    };
    // `eth` wins by default, wherever it is; a named label is taken; one signature is the one.
    let both = req(
        &format!("sig1={}, eth={}", member(";tag=\"one\""), member("")),
        &format!("sig1=:{}:, eth=:{}:", b64(sig1), b64(eth)),
    );
    assert_eq!(labelled(&both, None).as_deref(), Ok("eth"));
    assert_eq!(labelled(&both, Some("sig1")).as_deref(), Ok("sig1"));
    assert_eq!(labelled(&both, Some("sig9")), Err(Reason::Malformed));
    // Two header lines of one dictionary combine.
    let split = req(&format!("sig1={}", member(";tag=\"one\"")), &format!("sig1=:{}:", b64(sig1)))
        .with_header("signature-input", &format!("sig2={}", member(";tag=\"two\"")))
        .with_header("signature", &format!("sig2=:{}:", b64(sig2)));
    assert_eq!(labelled(&split, None), Err(Reason::Malformed));
    assert_eq!(labelled(&split, Some("sig2")).as_deref(), Ok("sig2"));
    let only = req(&format!("sig1={}", member(";tag=\"one\"")), &format!("sig1=:{}:", b64(sig1)));
    assert_eq!(labelled(&only, None).as_deref(), Ok("sig1"));
    // A signature under another label's name does not verify.
    let swapped = req(&format!("eth={}", member("")), &format!("eth=:{}:", b64(sig1)));
    assert_eq!(labelled(&swapped, None), Err(Reason::BadSignature));
}

#[test]
fn nonces_are_required_by_default_and_replayable_needs_early_invalidation() {
    let req = Req::new("GET", GET, None).signed(None);
    assert_eq!(req.reason(), Reason::Unsupported);

    let policy = VerifyPolicy { require_nonce: false, ..VerifyPolicy::new(CHAIN) };
    let Verification::Verified(verified) = req.verify_with(&policy, CREATED).unwrap() else {
        panic!("an EOA signature")
    };
    let ReplayGuard::Replayable(check) = &verified.replay else { panic!("no nonce was signed") };
    assert_eq!(check.keyid, keyid());
    assert_eq!(check.created, CREATED);
    assert_eq!(check.enforce(Some(CREATED), false), Ok(()));
    assert_eq!(check.enforce(Some(CREATED + 1), false).unwrap_err().reason, Reason::Expired);
    assert_eq!(check.enforce(None, true).unwrap_err().reason, Reason::Expired);
}

#[test]
fn a_nonce_store_refuses_the_second_use() {
    let mut store = std::collections::HashSet::new();
    let mut claim = |req: &Req| {
        let verified = req.verify()?;
        let ReplayGuard::Nonce(claim) = verified.replay else { panic!("a nonce was signed") };
        if !store.insert(claim.key.clone()) {
            return Err(claim.replayed());
        }
        Ok(())
    };
    let first = Req::new("GET", GET, None).signed(Some("once"));
    assert_eq!(claim(&first), Ok(()));
    assert_eq!(claim(&first).unwrap_err().reason, Reason::Replayed);
    // The same nonce under an upper-case spelling of the address is the same claim.
    let upper = member("").replace("n1", "once").replace(&hex::encode(SIGNER), &hex::encode_upper(SIGNER));
    let respelled = Req::new("GET", GET, None).signed_as("eth", &upper);
    assert_eq!(claim(&respelled).unwrap_err().reason, Reason::Replayed);
}

#[test]
fn contract_accounts_go_through_erc1271() {
    let other: Address = address!("0x00000000000000000000000000000000000000aa");
    let as_contract = member("").replace(&hex::encode(SIGNER), &hex::encode(other));
    let req = Req::new("GET", GET, None).signed_as("eth", &as_contract);
    assert_eq!(req.reason(), Reason::BadSignature);

    let Verification::Erc1271(pending) = req.verify_with(&VerifyPolicy::new(CHAIN), CREATED).unwrap() else {
        panic!("the signature does not recover to the keyid's address")
    };
    let check = pending.check().clone();
    assert_eq!((check.chain_id, check.address), (CHAIN, other));
    assert_eq!(check.signature.len(), 65);
    let base_hash = {
        let target = Target::parse(GET).unwrap();
        let selected = select(&format!("eth={as_contract}"), "eth=:AA==:", None).unwrap();
        let message = Message { method: "GET", target: &target, headers: &[] };
        eip191_hash_message(signature_base(&message, &selected.components, &selected.params_line).unwrap())
    };
    assert_eq!(check.hash, base_hash);
    assert_eq!(&check.calldata()[..4], &ERC1271_MAGIC_VALUE);

    assert_eq!(pending.clone().complete(&[]).unwrap_err().reason, Reason::BadSignature);
    let mut magic = [0u8; 32];
    magic[..4].copy_from_slice(&ERC1271_MAGIC_VALUE);
    assert_eq!(pending.complete(&magic).unwrap().signer, other);
}

#[test]
fn recovery_accepts_v_0_1_and_high_s() {
    let req = Req::new("GET", GET, None);
    let mut sig = req.personal_sign("eth", &member(""));
    let with = |sig: &[u8]| {
        req.clone()
            .with_header("signature-input", &format!("eth={}", member("")))
            .with_header("signature", &format!("eth=:{}:", BASE64.encode(sig)))
    };
    with(&sig).verify().unwrap();
    sig[64] -= 27;
    with(&sig).verify().unwrap();
    // The same signature with s replaced by n - s and the parity flipped: what `ecrecover` takes.
    let signature = k256::ecdsa::Signature::from_slice(&sig[..64]).unwrap();
    let (r, s) = signature.split_scalars();
    let high = k256::ecdsa::Signature::from_scalars(r, -*s).unwrap();
    let mut malleated = [0u8; 65];
    malleated[..64].copy_from_slice(&high.to_bytes());
    malleated[64] = 1 - sig[64];
    with(&malleated).verify().unwrap();
    sig[64] = 29;
    assert_eq!(with(&sig).reason(), Reason::BadSignature);
    assert_eq!(with(&sig[..64]).reason(), Reason::BadSignature);
}

#[test]
fn digest_without_the_body_is_trusted_to_the_caller() {
    let req = Req::new("POST", GET, Some(b"payload")).signed(Some("n"));
    let mut without_body = req.clone();
    without_body.body = None;
    without_body.verify().unwrap();
    // ...but a content-digest header must then be covered.
    let mut uncovered = Req::new("POST", GET, None).signed(Some("n"));
    uncovered.headers.push(("content-digest".into(), content_digest(b"payload")));
    assert_eq!(uncovered.reason(), Reason::NotRequestBound);
}

#[test]
fn signing_refuses_what_it_cannot_write() {
    let req = Req::new("GET", GET, None);
    let sign = |created, expires, nonce, url: &str| {
        let params = SignParams { chain_id: CHAIN, created, expires, nonce, extra_components: &[] };
        let request = RequestToSign { url, ..req.as_to_sign() };
        sign_request(&request, &params, &key())
    };
    assert!(matches!(sign(10, 10, Some("n"), GET), Err(SignError::Params(_))));
    assert!(matches!(sign(10, 20, Some(""), GET), Err(SignError::Params(_))));
    assert!(matches!(sign(10, 20, Some("é"), GET), Err(SignError::Params(_))));
    assert!(matches!(sign(10, 20, Some("n"), "ftp://x/"), Err(SignError::Url(_))));
    assert!(matches!(sign(u64::MAX - 1, u64::MAX, Some("n"), GET), Err(SignError::Params(_))));
    let absent = SignParams {
        chain_id: CHAIN,
        created: 10,
        expires: 20,
        nonce: Some("n"),
        extra_components: &["x-absent"],
    };
    assert!(matches!(sign_request(&req.as_to_sign(), &absent, &key()), Err(SignError::Component(_))));
    assert_eq!(sign_request_with_secret(&req.as_to_sign(), &absent, &[0u8; 32]).unwrap_err(), SignError::Key);
}

#[test]
fn extra_components_are_signed() {
    let mut req = Req::new("GET", GET, None).with_header("X-Agent", "kya/1");
    let headers =
        req.header_refs().into_iter().map(|(n, v)| (n.to_owned(), v.to_owned())).collect::<Vec<_>>();
    let refs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let params = SignParams {
        chain_id: CHAIN,
        created: CREATED,
        expires: EXPIRES,
        nonce: Some("n"),
        extra_components: &["x-agent"],
    };
    let request = RequestToSign { headers: &refs, ..req.as_to_sign() };
    let signed = sign_request_with_secret(&request, &params, &SECRET).unwrap();
    for (name, value) in signed.pairs() {
        req.headers.push((name.into(), value.into()));
    }
    assert_eq!(req.verify().unwrap().components.last().map(String::as_str), Some("x-agent"));
    req.headers[0].1 = "kya/2".into();
    assert_eq!(req.reason(), Reason::BadSignature);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any path, query and body signs and verifies, and only itself: another body is refused.
    #[test]
    fn sign_verify_round_trip(
        segments in proptest::collection::vec("[a-zA-Z0-9._~%!$&'()*+,;=:@ -]{0,12}", 0..4),
        query in proptest::option::of("[a-zA-Z0-9._~%!$'()*+,;=:@/?& -]{0,24}"),
        body in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        method in "GET|POST|PUT|DELETE|PATCH",
    ) {
        let mut url = format!("https://api.example.com/{}", segments.join("/"));
        if let Some(query) = &query {
            url.push('?');
            url.push_str(query);
        }
        let req = Req::new(&method, &url, body.as_deref()).signed(Some("p"));
        prop_assert_eq!(req.verify().map(|v| v.signer), Ok(SIGNER));
        if let Some(body) = body.filter(|b| !b.is_empty()) {
            let mut tampered = req.clone();
            let mut other = body.clone();
            other[0] ^= 1;
            tampered.body = Some(other);
            prop_assert_eq!(tampered.reason(), Reason::DigestMismatch);
        }
    }
}
