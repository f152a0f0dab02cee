//! The provider's side: a [`Verifier`] forwards a received request's signature, the header
//! fields it covers and its body to the API's `POST /api/v1/kya/verify`, which checks the
//! signature, claims its nonce once worldwide and reads the signer's KYA standing; the answer
//! comes back as a [`Verdict`].

use base64::Engine;
use kya_core::{
    KyaDecision, KyaResult,
    erc8128::{Refusal, SignatureFacts},
};
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize, Serializer, ser::SerializeMap};
use serde_json::{Map, Value, json};

use crate::{ApiClient, Error, Result};

/// A request as the provider received it.
#[derive(Debug, Clone, Default)]
pub struct ReceivedRequest<'a> {
    /// The method, as received.
    pub method: String,
    /// The absolute URL it was sent to (`https://host/path?query`): [`Verifier::url_for`]
    /// builds it from the path and query a server sees.
    pub url: String,
    /// Its header fields, names in any case; a field received several times, several times.
    pub headers: Vec<(String, String)>,
    /// Its body, when it has one. Left out, a covered `content-digest` is trusted to be the
    /// body's: the caller then checks it (`kya_core::erc8128::content_digest`).
    pub body: Option<&'a [u8]>,
    /// Which signature to verify when there are several; by default `eth`, else the only one.
    pub label: Option<String>,
}

impl<'a> ReceivedRequest<'a> {
    /// `method` to `url` (absolute), with no header and no body yet.
    pub fn new(method: &str, url: &str) -> Self {
        Self { method: method.to_owned(), url: url.to_owned(), ..Self::default() }
    }

    /// With one more header field.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// With the header fields of an `http` header map (as hyper, warp and axum give them);
    /// values that are not visible ASCII are left out (no signature can cover them).
    pub fn headers(mut self, headers: &HeaderMap) -> Self {
        self.headers.extend(
            headers.iter().filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            }),
        );
        self
    }

    /// With its body (an empty one counts as none).
    pub fn body(mut self, body: &'a [u8]) -> Self {
        self.body = Some(body);
        self
    }

    /// The body of `POST /api/v1/kya/verify`. Only the signature's own fields and the header
    /// fields it covers are sent: the request's other headers (its cookies, its
    /// `Authorization`) stay with the provider.
    pub(crate) fn to_json(&self, authority: &str) -> Value {
        let field = |name: &str| -> Vec<&str> {
            self.headers
                .iter()
                .filter(|(have, _)| have.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.as_str())
                .collect()
        };
        let mut names =
            vec!["signature-input".to_owned(), "signature".to_owned(), "content-digest".to_owned()];
        for input in field("signature-input") {
            for name in covered_fields(input) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        let mut headers = Map::new();
        for name in names {
            match field(&name).as_slice() {
                [] => {}
                [one] => {
                    headers.insert(name, Value::from(*one));
                }
                several => {
                    headers.insert(name, Value::from(several.to_vec()));
                }
            }
        }
        let mut body =
            json!({ "method": self.method, "url": self.url, "headers": headers, "authority": authority });
        if let Some(bytes) = self.body.filter(|bytes| !bytes.is_empty()) {
            body["body"] = base64::engine::general_purpose::STANDARD.encode(bytes).into();
        }
        if let Some(label) = &self.label {
            body["label"] = label.clone().into();
        }
        body
    }
}

/// The header fields (lowercase names, not derived components) that the signatures of a
/// `Signature-Input` cover. Unparseable input covers nothing here; the API says what is wrong.
fn covered_fields(signature_input: &str) -> Vec<String> {
    let Ok(dictionary) = sfv::Parser::new(signature_input).parse::<sfv::Dictionary>() else {
        return Vec::new();
    };
    dictionary
        .values()
        .filter_map(|entry| match entry {
            sfv::ListEntry::InnerList(list) => Some(list.items.iter()),
            sfv::ListEntry::Item(_) => None,
        })
        .flatten()
        .filter_map(|item| match &item.bare_item {
            sfv::BareItem::String(name) if !name.as_str().starts_with('@') => {
                Some(name.as_str().to_ascii_lowercase())
            }
            _ => None,
        })
        .collect()
}

