//! `kya sign`, `kya verify` and `kya fetch` (ERC-8128) against the real Worker: a request signed
//! by a seeded agent's key is verified with its standing, the same headers again are `replayed`,
//! a lapsed agent's request gets exit 3, and `kya fetch` reaches a provider on loopback that has
//! the Worker verify what it receives through `kya_client::Verifier`.

use kya_client::{ApiClient, ReceivedRequest, Verdict, Verifier};
use kya_devchain::dev_accounts;
use serde_json::{Value, json};
use tokio::{
    io::AsyncWriteExt,
    net::{TcpListener, TcpStream},
};

use super::{Setup, env_of, key_of};

const URL: &str = "https://api.provider.example/v1/infer?model=small";
const BODY: &str = r#"{"prompt":"hello"}"#;
/// The host the provider serves, which `kya verify` must be told (never read from the URL).
const AUTHORITY: &str = "api.provider.example";

pub(super) async fn signed_requests(t: &Setup) {
    let compliant = t.demo.roles.compliant;
    let wallet = t.wallet(compliant);
    let key = key_of(&dev_accounts::agent_wallet(compliant));
    let as_agent = [("AGENT_PRIVATE_KEY", key.as_str())];
    let chain_id = t.chain.chain_id();

    // `kya sign`: the headers, and what they say.
    let args =
        ["sign", "-X", "POST", "-d", BODY, "-H", "Content-Type: application/json", "--cover", "content-type"];
    let signed = t.ok_json(&[&args[..], &[URL, "--json"]].concat(), &as_agent).await;
    let keyid = format!("erc8128:{chain_id}:{}", wallet.to_lowercase());
    assert_eq!((&signed["signer"], &signed["keyid"]), (&json!(wallet), &json!(keyid)), "{signed}");
    let (created, expires) = (signed["created"].as_u64().unwrap(), signed["expires"].as_u64().unwrap());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(created.abs_diff(now) <= 5 && expires == created + 60, "now, for 60 s: {signed}");
    let nonce = signed["nonce"].as_str().expect("a nonce");
    assert!(nonce.len() == 22 && nonce.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    let headers = &signed["headers"];
    assert_eq!(headers["content-digest"], kya_client::content_digest(BODY.as_bytes()));
    assert_eq!(
        headers["signature-input"],
        format!(
            r#"eth=("@method" "@authority" "@path" "@query" "content-digest" "content-type");created={created};expires={expires};nonce="{nonce}";keyid="{keyid}""#
        )
    );

    // `kya verify` of those headers: verified, the agent's standing, exit 0.
    let fields: Vec<String> = ["signature-input", "signature", "content-digest"]
        .iter()
        .map(|name| format!("{name}: {}", headers[name].as_str().unwrap()))
        .chain(["Content-Type: application/json".to_owned()])
        .collect();
    let mut verify =
        vec!["verify", "--method", "POST", "--url", URL, "--authority", AUTHORITY, "-d", BODY, "--json"];
    for field in &fields {
        verify.extend(["-H", field.as_str()]);
    }
    let verified = t.ok_json(&verify, &[]).await;
    assert_eq!(verified["verified"], true, "{verified}");
    assert_eq!(
        (&verified["signer"], &verified["keyid"], &verified["nonce"]),
        (&json!(wallet), &json!(keyid), &json!(nonce))
    );
    assert_eq!((verified["created"].as_u64(), verified["chainId"].as_u64()), (Some(created), Some(chain_id)));
    assert_eq!(
        verified["components"],
        json!(["@method", "@authority", "@path", "@query", "content-digest", "content-type"])
    );
    assert_eq!(verified["kya"]["agent"]["agentId"], compliant);
    assert_eq!((&verified["kya"]["isCompliant"], &verified["decision"]), (&json!(true), &json!("provision")));

    // The same headers again: the nonce is used. Exit 4, deny.
    let replayed = t.kya(&verify, &[]).await;
    assert_eq!(replayed.code, 4, "{}{}", replayed.stdout, replayed.stderr);
    let refused = replayed.json();
    assert_eq!((&refused["verified"], &refused["reason"]), (&json!(false), &json!("replayed")), "{refused}");
    assert!(refused["message"].as_str().unwrap().contains(nonce), "{refused}");

    // A lapsed agent's GET, signed as text lines and read back with `-H @file`: exit 3.
    let lapsed = t.demo.roles.lapsed;
    let lapsed_key = key_of(&dev_accounts::agent_wallet(lapsed));
    let lines = t.kya(&["sign", URL], &[("AGENT_PRIVATE_KEY", &lapsed_key)]).await;
    assert_eq!(lines.code, 0, "{}", lines.stderr);
    let names: Vec<&str> =
        lines.stdout.lines().filter_map(|line| line.split_once(": ")).map(|(name, _)| name).collect();
    assert_eq!(names, ["Signature-Input", "Signature"], "no body, no digest: {}", lines.stdout);
    let file = t.cwd.path().join("lapsed-headers.txt");
    std::fs::write(&file, &lines.stdout).unwrap();
    let header_file = format!("@{}", file.display());
    // Without the host the provider serves: refused before anything is asked, saying so.
    let unbound = t.kya(&["verify", "--url", URL, "-H", &header_file], &[]).await;
    assert_eq!(unbound.code, 1, "{}{}", unbound.stdout, unbound.stderr);
    assert!(unbound.stderr.contains("--authority <AUTHORITY>"), "{}", unbound.stderr);
    // Signed for this host, checked for another: wrong_authority, a deny.
    let elsewhere = t
        .kya(&["verify", "--url", URL, "--authority", "api.other.example", "-H", &header_file, "--json"], &[])
        .await;
    assert_eq!(elsewhere.code, 4, "{}{}", elsewhere.stdout, elsewhere.stderr);
    assert_eq!(elsewhere.json()["reason"], "wrong_authority", "{}", elsewhere.stdout);
    let run = t.kya(&["verify", "--url", URL, "--authority", AUTHORITY, "-H", &header_file], &[]).await;
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let text: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(text[0], "renew attestation", "{}", run.stdout);
    let lapsed_keyid = format!("erc8128:{chain_id}:{}", t.wallet(lapsed).to_lowercase());
    assert_eq!(text[1], format!("  signature    verified: {lapsed_keyid}"));
    assert!(run.stdout.contains(&format!("agent        {lapsed} (Active)")), "{}", run.stdout);

    passes(t, &as_agent).await;

    // `kya fetch` to a provider that verifies through the API: served to the compliant agent
    // (the provider names it), 403 for a wallet with no agent (exit 1, the body still printed).
    let provider = provider(&env_of(t, "KYA_API_URL")).await;
    let endpoint = format!("{provider}/v1/infer?model=small");
    let fetch =
        ["fetch", "-d", BODY, "-H", "Content-Type: application/json", "--cover", "content-type", &endpoint];
    let served = t.kya(&fetch, &as_agent).await;
    assert_eq!(served.code, 0, "{}{}", served.stdout, served.stderr);
    let answer: Value = serde_json::from_str(&served.stdout).expect("the provider's JSON");
    assert_eq!(
        answer,
        json!({ "agentId": compliant, "signer": wallet, "prompt": "hello", "carriedPass": true })
    );
    // `--no-pass`: the signature alone.
    let bare = t.kya(&[&fetch[..], &["--no-pass"]].concat(), &as_agent).await;
    assert_eq!(bare.code, 0, "{}{}", bare.stdout, bare.stderr);
    let answer: Value = serde_json::from_str(&bare.stdout).expect("the provider's JSON");
    assert_eq!(answer["carriedPass"], false, "{answer}");
    let stranger = key_of(&dev_accounts::agent_wallet(9_000_020));
    let denied = t.kya(&fetch, &[("AGENT_PRIVATE_KEY", &stranger)]).await;
    assert_eq!(denied.code, 1, "{}{}", denied.stdout, denied.stderr);
    assert!(denied.stderr.contains("answered HTTP 403 Forbidden"), "{}", denied.stderr);
    let answer: Value = serde_json::from_str(&denied.stdout).expect("the provider's JSON");
    assert_eq!(answer["error"], "deny or register", "{answer}");
}

/// `kya pass` for a compliant agent, a lapsed one and a stranger (its exit codes), and `kya verify`
/// of a signed request with the pass it carried: admitted offline, or refused (exit 4) when the
/// pass is another wallet's or was changed.
async fn passes(t: &Setup, as_agent: &[(&str, &str)]) {
    let compliant = t.demo.roles.compliant;
    let wallet = t.wallet(compliant);
    let run = t.kya(&["pass", &wallet], &[]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let jws = run.stdout.trim().to_owned();
    assert_eq!(jws.split('.').count(), 3, "one compact JWS on stdout: {}", run.stdout);
    assert!(run.stderr.starts_with("pass verified (provision)"), "{}", run.stderr);
    let shown = t.ok_json(&["pass", &wallet, "--json"], &[]).await;
    let claims = &shown["claims"];
    assert_eq!(claims["sub"], format!("eip155:{}:{wallet}", t.chain.chain_id()));
    assert_eq!(claims["iss"], env_of(t, "KYA_API_URL"));
    assert_eq!((&claims["kya"]["agentId"], &claims["kya"]["isCompliant"]), (&json!(compliant), &json!(true)));
    let lapsed = t.kya(&["pass", &t.wallet(t.demo.roles.lapsed)], &[]).await;
    assert_eq!(lapsed.code, 3, "{}{}", lapsed.stdout, lapsed.stderr);
    let lapsed_pass = lapsed.stdout.trim().to_owned();
    let stranger = dev_accounts::agent_wallet(9_000_030).address().to_checksum(None);
    assert_eq!(t.kya(&["pass", &stranger], &[]).await.code, 4);

    // A request signed anew, checked with its own pass, then with the lapsed agent's.
    let args =
        ["sign", "-X", "POST", "-d", BODY, "-H", "Content-Type: application/json", "--cover", "content-type"];
    let verify_with = |signed: &Value, pass: &str| {
        let mut headers: Vec<String> = ["signature-input", "signature", "content-digest"]
            .iter()
            .map(|name| format!("{name}: {}", signed["headers"][name].as_str().unwrap()))
            .collect();
        headers.push("Content-Type: application/json".to_owned());
        headers.push(format!("KYA-Pass: {pass}"));
        headers
    };
    for (pass, code, expected) in [
        (jws.clone(), 0, json!({ "admitted": true })),
        (lapsed_pass, 4, json!({ "admitted": false, "reason": "not_the_signer" })),
        (format!("{jws}x"), 4, json!({ "admitted": false, "reason": "malformed" })),
    ] {
        let signed = t.ok_json(&[&args[..], &[URL, "--json"]].concat(), as_agent).await;
        let headers = verify_with(&signed, &pass);
        let mut verify =
            vec!["verify", "--method", "POST", "--url", URL, "--authority", AUTHORITY, "-d", BODY, "--json"];
        for field in &headers {
            verify.extend(["-H", field.as_str()]);
        }
        let run = t.kya(&verify, &[]).await;
        assert_eq!(run.code, code, "{}{}", run.stdout, run.stderr);
        let answer = run.json();
        assert_eq!(answer["verified"], true, "{answer}");
        let check = &answer["passCheck"];
        assert_eq!(check["admitted"], expected["admitted"], "{answer}");
        if let Some(reason) = expected.get("reason") {
            assert_eq!(&check["reason"], reason, "{answer}");
        } else {
            assert_eq!(check["claims"]["sub"], format!("eip155:{}:{wallet}", t.chain.chain_id()));
        }
    }
}

/// A provider on loopback (plain HTTP/1.1, one request a connection): every request goes to
/// `kya_client::Verifier` for the origin it serves and is answered as `examples/provider.rs`
/// answers (200 with the agent, 401 with the reason, 403 with the decision). Its API calls come
/// from an address of their own, so the command line's rate-limit quota is its own.
async fn provider(api: &str) -> String {
    kya_client::install_crypto_provider();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("cf-connecting-ip", "203.0.113.77".parse().unwrap());
    let http = reqwest::Client::builder().default_headers(headers).build().unwrap();
    let verifier = Verifier::with_api(ApiClient::with_http(api, http).unwrap()).serving(&origin).unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let verifier = verifier.clone();
            tokio::spawn(async move { serve(stream, &verifier).await });
        }
    });
    origin
}

