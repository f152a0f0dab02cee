//! JSON over HTTP for both services: one place that turns statuses and bodies into [`Error`]s
//! carrying the service's own `{"error": …}` message.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Error, Result};

/// A service's base URL and the HTTP client that talks to it.
#[derive(Debug, Clone)]
pub(crate) struct Service {
    /// `API` or `relayer`, for messages.
    pub(crate) name: &'static str,
    base: String,
    http: reqwest::Client,
}

/// A successful answer: its status (200, or 202 for a relay not yet sent) and its parsed body.
pub(crate) struct Answer<T> {
    pub(crate) status: u16,
    pub(crate) body: T,
}

/// How long [`default_http`] waits for a connection to open.
pub(crate) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long [`default_http`] waits for any one read of an answer: a service that stops
/// answering becomes an error, not a wait for ever. Per read, not per request, so the change
/// stream (a heartbeat every 15 s by default) stays open as long as it is alive.
pub(crate) const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A client builder with bounded connects ([`CONNECT_TIMEOUT`]) and reads (`read_timeout` each):
/// the library's default client and the CLI's start from it.
pub(crate) fn bounded(read_timeout: std::time::Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).read_timeout(read_timeout)
}

/// The HTTP client [`crate::ApiClient::new`] and [`crate::RelayerClient::new`] use: bounded
/// connects and reads ([`CONNECT_TIMEOUT`], [`READ_TIMEOUT`]). Needs rustls' process provider
/// ([`crate::install_crypto_provider`]); without one it panics, as `reqwest::Client::new` does.
pub(crate) fn default_http() -> reqwest::Client {
    bounded(READ_TIMEOUT).build().expect("an HTTP client (rustls' process provider installed)")
}