/// The API's verdict on a signed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The signature holds, its nonce was fresh: who signed, and their KYA standing.
    Verified(Box<SignedBy>),
    /// The signature does not hold: one of the API's eleven reasons, and a message.
    Refused(Refusal),
}

/// A verified signature and its signer's standing (a `"verified": true` answer): the signature's
/// facts as core writes them for the API, and the signer's KYA standing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedBy {
    /// What the signature says: signer, keyid, chain, window, nonce (now used), components.
    #[serde(flatten)]
    pub signature: SignatureFacts,
    /// The signer's KYA standing, as `GET /api/v1/kya/:wallet` gives it, at one block.
    pub kya: KyaResult,
    /// The signer's KYA pass at that block, when the API issues passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<String>,
}

impl Verdict {
    /// Serve the request? Only a verified signature whose signer is a compliant agent.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Self::Verified(signed) if signed.kya.is_compliant)
    }

    /// What to do with the signer, as `kya check` decides; `None` when the signature was refused
    /// (deny the request: nobody is known to have signed it).
    pub fn decision(&self) -> Option<KyaDecision> {
        match self {
            Self::Verified(signed) => Some(signed.kya.decision()),
            Self::Refused(_) => None,
        }
    }

    /// The status a provider answers with: 200 when allowed, 401 when the signature is refused
    /// (the request proves nothing), 403 when it holds but its signer is not a compliant agent.
    pub fn status_code(&self) -> u16 {
        match self {
            _ if self.is_allowed() => 200,
            Self::Refused(_) => 401,
            Self::Verified(_) => 403,
        }
    }

    /// The verified signature, if it is one.
    pub fn signed_by(&self) -> Option<&SignedBy> {
        match self {
            Self::Verified(signed) => Some(signed),
            Self::Refused(_) => None,
        }
    }

    /// The refusal, if it is one.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::Verified(_) => None,
            Self::Refused(refusal) => Some(refusal),
        }
    }

    /// Reads the API's answer.
    pub(crate) fn from_answer(answer: Value) -> Result<Self> {
        let unexpected = |reason: String| Error::Unexpected { service: "API", reason };
        match answer.get("verified").and_then(Value::as_bool) {
            Some(true) => serde_json::from_value(answer)
                .map(|signed| Self::Verified(Box::new(signed)))
                .map_err(|error| unexpected(format!("a verified answer that does not read: {error}"))),
            Some(false) => {
                let mut refusal = answer;
                if let Some(fields) = refusal.as_object_mut() {
                    fields.remove("verified");
                }
                serde_json::from_value(refusal)
                    .map(Self::Refused)
                    .map_err(|error| unexpected(format!("a refusal that does not read: {error}")))
            }
            None => Err(unexpected(format!("no \"verified\" in {answer}"))),
        }
    }
}

