//! The relayer's JSON-RPC transport: each request is one HTTP POST through reqwest, sent again
//! as `kya_core::chain::retry` says, the edge API's policy: after HTTP 429 (any request, a transaction
//! too: the provider refused it before processing it), and, for reads only, after HTTP 5xx and
//! after an answer saying the node has not seen the block the read names (a load balancer's
//! backend behind the one that served the head block a relay's checks pinned). A transaction
//! whose answer is lost, or that a gateway failed on, is never sent again here: the nonce
//! machinery ([`crate::rules::nonce`]) finds out whether the node has it.
//!
//! Not alloy's `RetryBackoffLayer`: its policy sees the error and not the request, so it would
//! send a transaction again after a gateway's 502 or 504, and alloy's HTTP transport keeps a
//! 429's `Retry-After` only when the body is not a JSON-RPC error, which hosted providers send.

use std::task::{Context, Poll};

use alloy::{
    rpc::json_rpc::{RequestPacket, ResponsePacket},
    transports::{
        TransportError, TransportErrorKind, TransportFut,
        http::reqwest::{self, header::RETRY_AFTER},
    },
};
use kya_core::chain::retry::{self, Effect, Failure};

/// A JSON-RPC endpoint over HTTP whose requests are sent again as `kya_core::chain::retry` says.
#[derive(Debug, Clone)]
pub(crate) struct RetryingHttp {
    client: reqwest::Client,
    url: reqwest::Url,
}

/// What one POST brought: the answer as alloy's HTTP transport reads it, and the failure a
/// later attempt may not meet, if any.
type Attempt = (Result<ResponsePacket, TransportError>, Option<Failure>);

impl RetryingHttp {
    /// Requests to `url` through `client` (its timeout bounds each attempt).
    pub(crate) const fn new(client: reqwest::Client, url: reqwest::Url) -> Self {
        Self { client, url }
    }

    /// Sends `request` until it is answered, or `kya_core::chain::retry` says to stop.
    async fn exchange(self, request: RequestPacket) -> Result<ResponsePacket, TransportError> {
        let effect = Effect::of_methods(request.method_names());
        let mut attempt = 1;
        loop {
            let (answer, failure) = self.post(&request).await?;
            let wait = failure.and_then(|failure| retry::wait_before_retry(effect, attempt, failure));
            let Some(wait) = wait else { return answer };
            let methods = request.method_names().collect::<Vec<_>>().join(", ");
            tracing::warn!(%methods, ?failure, attempt, ?wait, "the RPC provider refused; sending again");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// One POST. A transport failure (no answer, a timeout) is returned as it is.
    async fn post(&self, request: &RequestPacket) -> Result<Attempt, TransportError> {
        let response = self
            .client
            .post(self.url.clone())
            .json(request)
            .headers(request.headers())
            .send()
            .await
            .map_err(|error| TransportErrorKind::custom_str(&kya_native_http::error_chain(&error)))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(retry::retry_after);
        let body = response.bytes().await.map_err(TransportErrorKind::custom)?;
        let text = || String::from_utf8_lossy(&body).into_owned();
        if !(200..300).contains(&status) {
            // A JSON-RPC error in the body is the provider's answer, as alloy's HTTP transport
            // reads it: a transaction refused so is known not taken.
            let answer = match serde_json::from_slice::<ResponsePacket>(&body) {
                Ok(packet) if packet.is_error() => Ok(packet),
                _ => Err(TransportErrorKind::http_error_with_retry_after(status, text(), retry_after)),
            };
            return Ok((answer, Some(Failure::Http { status, retry_after })));
        }
        let answer: ResponsePacket =
            serde_json::from_slice(&body).map_err(|error| TransportError::deser_err(error, text()))?;
        let failure = Failure::of_answer(&answer);
        Ok((Ok(answer), failure))
    }
}

impl tower::Service<RequestPacket> for RetryingHttp {
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: RequestPacket) -> Self::Future {
        Box::pin(self.clone().exchange(request))
    }
}

#[cfg(test)]
mod tests {
    use std::{
        collections::VecDeque,
        sync::{Arc, Mutex},
    };

    use alloy::{
        providers::{Provider, ProviderBuilder},
        rpc::client::RpcClient,
    };
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    use super::*;

