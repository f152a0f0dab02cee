//! Sign then verify: the answer's fields, labels, unknown parameters, recovery's encodings, and a
//! property test over random paths, queries and bodies.

use super::*;

#[test]
fn round_trip_with_body_and_query() {
    let body = br#"{"amount":"100"}"#;
    let req = Req::new("POST", "https://api.example.com/orders?x=1&y=two", Some(body)).signed(Some("n-1"));
    let verified = req.verify().unwrap();
    assert_eq!(verified.facts.signer, SIGNER);
    assert_eq!(verified.facts.keyid, keyid());
    assert_eq!(
        (verified.facts.chain_id, verified.facts.created, verified.facts.expires),
        (CHAIN, CREATED, EXPIRES)
    );
    assert_eq!(verified.facts.nonce.as_deref(), Some("n-1"));
    assert_eq!(verified.facts.components, ["@method", "@authority", "@path", "@query", "content-digest"]);
    assert_eq!(verified.label, "eth");
    let ReplayGuard::Nonce(claim) = &verified.replay else { panic!("a nonce was signed") };
    assert_eq!(claim.key, format!("{}:n-1", keyid()));
    assert_eq!(claim.remember_until, EXPIRES + 60);

    let json = serde_json::to_value(&verified.facts).unwrap();
    let mut keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["chainId", "components", "created", "expires", "keyid", "nonce", "signer"]);
}

#[test]
fn unknown_parameters_are_covered_and_ignored() {
    let req = Req::new("GET", GET, None).signed_as("eth", &member(";tag=\"kya\";x-ext=?1"));
    let verified = req.verify().unwrap();
    assert_eq!(verified.facts.nonce.as_deref(), Some("n1"));
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
            authority: "api.example.com",
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
    assert_eq!(req.verify().unwrap().facts.components.last().map(String::as_str), Some("x-agent"));
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
        prop_assert_eq!(req.verify().map(|v| v.facts.signer), Ok(SIGNER));
        if let Some(body) = body.filter(|b| !b.is_empty()) {
            let mut tampered = req.clone();
            let mut other = body.clone();
            other[0] ^= 1;
            tampered.body = Some(other);
            prop_assert_eq!(tampered.reason(), Reason::DigestMismatch);
        }
    }
}

/// A key held elsewhere (a wallet, a KMS): the prepared base signed with `personal_sign`, or its
/// hash signed raw with `v` as 0 or 1, gives the very headers a local key gives.
#[test]
fn a_prepared_request_finished_by_an_external_signer_is_what_a_local_key_signs() {
    let body = br#"{"prompt":"hi"}"#;
    let req = Req::new("POST", "https://api.example.com/v1/infer?model=small", Some(body));
    let params = SignParams {
        chain_id: CHAIN,
        created: CREATED,
        expires: EXPIRES,
        nonce: Some("n-9"),
        extra_components: &[],
    };
    let local = sign_request(&req.as_to_sign(), &params, &key()).unwrap();
    let prepared = prepare_request(&req.as_to_sign(), &params, SIGNER).unwrap();
    assert_eq!(prepared.message_hash(), eip191_hash_message(prepared.signature_base().as_bytes()));
    assert!(prepared.signature_base().starts_with("\"@method\": POST\n\"@authority\": api.example.com\n"));
    let signature = personal_sign(prepared.signature_base());
    assert_eq!(prepared.clone().finish(&signature).unwrap(), local);
    let mut raw = signature;
    raw[64] -= 27;
    assert_eq!(prepared.clone().finish(&raw).unwrap(), local, "v 0 or 1 is written as 27 or 28");
    assert_eq!(prepared.finish(&[]).unwrap_err(), SignError::Signature("the signature is empty".into()));
}
