//! Every refusal reason, provoked: tampered requests, bad parameters, time, chain, authority,
//! replay, and contract accounts.

use super::*;

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
            authority,
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
    let solana = member("").replace("erc8128:", "solana:");
    assert_eq!(req.clone().signed_as("eth", &solana).reason(), Reason::Unsupported);
    // A CAIP-10 keyid without the revision's tag may be another profile's signature.
    let untagged = member("").replace("erc8128:", "eip155:");
    assert_eq!(req.clone().signed_as("eth", &untagged).reason(), Reason::Unsupported);
    let other_tag = member(";tag=\"web-bot-auth\"").replace("erc8128:", "eip155:");
    assert_eq!(req.clone().signed_as("eth", &other_tag).reason(), Reason::Unsupported);
    let tag_integer = member(";tag=1");
    assert_eq!(req.clone().signed_as("eth", &tag_integer).reason(), Reason::Malformed);
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
    // And under the CAIP-10 form of the keyid: one account, one set of nonces.
    let caip10 = member(";tag=\"erc8128\"").replace("n1", "once").replace("erc8128:", "eip155:");
    let caip10 = Req::new("GET", GET, None).signed_as("eth", &caip10);
    assert_eq!(claim(&caip10).unwrap_err().reason, Reason::Replayed);
}

#[test]
fn the_revisions_caip10_keyid_with_its_tag_verifies() {
    let caip10 = member(";tag=\"erc8128\"").replace("erc8128:", "eip155:");
    let verified = Req::new("GET", GET, None).signed_as("eth", &caip10).verify().unwrap();
    assert_eq!(verified.facts.signer, SIGNER);
    assert_eq!(verified.facts.chain_id, CHAIN);
    // The keyid is reported as signed; the nonce is remembered under the canonical name.
    assert_eq!(verified.facts.keyid, keyid().replace("erc8128:", "eip155:"));
    let ReplayGuard::Nonce(claim) = verified.replay else { panic!("a nonce was signed") };
    assert_eq!(claim.key, format!("{}:n1", keyid()));
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
    assert_eq!(pending.complete(&magic).unwrap().facts.signer, other);
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