/// As the API's answer: `{"verified": true, "signer", …, "kya"}` or `{"verified": false,
/// "reason", "message"}`.
impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = match self {
            Self::Verified(signed) => serde_json::to_value(signed).map_err(serde::ser::Error::custom)?,
            Self::Refused(refusal) => serde_json::to_value(refusal).map_err(serde::ser::Error::custom)?,
        };
        let Value::Object(fields) = value else { return Err(serde::ser::Error::custom("not an object")) };
        let mut map = serializer.serialize_map(Some(fields.len() + 1))?;
        map.serialize_entry("verified", &matches!(self, Self::Verified(_)))?;
        for (name, value) in &fields {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// A provider's verifier: the API to ask, and the origin the provider serves, whose authority
/// every signature must name (a signature made for another host is refused as
/// `wrong_authority`, so a request signed for someone else cannot be replayed here).
///
/// ```no_run
/// # async fn run(path_and_query: &str, headers: &reqwest::header::HeaderMap, body: &[u8]) -> kya_client::Result<()> {
/// use kya_client::{ReceivedRequest, Verifier};
///
/// let verifier = Verifier::new("https://kya.example")?.serving("https://api.provider.example")?;
/// let url = verifier.url_for(path_and_query);
/// let received = ReceivedRequest::new("POST", &url).headers(headers).body(body);
/// let verdict = verifier.verify(&received).await?;
/// if !verdict.is_allowed() {
///     // answer verdict.status_code() (401 or 403), saying why
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Verifier {
    api: ApiClient,
    origin: Option<Origin>,
}

/// The origin a provider serves.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    /// `https://host[:port]`, without a trailing slash.
    pub(crate) base: String,
    /// `host[:port]`, as `@authority` writes it.
    pub(crate) authority: String,
}

impl Origin {
    /// `http(s)://host[:port]` and nothing more.
    pub(crate) fn parse(origin: &str) -> Result<Self> {
        let url = reqwest::Url::parse(origin.trim())
            .map_err(|error| Error::Invalid(format!("origin {origin:?} is not a URL: {error}")))?;
        let host = url.host_str().filter(|_| matches!(url.scheme(), "http" | "https"));
        let Some(host) = host.filter(|_| url.path() == "/" && url.query().is_none()) else {
            return Err(Error::Invalid(format!(
                "origin {origin:?} must be http(s)://host[:port] and nothing more"
            )));
        };
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        Ok(Self { base: format!("{}://{authority}", url.scheme()), authority })
    }

    /// The absolute URL of `path_and_query` on this origin (anything else as it is).
    pub(crate) fn url_for(&self, path_and_query: &str) -> String {
        if path_and_query.starts_with('/') {
            format!("{}{path_and_query}", self.base)
        } else {
            path_and_query.to_owned()
        }
    }
}

impl Verifier {
    /// A verifier asking the API at `api_base_url`.
    pub fn new(api_base_url: &str) -> Result<Self> {
        Ok(Self::with_api(ApiClient::new(api_base_url)?))
    }

    /// A verifier asking through an existing API client.
    pub fn with_api(api: ApiClient) -> Self {
        Self { api, origin: None }
    }

    /// The origin the provider serves (`https://api.provider.example`, with a port when not the
    /// scheme's default): signatures must name its authority, and [`Verifier::url_for`] builds
    /// URLs on it.
    pub fn serving(mut self, origin: &str) -> Result<Self> {
        self.origin = Some(Origin::parse(origin)?);
        Ok(self)
    }

    /// The absolute URL of `path_and_query` (`/v1/infer?model=small`) on the origin served; as
    /// given when no origin was set or when it is absolute already.
    pub fn url_for(&self, path_and_query: &str) -> String {
        match &self.origin {
            Some(origin) => origin.url_for(path_and_query),
            None => path_and_query.to_owned(),
        }
    }