async fn serve(stream: TcpStream, verifier: &Verifier) {
    let (read, mut stream) = stream.into_split();
    let Some(request) = kya_tests::http1::read_request(&mut tokio::io::BufReader::new(read)).await else {
        return;
    };
    let (method, target, headers, body) = (request.method, request.target, request.headers, request.body);

    let url = verifier.url_for(&target);
    let mut received = ReceivedRequest::new(&method, &url).body(&body);
    received.headers = headers;
    let verdict = verifier.verify(&received).await.expect("the API answers");
    let answer = match &verdict {
        Verdict::Refused(refusal) => json!({ "error": refusal.reason, "message": refusal.message }),
        Verdict::Verified(signed) if !verdict.is_allowed() => json!({ "error": signed.kya.decision() }),
        Verdict::Verified(signed) => {
            let prompt: Value = serde_json::from_slice(&body).unwrap_or_default();
            json!({
                "agentId": signed.kya.agent.as_ref().map(|agent| agent.agent_id),
                "signer": signed.signature.signer.to_checksum(None),
                "prompt": prompt["prompt"],
                "carriedPass": received.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("kya-pass")),
            })
        }
    };
    let status = match verdict.status_code() {
        200 => "200 OK",
        401 => "401 Unauthorized",
        _ => "403 Forbidden",
    };
    let answer = answer.to_string();
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
