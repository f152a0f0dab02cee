//! The request side of HTTP/1.1 as the tests' own loopback servers read it (a JSON-RPC proxy
//! with faults, a webhook receiver, a provider): the head, then a body of `Content-Length`
//! bytes. These servers write their answers by hand, some malformed on purpose, so they read
//! requests with this rather than with an HTTP server library.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// One request as it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRequest {
    pub method: String,
    /// The request target: the path and query.
    pub target: String,
    /// Each header line's name and value, trimmed, names as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawRequest {
    /// The first value of the header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(seen, _)| seen.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

/// Reads the next request from `reader`; `None` when the connection ends before a whole one
/// (between requests of a kept-alive connection, or part way through).
pub async fn read_request<R: AsyncBufRead + Unpin>(reader: &mut R) -> Option<RawRequest> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).await.ok()? == 0 {
        return None;
    }
    let mut parts = request_line.trim_end().splitn(3, ' ');
    let (method, target) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let mut request = RawRequest { method, target, headers, body: Vec::new() };
    let length = request.header("content-length").and_then(|length| length.parse().ok()).unwrap_or(0);
    request.body = vec![0; length];
    reader.read_exact(&mut request.body).await.ok()?;
    Some(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_kept_alive_requests_one_after_another() {
        let wire = b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbodyGET /next?a=1 HTTP/1.1\r\n\r\nPOST /cut HTTP/1.1\r\ncontent-length: 9\r\n\r\nshort";
        let mut reader = tokio::io::BufReader::new(&wire[..]);
        let first = read_request(&mut reader).await.expect("a request");
        assert_eq!(
            (first.method.as_str(), first.target.as_str(), first.body.as_slice()),
            ("POST", "/rpc", &b"body"[..])
        );
        assert_eq!((first.header("host"), first.header("CONTENT-LENGTH")), (Some("x"), Some("4")));
        let second = read_request(&mut reader).await.expect("a request");
        assert_eq!((second.target.as_str(), second.body.len()), ("/next?a=1", 0));
        assert_eq!(read_request(&mut reader).await, None, "a body cut short is no request");
        assert_eq!(read_request(&mut reader).await, None);
    }
}
