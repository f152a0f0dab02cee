//! `kya sign`, `kya fetch` and `kya verify`: ERC-8128 signed HTTP requests with curl's options
//! (`-X`, `-H`, `-d`). An agent signs with its key (`--key` / `AGENT_PRIVATE_KEY`, or a
//! keystore) and a fresh nonce each time; a provider hands a received request to the API's
//! `POST /api/v1/kya/verify` and gets `kya check`'s exit codes back.

use std::{
    io::{Read, Write},
    time::Duration,
};

use anyhow::{Context, Result, anyhow, bail};
use kya_core::{KyaDecision, pass};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{
    args::{Fetch, HttpRequest, RequestSigning, Sign, Signing, Verify},
    render::{self, Style},
    settings::{self, Settings},
};
use crate::{ReceivedRequest, RequestSignature, RequestSigner, RequestToSign, Verdict};

/// Exit code of a verified request whose signer is not registered, and of a refused signature:
/// deny (`kya check`'s 4).
const EXIT_DENY: i32 = 4;

/// The request as typed: method, URL, header fields, body.
struct Typed {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

impl Typed {
    fn read(url: &str, method: Option<&str>, headers: &[String], data: Option<&str>) -> Result<Self> {
        let url = url.trim();
        let parsed = reqwest::Url::parse(url).map_err(|error| anyhow!("invalid URL {url:?}: {error}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            bail!("invalid URL {url:?}: must start with http:// or https://");
        }
        let body = data.map(body).transpose()?;
        let method = match method.map(str::trim) {
            Some(method) => method.to_owned(),
            None if body.is_some() => "POST".to_owned(),
            None => "GET".to_owned(),
        };
        reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| anyhow!("invalid method {method:?}"))?;
        Ok(Self { method, url: url.to_owned(), headers: header_fields(headers)?, body })
    }

    fn pairs(&self) -> Vec<(&str, &str)> {
        self.headers.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect()
    }
}

/// `Name: value` fields; `@file` reads a file of them, one a line (blank lines skipped), as
/// curl's `-H @file` does, so `kya sign`'s output goes back in as it is.
fn header_fields(given: &[String]) -> Result<Vec<(String, String)>> {
    let mut fields = Vec::new();
    for text in given {
        let lines = match text.strip_prefix('@') {
            Some(path) => read_source(path).and_then(|bytes| {
                String::from_utf8(bytes).map_err(|_| anyhow!("-H @{path}: not UTF-8 text"))
            })?,
            None => text.clone(),
        };
        for line in lines.lines().map(str::trim).filter(|line| !line.is_empty()) {
            let Some((name, value)) = line.split_once(':') else {
                bail!("invalid header {line:?}: expected 'Name: value'");
            };
            let name = name.trim();
            if name.is_empty() || !name.bytes().all(|byte| byte.is_ascii_graphic()) {
                bail!("invalid header {line:?}: its name must be a token");
            }
            fields.push((name.to_owned(), value.trim().to_owned()));
        }
    }
    Ok(fields)
}

/// A body: the text as given, or `@file`'s bytes exactly (`@-`: stdin). Unlike curl's `-d`,
/// nothing is stripped from a file: the signature covers the bytes as sent.
fn body(data: &str) -> Result<Vec<u8>> {
    match data.strip_prefix('@') {
        Some(path) => read_source(path),
        None => Ok(data.as_bytes().to_vec()),
    }
}

fn read_source(path: &str) -> Result<Vec<u8>> {
    if path == "-" {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).context("reading stdin")?;
        return Ok(bytes);
    }
    std::fs::read(path).with_context(|| format!("reading {path}"))
}

/// The agent's request signer: its key, the keyid's chain, the window and the covered fields.
fn signer(settings: &Settings, signing: &RequestSigning) -> Result<RequestSigner> {
    let key = settings::signer(&Signing {
        key: signing.key.clone(),
        keystore: signing.keystore.clone(),
        direct: false,
        gas: None,
    })?;
    Ok(RequestSigner::new(&key, signing.chain_id.unwrap_or(settings.chain_id))
        .with_window(signing.window)
        .map_err(|error| anyhow!("--window: {error}"))?
        .covering(&signing.cover))
}

fn sign_typed(signer: &RequestSigner, typed: &Typed) -> Result<RequestSignature> {
    let headers = typed.pairs();
    let request = RequestToSign {
        method: &typed.method,
        url: &typed.url,
        headers: &headers,
        body: typed.body.as_deref(),
    };
    Ok(signer.sign(&request)?)
}