impl Service {
    pub(crate) fn new(name: &'static str, base: &str, http: reqwest::Client) -> Result<Self> {
        let base = base.trim().trim_end_matches('/');
        let parsed = reqwest::Url::parse(base)
            .map_err(|error| Error::Invalid(format!("{name} URL {base:?} is not a URL: {error}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Error::Invalid(format!("{name} URL {base:?} must start with http:// or https://")));
        }
        Ok(Self { name, base: base.to_owned(), http })
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// GET `path` (with its query) and parse a 2xx body as `T`.
    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        Ok(self.send(self.http.get(self.url(path))).await?.body)
    }

    /// GET `path`; `None` on a 404 (an unknown relay, or a relayer without that endpoint).
    pub(crate) async fn get_optional<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>> {
        match self.send(self.http.get(self.url(path))).await {
            Ok(answer) => Ok(Some(answer.body)),
            Err(Error::Api { status: 404, .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// GET `path` and return a 2xx answer's headers and body as text (a body that is not JSON:
    /// a KYA pass), or the JSON one with its headers (the JWKS's `Cache-Control`).
    pub(crate) async fn get_text(&self, path: &str) -> Result<(reqwest::header::HeaderMap, String)> {
        let response = self.open(path, &[]).await?;
        let headers = response.headers().clone();
        let text = response.text().await.map_err(|error| Error::Unreachable {
            service: self.name,
            url: kya_core::chain::redact::url(&self.base),
            reason: reason_of(&error),
        })?;
        Ok((headers, text))
    }

    /// POST `body` as JSON to `path`.
    pub(crate) async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<Answer<T>> {
        self.send(self.http.post(self.url(path)).json(body)).await
    }

    /// GET `path` with `headers`, the 2xx response left unread (a stream); an error status is
    /// [`Error::Api`] with the service's message, as for [`Service::get`].
    pub(crate) async fn open(&self, path: &str, headers: &[(&str, String)]) -> Result<reqwest::Response> {
        let mut request = self.http.get(self.url(path));
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = send_once_more_if_closed(request).await.map_err(|error| Error::Unreachable {
            service: self.name,
            url: kya_core::chain::redact::url(&self.base),
            reason: reason_of(&error),
        })?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let text = response.text().await.unwrap_or_default();
            let (message, code) = message_of(&text);
            return Err(Error::Api { service: self.name, status, message, code });
        }
        Ok(response)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send<T: DeserializeOwned>(&self, request: reqwest::RequestBuilder) -> Result<Answer<T>> {
        let unreachable = |reason: String| Error::Unreachable {
            service: self.name,
            url: kya_core::chain::redact::url(&self.base),
            reason,
        };
        let response =
            send_once_more_if_closed(request).await.map_err(|error| unreachable(reason_of(&error)))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|error| unreachable(reason_of(&error)))?;
        if !(200..300).contains(&status) {
            let (message, code) = message_of(&text);
            return Err(Error::Api { service: self.name, status, message, code });
        }
        let body = serde_json::from_str(&text).map_err(|error| Error::Unexpected {
            service: self.name,
            reason: format!("{error} in {}", excerpt(&text)),
        })?;
        Ok(Answer { status, body })
    }
}

/// Sends `request`; a GET whose connection the server closed before any answer came is sent once
/// more, on a new connection.
///
/// A kept-alive connection can be closed by the server (Node's HTTP servers, `wrangler dev`'s
/// among them, close one idle for 5 s) just as the pool hands it to a request: the request is
/// written into a closing socket and gets no answer (hyper's "connection closed before message
/// completed"). No answer means the server may or may not have read it, so only a GET, which the
/// API and the relayer never let change anything, is sent again; a POST's error stands, and its
/// caller decides whether to send it again.
async fn send_once_more_if_closed(request: reqwest::RequestBuilder) -> reqwest::Result<reqwest::Response> {
    let (client, request) = request.build_split();
    let request = request?;
    let again = (request.method() == reqwest::Method::GET).then(|| request.try_clone()).flatten();
    match client.execute(request).await {
        Err(error) if closed_before_an_answer(&error) => match again {
            Some(again) => client.execute(again).await,
            None => Err(error),
        },
        answered => answered,
    }
}

/// Whether `error` is a connection closed by the server before any answer to the request.
fn closed_before_an_answer(error: &reqwest::Error) -> bool {
    kya_native_http::causes(error)
        .filter_map(|cause| cause.downcast_ref::<hyper::Error>())
        .any(hyper::Error::is_incomplete_message)
}

/// The `error` field of an error body, else the body itself (shortened); and its `code`, if any.
fn message_of(text: &str) -> (String, Option<String>) {
    let body = serde_json::from_str::<Value>(text).ok();
    let field = |name: &str| body.as_ref().and_then(|body| body.get(name)?.as_str().map(str::to_owned));
    (field("error").unwrap_or_else(|| excerpt(text)), field("code").filter(|code| !code.is_empty()))
}

fn excerpt(text: &str) -> String {
    const MAX: usize = 200;
    let text = text.trim();
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None if text.is_empty() => "an empty body".to_owned(),
        None => text.to_owned(),
    }
}

/// reqwest's error chain, with any URL in it redacted (a hosted URL may carry a key).
pub(crate) fn reason_of(error: &reqwest::Error) -> String {
    kya_native_http::error_chain(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_give_their_message() {
        assert_eq!(message_of(r#"{"error":"Agent not found: 9"}"#), ("Agent not found: 9".to_owned(), None));
        assert_eq!(
            message_of(r#"{"error":"Relay not found","code":"relay_not_found"}"#),
            ("Relay not found".to_owned(), Some("relay_not_found".to_owned()))
        );
        assert_eq!(message_of("plain text"), ("plain text".to_owned(), None));
        assert_eq!(message_of(""), ("an empty body".to_owned(), None));
        assert_eq!(message_of(&"x".repeat(300)).0.chars().count(), 201);
    }

    #[test]
    fn base_urls_are_checked() {
        crate::install_crypto_provider();
        let http = reqwest::Client::new();
        assert_eq!(
            Service::new("API", "http://127.0.0.1:3000/", http.clone()).unwrap().base(),
            "http://127.0.0.1:3000"
        );
        assert!(matches!(Service::new("API", "127.0.0.1:3000", http.clone()), Err(Error::Invalid(_))));
        assert!(matches!(Service::new("API", "ftp://x", http), Err(Error::Invalid(_))));
    }

    /// A server on loopback that reads each request's head and, on its first connection, closes
    /// without answering (a kept-alive connection closed under a request), then answers
    /// `{"ok":true}`; it counts the requests it read.
    async fn closing_the_first_connection() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        };
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut head = Vec::new();
                let mut buffer = [0u8; 1024];
                while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(read) => head.extend_from_slice(&buffer[..read]),
                    }
                }
                if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                    continue; // dropped: closed with no answer
                }
                let body = r#"{"ok":true}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        (url, requests)
    }

    #[tokio::test]
    async fn a_get_whose_connection_closed_before_an_answer_is_sent_once_more() {
        crate::install_crypto_provider();
        let (url, requests) = closing_the_first_connection().await;
        let service = Service::new("API", &url, reqwest::Client::new()).unwrap();
        let answer: Value = service.get("/api/v1/changes").await.unwrap();
        assert_eq!(answer, serde_json::json!({ "ok": true }));
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 2, "sent twice");
    }

    #[tokio::test]
    async fn a_post_whose_connection_closed_before_an_answer_is_not_sent_again() {
        crate::install_crypto_provider();
        let (url, requests) = closing_the_first_connection().await;
        let service = Service::new("relayer", &url, reqwest::Client::new()).unwrap();
        let failed = service.post::<Value>("/relay", &serde_json::json!({})).await;
        let Err(Error::Unreachable { service: "relayer", reason, .. }) = failed else {
            panic!("not unreachable: {:?}", failed.map(|answer| answer.body));
        };
        assert!(reason.contains("connection closed before message completed"), "{reason}");
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1, "sent once");
    }
}
