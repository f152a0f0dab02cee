//! The request's target URI, split into what RFC 9421's derived components read from it.
//!
//! The URL is parsed by the WHATWG rules (the `url` crate), the rules browsers' `fetch` and
//! reqwest apply before they send a request: a path with a space in it goes out as `%20`, a
//! Unicode host as punycode, `/a/../b` as `/b`. A signer and a verifier that both take the URL
//! through these rules derive the same bytes from it as the wire carried, which a hand-written
//! split of the raw string would not.

use url::Url;

/// The parts of an absolute `http` or `https` URL that RFC 9421 derives components from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// Lowercase scheme: `http` or `https`.
    pub scheme: String,
    /// `@authority`: the lowercase host, with the port only when it is not the scheme's default
    /// (RFC 9421 2.2.3, by HTTP's normalisation, RFC 9110 4.2.3). No userinfo.
    pub authority: String,
    /// `@path`: the absolute path, percent-encoded octets left as they are (RFC 9421 2.2.6).
    pub path: String,
    /// The query without its `?`; `None` when the URL has no `?` at all.
    pub query: Option<String>,
}

impl Target {
    /// Parses an absolute `http` or `https` URL; the error says what is wrong with it.
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let parsed = Url::parse(url).map_err(|e| format!("URL {url:?} does not parse: {e}"))?;
        let scheme = parsed.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(format!("URL {url:?} is not an absolute http(s) URL"));
        }
        let host = parsed
            .host_str()
            .filter(|host| !host.is_empty())
            .ok_or_else(|| format!("URL {url:?} has no host"))?;
        // `port()` is None for the scheme's default port, whether written or not.
        let authority = match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        Ok(Self {
            scheme: scheme.to_owned(),
            authority,
            path: parsed.path().to_owned(),
            query: parsed.query().map(str::to_owned),
        })
    }

    /// Whether the request has a query that Request-Bound must cover. An empty query (`/p?`)
    /// carries nothing to bind, and its `@query` is the same `?` as no query's.
    pub(crate) fn has_query(&self) -> bool {
        self.query.as_deref().is_some_and(|query| !query.is_empty())
    }

    /// `@query`: `?` and the query as sent; `?` alone when there is none (RFC 9421 2.2.7).
    pub(crate) fn query_value(&self) -> String {
        format!("?{}", self.query.as_deref().unwrap_or(""))
    }

    /// `@request-target`: the path and query as on an HTTP/1.1 request line (RFC 9421 2.2.5).
    pub(crate) fn request_target(&self) -> String {
        match &self.query {
            Some(query) => format!("{}?{query}", self.path),
            None => self.path.clone(),
        }
    }

    /// `@target-uri`: the whole target URI, normalised, without userinfo or fragment (2.2.2).
    pub(crate) fn target_uri(&self) -> String {
        format!("{}://{}{}", self.scheme, self.authority, self.request_target())
    }
}

/// An authority such as `API.example.com:443`, as `@authority` writes it for `scheme`:
/// `api.example.com`. The error says why it is not a `host[:port]`.
pub(crate) fn normalize_authority(scheme: &str, authority: &str) -> Result<String, String> {
    let target = Target::parse(&format!("{scheme}://{authority}/"))
        .map_err(|_| format!("authority {authority:?} is not a host[:port]"))?;
    // Anything past the host and port (a path, a query, userinfo) moves the parse off `/`.
    let plain = !authority.contains(['/', '?', '#', '@', '\\']);
    if !plain || target.path != "/" || target.query.is_some() {
        return Err(format!("authority {authority:?} is not a host[:port]"));
    }
    Ok(target.authority)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    #[test]
    fn authority_is_lowercase_and_drops_default_ports() {
        assert_eq!(target("https://API.Example.COM/x").authority, "api.example.com");
        assert_eq!(target("https://api.example.com:443/x").authority, "api.example.com");
        assert_eq!(target("http://api.example.com:80/x").authority, "api.example.com");
        assert_eq!(target("https://api.example.com:80/x").authority, "api.example.com:80");
        assert_eq!(target("http://127.0.0.1:3000/x").authority, "127.0.0.1:3000");
        assert_eq!(target("http://[::1]:8080/").authority, "[::1]:8080");
        assert_eq!(target("https://user:pw@example.com/").authority, "example.com");
        assert_eq!(target("https://bücher.example/").authority, "xn--bcher-kva.example");
    }

    #[test]
    fn query_follows_rfc_9421() {
        // RFC 9421 2.2.7's own examples, and its rule for an absent query.
        let t = target("https://www.example.com/path?param=value&foo=bar&baz=bat%2Dman");
        assert_eq!(t.query_value(), "?param=value&foo=bar&baz=bat%2Dman");
        assert_eq!(target("https://www.example.com/path?queryString").query_value(), "?queryString");
        let none = target("https://www.example.com/path");
        assert_eq!(none.query_value(), "?");
        assert!(!none.has_query());
        let empty = target("https://www.example.com/path?");
        assert_eq!(empty.query_value(), "?");
        assert!(!empty.has_query());
        assert!(target("https://www.example.com/path?a").has_query());
        // The fragment is never sent, so never signed.
        assert_eq!(target("https://example.com/p?a=1#frag").query_value(), "?a=1");
    }

    #[test]
    fn path_follows_rfc_9421() {
        assert_eq!(target("https://example.com").path, "/");
        assert_eq!(target("https://example.com?a=1").path, "/");
        assert_eq!(target("https://example.com/a/b%2Fc").path, "/a/b%2Fc");
        // What fetch and reqwest send: spaces encoded, dot segments resolved.
        assert_eq!(target("https://example.com/a b/../c").path, "/c");
        assert_eq!(target("https://example.com/a b").path, "/a%20b");
    }

    #[test]
    fn target_uri_and_request_target() {
        let t = target("HTTPS://www.Example.com:443/path?param=value#f");
        assert_eq!(t.target_uri(), "https://www.example.com/path?param=value");
        assert_eq!(t.request_target(), "/path?param=value");
        assert_eq!(target("http://a.example:8080/").target_uri(), "http://a.example:8080/");
    }

    #[test]
    fn refuses_what_is_not_an_absolute_http_url() {
        for url in ["/relative", "ftp://example.com/", "mailto:a@b.c", "https://", "not a url"] {
            assert!(Target::parse(url).is_err(), "{url}");
        }
    }

    #[test]
    fn normalizes_expected_authorities() {
        assert_eq!(normalize_authority("https", "API.example.com").unwrap(), "api.example.com");
        assert_eq!(normalize_authority("https", "api.example.com:443").unwrap(), "api.example.com");
        assert_eq!(normalize_authority("http", "localhost:3000").unwrap(), "localhost:3000");
        for bad in ["a.example/x", "a.example?x", "u@a.example", "", "a.example:port"] {
            assert!(normalize_authority("https", bad).is_err(), "{bad}");
        }
    }
}