/// `kya sign`: the header lines to send (`Name: value`, as `curl -H @file` reads them), or one
/// JSON document with `--json`.
pub(super) fn sign(settings: &Settings, args: &Sign) -> Result<i32> {
    let HttpRequest { url, method, headers, data } = &args.request;
    let typed = Typed::read(url, method.as_deref(), headers, data.as_deref())?;
    let signature = sign_typed(&signer(settings, &args.signing)?, &typed)?;
    if settings.json {
        let document = SignOutput {
            method: &typed.method,
            url: &typed.url,
            signer: signature.signer.to_checksum(None),
            keyid: &signature.keyid,
            created: signature.created,
            expires: signature.expires,
            nonce: &signature.nonce,
            headers: HeaderValues {
                signature_input: &signature.headers.signature_input,
                signature: &signature.headers.signature,
                content_digest: signature.headers.content_digest.as_deref(),
            },
        };
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        println!("{}", header_lines(&signature));
    }
    Ok(0)
}

/// `kya sign --json`: the request, what the signature says, and the header fields to send
/// (lowercase names, as `POST /api/v1/kya/verify` takes them).
#[derive(Serialize)]
struct SignOutput<'a> {
    method: &'a str,
    url: &'a str,
    signer: String,
    keyid: &'a str,
    created: u64,
    expires: u64,
    nonce: &'a str,
    headers: HeaderValues<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct HeaderValues<'a> {
    signature_input: &'a str,
    signature: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_digest: Option<&'a str>,
}

fn header_lines(signature: &RequestSignature) -> String {
    let mut lines = vec![
        format!("Signature-Input: {}", signature.headers.signature_input),
        format!("Signature: {}", signature.headers.signature),
    ];
    lines.extend(signature.headers.content_digest.as_ref().map(|digest| format!("Content-Digest: {digest}")));
    lines.join("\n")
}

/// `kya fetch`: sends the signed request (redirects not followed, as curl does by default) and
/// prints the answer's body (`-i`: after its status line and headers). Exit code 0 for a status
/// below 400, else 1 with the status on stderr.
pub(super) async fn fetch(settings: &Settings, args: &Fetch) -> Result<i32> {
    let HttpRequest { url, method, headers, data } = &args.request;
    let typed = Typed::read(url, method.as_deref(), headers, data.as_deref())?;
    let signer = signer(settings, &args.signing)?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("kya/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("HTTP client")?;
    let method = reqwest::Method::from_bytes(typed.method.as_bytes())?;
    let mut builder = http.request(method, &typed.url);
    for (name, value) in &typed.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    if let Some(body) = &typed.body {
        builder = builder.body(body.clone());
    }
    if !args.no_pass && !typed.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(pass::HEADER)) {
        builder = match own_pass(settings, signer.address()).await {
            Ok(jws) => builder.header(pass::HEADER, jws),
            // The signature alone still reaches the provider; it may ask for a pass.
            Err(error) => {
                eprintln!("warning: sending no KYA-Pass: {error:#}");
                builder
            }
        };
    }
    let mut request = builder.build().map_err(|error| anyhow!("invalid request: {error}"))?;
    signer.sign_reqwest(&mut request)?;
    let response = http.execute(request).await.map_err(|error| {
        anyhow!(
            "{} could not be reached: {}",
            kya_core::chain::redact::url(&typed.url),
            crate::http::reason_of(&error)
        )
    })?;
    let status = response.status();
    let version = response.version();
    let headers = response.headers().clone();
    let bytes = response
        .bytes()
        .await
        .map_err(|error| anyhow!("reading the answer: {}", crate::http::reason_of(&error)))?;
    if settings.json {
        let headers: Map<String, Value> = headers
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into()))
            .collect();
        let document = json!({
            "status": status.as_u16(),
            "headers": headers,
            "body": String::from_utf8_lossy(&bytes),
        });
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        let mut out = std::io::stdout().lock();
        if args.include {
            writeln!(out, "{version:?} {status}")?;
            for (name, value) in &headers {
                writeln!(out, "{name}: {}", String::from_utf8_lossy(value.as_bytes()))?;
            }
            writeln!(out)?;
        }
        out.write_all(&bytes)?;
        if !bytes.ends_with(b"\n") && !bytes.is_empty() {
            writeln!(out)?;
        }
        out.flush()?;
    }
    if status.is_client_error() || status.is_server_error() {
        eprintln!("error: {} answered HTTP {status}", kya_core::chain::redact::url(&typed.url));
        return Ok(super::EXIT_ERROR);
    }
    Ok(0)
}

/// The signer's own pass, from the API.
async fn own_pass(settings: &Settings, wallet: alloy::primitives::Address) -> Result<String> {
    Ok(settings.api()?.pass(wallet).await?)
}

