//! Interoperability: the ERC's own example, and signatures exchanged with the TypeScript
//! implementation by the ERC's authors (`@slicekit/erc8128`).

use super::*;

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
        assert_eq!(verified.facts.signer, SIGNER);
        let input = &req.headers.iter().find(|(n, _)| n == "signature-input").unwrap().1;
        let signature = &req.headers.iter().find(|(n, _)| n == "signature").unwrap().1;
        let ours = req.personal_sign("eth", input.strip_prefix("eth=").unwrap());
        assert_eq!(format!("eth=:{}:", BASE64.encode(ours)), *signature);
    }
}

/// Our signatures for the same requests, pinned: signing is deterministic (RFC 6979), and
/// `@slicekit/erc8128` 0.2.0's `verifyRequest` (with viem's `verifyMessage`) accepted each of
/// these headers when they were made. A change to how we sign shows here first.
#[test]
fn our_signatures_for_the_typescript_verifier() {
    let cases = [
        (
            "GET",
            "https://api.example.com/api/v1/agents?status=Active&page=2",
            None,
            "(\"@method\" \"@authority\" \"@path\" \"@query\")",
            "YqdlBeR+FNT0MbbW00WPneGLOZAu9HreORFtg1yDqXJOVQhyBtcNGNXs7isOe+RIAnRQ57Jd330jaarbO5cMVBw=",
        ),
        (
            "POST",
            "https://api.example.com/api/v1/kya/verify",
            Some(&br#"{"hello": "world"}"#[..]),
            "(\"@method\" \"@authority\" \"@path\" \"content-digest\")",
            "+43oZmtVJmCTAyxUb2sdCyGzwsgbBbepVJw++tDgTDhXpz1GbYcHTMhqyRt6m/jtdC4ceW5w/gVtBovyt1ymVxw=",
        ),
        (
            "GET",
            "https://api.example.com/a%20b/c",
            None,
            "(\"@method\" \"@authority\" \"@path\")",
            "8WCO6ZdQTHSAG1Wa2l9zkHYULzZd+Z9d1pwekP0LFFIfItMpJBomIJikJl3wnYAxlzraDzDKI0ER97i/thHqyxs=",
        ),
    ];
    for (method, url, body, components, signature) in cases {
        let req = Req::new(method, url, body).signed(Some("ours-1"));
        let header = |name: &str| req.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        assert_eq!(
            header("signature-input").unwrap(),
            format!(
                "eth={components};created={CREATED};expires={EXPIRES};nonce=\"ours-1\";keyid=\"{}\"",
                keyid()
            )
        );
        assert_eq!(header("signature").unwrap(), format!("eth=:{signature}:"));
        if body.is_some() {
            assert_eq!(
                header("content-digest"),
                Some("sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:")
            );
        }
    }
}
