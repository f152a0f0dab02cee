//! The request as the runtime hands it to the fetch handler, read only as far as its answer
//! needs. workers-rs's `Request` reads the request's `cf` object on every conversion (the
//! runtime builds it from JSON on first access), and its `url()` parses the URL the runtime
//! already serialized; a `/kya` answer uses neither, and the two were a tenth of its CPU in the
//! point answers' profiles (docs/bench/point-answers-*.md). The answers that read a body get
//! workers-rs's `Request` ([`Incoming::into_request`]).

use worker::{
    Cf, Headers, Request,
    worker_sys::{IncomingRequestCfProperties, ext::RequestExt, web_sys},
};

pub(crate) struct Incoming {
    raw: web_sys::Request,
    /// The method by name: workers-rs reads a method it has no variant for (QUERY, PROPFIND,
    /// ...) as GET.
    pub(crate) method: String,
    /// The URL as the runtime serialized it (WHATWG).
    url: String,
    pub(crate) headers: Headers,
}

impl Incoming {
    pub(crate) fn new(raw: web_sys::Request) -> Self {
        Self { method: raw.method(), url: raw.url(), headers: Headers(raw.headers()), raw }
    }

    /// The parts of the URL the answers use.
    pub(crate) fn target(&self) -> Target<'_> {
        Target::of(&self.url)
    }

    /// The value of header `name`, if the request has it.
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).ok().flatten()
    }

    /// The Cloudflare data centre that received the request (`None` where the runtime names none).
    pub(crate) fn colo(&self) -> Option<String> {
        self.raw.cf().map(|cf: IncomingRequestCfProperties| Cf::from(cf).colo())
    }

    /// workers-rs's view of the request, for an answer that reads its body.
    pub(crate) fn into_request(self) -> Request {
        Request::from(self.raw)
    }
}

/// A URL as the runtime serializes a request's (absolute, the host in ASCII, a default port left
/// out, `?` and `#` percent-encoded within the path), split at its delimiters instead of parsed
/// again: the same origin, path and query pairs as the `url` crate gives.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Target<'a> {
    /// `scheme://host[:port]`, as `Url::origin().ascii_serialization()`.
    pub(crate) origin: String,
    /// As `Url::path()`: `/` at least.
    pub(crate) path: &'a str,
    /// Between `?` and `#` (empty without a query).
    query: &'a str,
}

impl<'a> Target<'a> {
    pub(crate) fn of(url: &'a str) -> Self {
        let (origin, rest) = match url.find("://") {
            Some(at) => {
                let after = &url[at + 3..];
                let end = after.find(['/', '?', '#']).unwrap_or(after.len());
                // Credentials are no part of an origin (none reach a Worker; kept out all the same).
                let host = after[..end].rsplit_once('@').map_or(&after[..end], |(_, host)| host);
                (format!("{}{host}", &url[..at + 3]), &after[end..])
            }
            None => (String::new(), url),
        };
        let before_fragment = rest.split_once('#').map_or(rest, |(before, _)| before);
        let (path, query) = before_fragment.split_once('?').unwrap_or((before_fragment, ""));
        Target { origin, path: if path.is_empty() { "/" } else { path }, query }
    }

    /// The query's pairs, decoded (`+` as a space, percent escapes), in order.
    pub(crate) fn query_pairs(&self) -> Vec<(String, String)> {
        form_urlencoded::parse(self.query.as_bytes()).into_owned().collect()
    }
}

#[cfg(test)]
mod tests {
    use worker::Url;

    use super::Target;

    #[test]
    fn splits_as_the_url_crate_parses() {
        for url in [
            "http://127.0.0.1:8787/api/v1/kya/0xAbC",
            "https://kya.example/api/v1/agents?page=2&limit=50",
            "https://kya.example/api/v1/agents?status=active&q=a+b%20c&q=%F0%9F%98%80#part",
            "https://kya.example/",
            "https://kya.example/?",
            "https://kya.example/path%3Fnot-a-query?x=1",
            "http://[::1]:8787/health",
            "https://user:secret@kya.example:8443/api/v1/stats?x",
            "https://xn--kya-qoa.example/api?a=%26&b==",
        ] {
            let parsed = Url::parse(url).unwrap();
            let split = Target::of(url);
            assert_eq!(split.origin, parsed.origin().ascii_serialization(), "{url}");
            assert_eq!(split.path, parsed.path(), "{url}");
            let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
            assert_eq!(split.query_pairs(), pairs, "{url}");
        }
    }

    #[test]
    fn a_url_without_a_path_has_the_root() {
        assert_eq!(
            Target::of("https://kya.example?x=1"),
            Target { origin: "https://kya.example".into(), path: "/", query: "x=1" }
        );
    }
}