/// `kya verify`: the API's verdict, and `kya check`'s exit codes for the signer (a refused
/// signature: 4, deny). A `KYA-Pass` among the headers is checked offline, as a provider would:
/// a refused pass is a deny (4) whatever the API's standing says.
pub(super) async fn verify(settings: &Settings, style: Style, args: &Verify) -> Result<i32> {
    let typed = Typed::read(&args.url, args.method.as_deref(), &args.headers, args.data.as_deref())?;
    for needed in ["signature-input", "signature"] {
        if !typed.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(needed)) {
            bail!("no {needed} header: pass the request's Signature-Input and Signature with -H");
        }
    }
    let mut received = ReceivedRequest::new(&typed.method, &typed.url);
    received.headers = typed.headers.clone();
    received.body = typed.body.as_deref();
    received.label = args.label.clone();
    let verdict = settings.api()?.verify(&received, &args.authority).await?;
    let carried = typed.headers.iter().find(|(name, _)| name.eq_ignore_ascii_case(pass::HEADER));
    let pass_check = match (carried, &verdict) {
        (Some((_, jws)), Verdict::Verified(signed)) => {
            let verifier = super::pass::verifier(settings).await?;
            Some(match verifier.admit(jws, signed.signature.signer).await {
                Ok(pass) => Ok(pass),
                Err(crate::Error::PassRefused(refusal)) => Err(refusal),
                Err(error) => return Err(error.into()),
            })
        }
        _ => None,
    };
    if settings.json {
        let mut value = serde_json::to_value(&verdict)?;
        if let Some(decision) = verdict.decision() {
            value["decision"] = serde_json::to_value(decision)?;
        }
        match &pass_check {
            Some(Ok(pass)) => {
                value["passCheck"] = json!({ "admitted": true, "kid": pass.kid, "claims": pass.claims })
            }
            Some(Err(refusal)) => {
                value["passCheck"] =
                    json!({ "admitted": false, "reason": refusal.reason(), "message": refusal.to_string() });
            }
            None => {}
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("{}", render::verdict(style, &verdict));
        match &pass_check {
            Some(Ok(pass)) => println!("{}", render::pass(style, pass)),
            Some(Err(refusal)) => println!("{}", render::pass_refused(style, refusal)),
            None => {}
        }
    }
    if matches!(pass_check, Some(Err(_))) {
        return Ok(EXIT_DENY);
    }
    Ok(match verdict.decision() {
        Some(KyaDecision::Provision) => 0,
        Some(KyaDecision::RenewAttestation) => 3,
        Some(KyaDecision::DenyOrRegister) | None => EXIT_DENY,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_as_curl_reads_them() {
        let typed = Typed::read("https://a.example/p?q=1", None, &[], None).unwrap();
        assert_eq!((typed.method.as_str(), typed.body), ("GET", None));
        let typed =
            Typed::read(" https://a.example/ ", None, &["Content-Type: application/json".into()], Some("{}"))
                .unwrap();
        assert_eq!((typed.method.as_str(), typed.url.as_str()), ("POST", "https://a.example/"));
        assert_eq!(typed.headers, [("Content-Type".to_owned(), "application/json".to_owned())]);
        assert_eq!(typed.body.as_deref(), Some(b"{}".as_slice()));
        let typed = Typed::read("http://a.example/", Some("PUT"), &[], None).unwrap();
        assert_eq!(typed.method, "PUT");
        for (url, method, header, message) in [
            ("a.example/p", None, None, "invalid URL"),
            ("ftp://a.example/", None, None, "must start with http"),
            ("https://a.example/", Some("GE T"), None, "invalid method"),
            ("https://a.example/", None, Some("no colon"), "expected 'Name: value'"),
            ("https://a.example/", None, Some(": empty name"), "must be a token"),
        ] {
            let headers: Vec<String> = header.into_iter().map(str::to_owned).collect();
            let error = Typed::read(url, method, &headers, None).err().expect("refused").to_string();
            assert!(error.contains(message), "{error}");
        }
    }

    #[test]
    fn header_files_hold_one_field_a_line() {
        let dir = std::env::temp_dir().join(format!("kya-headers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h.txt");
        std::fs::write(&path, "Signature-Input: eth=(\"@method\");created=1\n\nSignature: eth=:AA==:\n")
            .unwrap();
        let fields = header_fields(&[format!("@{}", path.display()), "X-A: b: c".into()]).unwrap();
        assert_eq!(
            fields,
            [
                ("Signature-Input".to_owned(), "eth=(\"@method\");created=1".to_owned()),
                ("Signature".to_owned(), "eth=:AA==:".to_owned()),
                ("X-A".to_owned(), "b: c".to_owned()),
            ]
        );
        std::fs::write(&path, b"{\"a\":1}\n").unwrap();
        assert_eq!(body(&format!("@{}", path.display())).unwrap(), b"{\"a\":1}\n", "file bytes as they are");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