    /// Asks the API about `request`: verified (with the signer's standing) or refused. An error
    /// when no origin was set ([`Verifier::serving`]: the API needs the authority the provider
    /// serves) or the API could not answer (unreachable, rate-limited, a body it would not take).
    pub async fn verify(&self, request: &ReceivedRequest<'_>) -> Result<Verdict> {
        let Some(origin) = &self.origin else {
            return Err(Error::Invalid(
                "a verifier needs the origin it serves (Verifier::serving): signatures must name its authority"
                    .into(),
            ));
        };
        self.api.verify(request, &origin.authority).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kya_core::erc8128::Reason;

    const INPUT: &str = r#"eth=("@method" "@authority" "@path" "content-digest" "Content-Type");created=1;expires=2;keyid="k""#;

    #[test]
    fn forwards_only_the_signature_and_what_it_covers() {
        let request = ReceivedRequest::new("POST", "https://a.example/p")
            .header("Signature-Input", INPUT)
            .header("Signature", "eth=:AAAA:")
            .header("Content-Digest", "sha-256=:x:")
            .header("content-type", "application/json")
            .header("Authorization", "Bearer secret")
            .header("Cookie", "session=secret")
            .body(b"{}");
        let json = request.to_json("a.example");
        assert_eq!(
            json,
            json!({
                "method": "POST",
                "url": "https://a.example/p",
                "headers": {
                    "signature-input": INPUT,
                    "signature": "eth=:AAAA:",
                    "content-digest": "sha-256=:x:",
                    "content-type": "application/json",
                },
                "body": "e30=",
                "authority": "a.example",
            })
        );
        // A field received twice goes as a list; no body, no `body`.
        let twice = ReceivedRequest::new("GET", "https://a.example/")
            .header("signature", "a=:AA:")
            .header("Signature", "b=:AA:")
            .to_json("a.example");
        assert_eq!(twice["headers"], json!({ "signature": ["a=:AA:", "b=:AA:"] }));
        assert!(twice.get("body").is_none());
        assert!(covered_fields("not a dictionary (").is_empty());
    }

    #[test]
    fn reads_both_answers_and_decides() {
        let kya = json!({
            "wallet": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "isRegistered": true,
            "isCompliant": false,
            "agent": null,
            "checkedAt": "2026-01-01T00:00:00.000Z",
        });
        let answer = json!({
            "verified": true,
            "signer": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "keyid": "erc8128:84532:0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            "chainId": 84532,
            "created": 1,
            "expires": 61,
            "nonce": "n",
            "components": ["@method", "@authority", "@path"],
            "kya": kya,
        });
        let verdict = Verdict::from_answer(answer.clone()).unwrap();
        assert_eq!(serde_json::to_value(&verdict).unwrap(), answer, "serialises as the API's answer");
        assert!(!verdict.is_allowed());
        assert_eq!((verdict.status_code(), verdict.decision()), (403, Some(KyaDecision::RenewAttestation)));

        let mut compliant = answer.clone();
        compliant["kya"]["isCompliant"] = true.into();
        let verdict = Verdict::from_answer(compliant).unwrap();
        assert!(verdict.is_allowed());
        assert_eq!(verdict.status_code(), 200);

        let refused = json!({ "verified": false, "reason": "replayed", "message": "used" });
        let verdict = Verdict::from_answer(refused.clone()).unwrap();
        assert_eq!(verdict.refusal(), Some(&Refusal::new(Reason::Replayed, "used")));
        assert_eq!((verdict.status_code(), verdict.decision()), (401, None));
        assert_eq!(serde_json::to_value(&verdict).unwrap(), refused);
        for odd in [json!({ "verified": false, "reason": "tired" }), json!({ "ok": true })] {
            assert!(matches!(Verdict::from_answer(odd), Err(Error::Unexpected { .. })));
        }
    }

    #[test]
    fn origins_give_the_authority_and_the_urls() {
        let verifier = Verifier::new("http://127.0.0.1:3000").unwrap();
        assert_eq!(verifier.url_for("/p"), "/p");
        let verifier = verifier.serving("https://API.provider.example:443/").unwrap();
        assert_eq!(verifier.url_for("/v1/infer?x=1"), "https://api.provider.example/v1/infer?x=1");
        assert_eq!(verifier.origin.as_ref().unwrap().authority, "api.provider.example");
        let local = Verifier::new("http://127.0.0.1:3000").unwrap().serving("http://127.0.0.1:8080").unwrap();
        assert_eq!(local.url_for("/x"), "http://127.0.0.1:8080/x");
        for bad in
            ["api.provider.example", "https://a.example/path", "ftp://a.example", "https://a.example/?q"]
        {
            assert!(Verifier::new("http://127.0.0.1:3000").unwrap().serving(bad).is_err(), "{bad}");
        }
    }
}
