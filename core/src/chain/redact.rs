//! RPC URLs as they may be shown: hosted nodes put API keys in the path, the query or the user
//! info (`https://base-sepolia.g.alchemy.com/v2/<key>`), and HTTP clients quote the whole URL in
//! their errors. Only the scheme, host and port are kept. Plain text handling, no URL crate, so
//! the Worker and the browser package stay small.

/// `url` with its user info, path, query and fragment replaced by `/…`; returned as given when
/// it has none of them, `<unparseable URL>` when it is no `scheme://host` URL.
pub fn url(url: &str) -> String {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once("://") else { return "<unparseable URL>".into() };
    if scheme.is_empty() || !scheme.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"+-.".contains(&byte))
    {
        return "<unparseable URL>".into();
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (user_info, host) = match authority.rsplit_once('@') {
        Some((user_info, host)) => (Some(user_info), host),
        None => (None, authority),
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return "<unparseable URL>".into();
    }
    if user_info.is_none() && (tail.is_empty() || tail == "/") {
        return url.to_owned();
    }
    format!("{scheme}://{host}/…")
}

/// `text` with every `http(s)://` or `ws(s)://` URL in it redacted by [`url()`].
pub fn urls_in(text: &str) -> String {
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
        assert_eq!(url("http://127.0.0.1:8545?key=SECRET"), "http://127.0.0.1:8545/…");
        assert_eq!(url("https://node.example#SECRET"), "https://node.example/…");
        assert_eq!(url("http://127.0.0.1:8545"), "http://127.0.0.1:8545");
        assert_eq!(url("https://sepolia.base.org/"), "https://sepolia.base.org/");
        for unparseable in ["not a url SECRET", "://host", "http://", "http://@/x"] {
            assert_eq!(url(unparseable), "<unparseable URL>", "{unparseable}");
        }
        let message = "error sending request for url (https://node.example/v3/SECRET?k=SECRET2): timed out";
        assert_eq!(urls_in(message), "error sending request for url (https://node.example/…): timed out");
        assert_eq!(urls_in("a http://x/SECRET, b wss://y:1/SECRET"), "a http://x/…, b wss://y:1/…");
        assert_eq!(urls_in("no url here"), "no url here");
    }
}
