//! Redaction of RPC URLs for logs: hosted nodes put API keys in the path, the query or the
//! user info (`https://base-sepolia.g.alchemy.com/v2/<key>`), and the HTTP client's errors quote
//! the whole URL. Only the scheme, host and port are kept.

/// `url` with its user info, path and query replaced by `…` (scheme, host and port kept).
pub(crate) fn url(url: &str) -> String {
    let Ok(parsed) = url.trim().parse::<alloy::transports::http::reqwest::Url>() else {
        return "<unparseable URL>".into();
    };
    let mut kept = format!("{}://{}", parsed.scheme(), parsed.host_str().unwrap_or(""));
    if let Some(port) = parsed.port() {
        kept.push_str(&format!(":{port}"));
    }
    let hidden = !parsed.username().is_empty()
        || parsed.password().is_some()
        || parsed.path() != "/"
        || parsed.query().is_some()
        || parsed.fragment().is_some();
    if hidden {
        kept.push_str("/…");
    }
    kept
}

/// `text` with every URL in it redacted by [`url`].
pub(crate) fn urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) =
        ["http://", "https://", "ws://", "wss://"].iter().filter_map(|scheme| rest.find(scheme)).min()
    {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '<' | '>' | ','))
            .unwrap_or(tail.len());
        out.push_str(&url(&tail[..end]));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_in_paths_queries_and_user_info_are_removed() {
        assert_eq!(
            url("https://base-sepolia.g.alchemy.com/v2/SECRET"),
            "https://base-sepolia.g.alchemy.com/…"
        );
        assert_eq!(url("http://user:SECRET@127.0.0.1:8545"), "http://127.0.0.1:8545/…");
        assert_eq!(url("http://127.0.0.1:8545/?key=SECRET"), "http://127.0.0.1:8545/…");
        assert_eq!(url("http://127.0.0.1:8545"), "http://127.0.0.1:8545");
        assert_eq!(url("not a url SECRET"), "<unparseable URL>");
        let message = "error sending request for url (https://node.example/v3/SECRET?k=SECRET2): timed out";
        assert_eq!(urls_in(message), "error sending request for url (https://node.example/…): timed out");
        assert_eq!(urls_in("a http://x/SECRET, b wss://y:1/SECRET"), "a http://x/…, b wss://y:1/…");
        assert_eq!(urls_in("no url here"), "no url here");
    }
}
