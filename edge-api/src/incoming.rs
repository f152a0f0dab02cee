//! The request as the runtime hands it to the fetch handler, read only as far as its answer
//! needs. workers-rs's `Request` reads the request's `cf` object on every conversion (the
//! runtime builds it from JSON on first access), and its `url()` parses the URL the runtime
//! already serialized; a `/kya` answer uses neither, and the two were a tenth of its CPU in the
//! point answers' profiles (docs/bench/point-answers-*.md). The method, the URL and the headers
//! every answer may look at come across in one call into JavaScript ([`REQUEST_HEADERS`]), where
//! each would be a call of its own. The answers that read a body get workers-rs's `Request`
//! ([`Incoming::to_request`]).

use std::cell::OnceCell;

use wasm_bindgen::{JsValue, prelude::wasm_bindgen};
use worker::{
    Cf, Headers, Request,
    worker_sys::{IncomingRequestCfProperties, ext::RequestExt, web_sys},
};

#[wasm_bindgen(inline_js = "export function request_parts(request, names) {
  const headers = request.headers;
  let parts = request.method + '\\n' + request.url;
  for (const name of names.split('\\n')) {
    const value = headers.get(name);
    parts += value === null ? '\\n-' : '\\n+' + value;
  }
  return parts;
}")]
extern "C" {
    /// The method, the URL, then each header of `names` (one per line): `-` when absent, else
    /// `+` and its value, one per line. None of them can hold a line break: a method is a token,
    /// a serialized URL percent-encodes them, and a header value may not hold one.
    #[wasm_bindgen(js_name = request_parts)]
    fn request_parts_in_javascript(request: &web_sys::Request, names: &JsValue) -> String;
}

/// The headers read with the method and the URL, for the rate limit (the client), a D1 session
/// and a conditional request.
pub(crate) const REQUEST_HEADERS: [&str; 4] =
    ["cf-connecting-ip", "x-forwarded-for", crate::index::point::BOOKMARK, "if-none-match"];

thread_local! {
    /// [`REQUEST_HEADERS`] as one JavaScript string, made once per isolate.
    static HEADER_NAMES: OnceCell<JsValue> = const { OnceCell::new() };
}

pub(crate) struct Incoming {
    raw: web_sys::Request,
    /// The method by name: workers-rs reads a method it has no variant for (QUERY, PROPFIND,
    /// ...) as GET.
    pub(crate) method: String,
    /// The URL as the runtime serialized it (WHATWG).
    url: String,
    /// The values of [`REQUEST_HEADERS`], in order.
    read: [Option<String>; REQUEST_HEADERS.len()],
}

impl Incoming {
    pub(crate) fn new(raw: web_sys::Request) -> Self {
        let names = HEADER_NAMES
            .with(|names| names.get_or_init(|| JsValue::from_str(&REQUEST_HEADERS.join("\n"))).clone());
        let parts = request_parts_in_javascript(&raw, &names);
        let mut lines = parts.split('\n');
        let (method, url) =
            (lines.next().unwrap_or_default().to_owned(), lines.next().unwrap_or_default().to_owned());
        let read =
            std::array::from_fn(|_| lines.next().and_then(|line| line.strip_prefix('+')).map(str::to_owned));
        Self { method, url, read, raw }
    }

    /// The parts of the URL the answers use.
    pub(crate) fn target(&self) -> Target<'_> {
        Target::of(&self.url)
    }

    /// The value of header `name`, if the request has it.
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        match REQUEST_HEADERS.iter().position(|read| *read == name) {
            Some(at) => self.read[at].clone(),
            None => self.headers().get(name).ok().flatten(),
        }
    }

    /// The client's `X-D1-Bookmark` for a point answer's D1 session (`None` when absent or
    /// blank); a 400 for text that cannot be a bookmark ([`crate::d1::checked_bookmark`]), on
    /// every operation that takes one, whether or not its answer comes to read D1.
    pub(crate) fn bookmark(&self) -> crate::Result<Option<String>> {
        let header = self.header(crate::index::point::BOOKMARK);
        Ok(crate::d1::checked_bookmark(header.as_deref())?.map(str::to_owned))
    }

    /// Every header, for an answer that reads others than [`REQUEST_HEADERS`].
    pub(crate) fn headers(&self) -> Headers {
        Headers(self.raw.headers())
    }

    /// The Cloudflare data centre that received the request (`None` where the runtime names none).
    pub(crate) fn colo(&self) -> Option<String> {
        self.raw.cf().map(|cf: IncomingRequestCfProperties| Cf::from(cf).colo())
    }

    /// workers-rs's view of the request, for an answer that reads its body: the runtime's
    /// request itself, shared (`Clone` copies the reference; the inherent `clone` is
    /// JavaScript's `Request.clone()`, which would tee the body).
    pub(crate) fn to_request(&self) -> Request {
        Request::from(<web_sys::Request as Clone>::clone(&self.raw))
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