    /// A loopback HTTP server answering each request with the next of `answers` (status,
    /// `Retry-After`, body); it records the request bodies.
    async fn server(
        answers: Vec<(u16, Option<&'static str>, String)>,
    ) -> (reqwest::Url, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap()).parse().unwrap();
        let (answers, seen) =
            (Arc::new(Mutex::new(VecDeque::from(answers))), Arc::new(Mutex::new(Vec::new())));
        let recorded = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (answers, recorded) = (Arc::clone(&answers), Arc::clone(&recorded));
                tokio::spawn(async move {
                    let (read, mut write) = socket.into_split();
                    let mut read = BufReader::new(read);
                    loop {
                        let (mut line, mut length) = (String::new(), 0);
                        loop {
                            line.clear();
                            if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                            if let Some((name, value)) = line.split_once(':')
                                && name.eq_ignore_ascii_case("content-length")
                            {
                                length = value.trim().parse().unwrap();
                            }
                        }
                        let mut body = vec![0; length];
                        read.read_exact(&mut body).await.unwrap();
                        recorded.lock().unwrap().push(String::from_utf8(body).unwrap());
                        let (status, retry_after, body) =
                            answers.lock().unwrap().pop_front().expect("an answer");
                        let retry_after = retry_after.map(|value| format!("retry-after: {value}\r\n"));
                        let head = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{}content-length: {}\r\n\r\n",
                            retry_after.unwrap_or_default(),
                            body.len()
                        );
                        write.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
                    }
                });
            }
        });
        (url, seen)
    }

    fn provider(url: reqwest::Url) -> impl Provider {
        kya_native_http::install_crypto_provider();
        let client = RpcClient::new(RetryingHttp::new(reqwest::Client::new(), url), true);
        ProviderBuilder::new().disable_recommended_fillers().connect_client(client)
    }

    fn result(value: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":0,"result":"{value}"}}"#)
    }

    fn error(code: i64, message: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":0,"error":{{"code":{code},"message":"{message}"}}}}"#)
    }

    #[tokio::test]
    async fn a_429_is_sent_again_after_its_retry_after_even_as_a_json_rpc_error() {
        let (url, seen) = server(vec![
            (
                429,
                Some("0"),
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":429,"message":"Too Many Requests"}}"#.into(),
            ),
            (429, Some("0"), "slow down".into()),
            (200, None, result("0x2a")),
        ])
        .await;
        assert_eq!(provider(url).get_block_number().await.unwrap(), 42);
        assert_eq!(seen.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn a_read_at_a_block_the_node_has_not_seen_is_read_again() {
        let (url, seen) =
            server(vec![(200, None, error(-32000, "header not found")), (200, None, result("0x07"))]).await;
        let balance = provider(url).get_balance(alloy::primitives::Address::ZERO).number(9).await.unwrap();
        assert_eq!(balance, alloy::primitives::U256::from(7));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0], seen[1], "the same read");
    }

    /// After three refusals the provider's own error is the answer (a JSON-RPC error body), or
    /// the HTTP error with its status.
    #[tokio::test]
    async fn three_attempts_at_most() {
        let refusal = || (503, Some("0"), "upstream down".to_owned());
        let (url, seen) = server(vec![refusal(), refusal(), refusal()]).await;
        let failure = provider(url).get_block_number().await.unwrap_err();
        assert_eq!(
            failure.as_transport_err().and_then(|error| error.as_http_error()).map(|http| http.status),
            Some(503)
        );
        assert_eq!(seen.lock().unwrap().len(), 3);
    }

    /// A transaction goes again after a 429 only: after a gateway's 502 the node may have it,
    /// and a node's answer about a block is no reason to send it twice.
    #[tokio::test]
    async fn a_transaction_is_sent_again_only_after_a_429() {
        let hash = format!("0x{}", "ab".repeat(32));
        let (url, seen) = server(vec![(429, Some("0"), "busy".into()), (200, None, result(&hash))]).await;
        let sent = provider(url).send_raw_transaction(&[1, 2, 3]).await.unwrap();
        assert_eq!(sent.tx_hash().to_string(), hash);
        assert_eq!(seen.lock().unwrap().len(), 2);

        let (url, seen) = server(vec![(502, None, "bad gateway".into())]).await;
        assert!(provider(url).send_raw_transaction(&[1, 2, 3]).await.is_err());
        assert_eq!(seen.lock().unwrap().len(), 1);
        let (url, seen) = server(vec![(200, None, error(-32000, "header not found"))]).await;
        assert!(provider(url).send_raw_transaction(&[1, 2, 3]).await.is_err());
        assert_eq!(seen.lock().unwrap().len(), 1);
    }
}
