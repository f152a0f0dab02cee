//! A JSON-RPC server on loopback in front of a real node, for what a real node cannot be made
//! to do: lose an answer, answer garbage or an error, close the connection, answer slowly, or
//! answer as other node software does. With a policy that only forwards, it is a counting proxy
//! ([`crate::edge_fixture::CountingProxy`]). Plain TCP rather than an HTTP framework, so it can
//! also close a connection without a word.

use std::{sync::Arc, time::Duration};

use futures::future::BoxFuture;
use serde_json::{Value, json};

/// An answer a policy works out asynchronously ([`RpcAction::Later`]): the body to send.
pub struct Later(pub BoxFuture<'static, String>);

impl std::fmt::Debug for Later {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Later(..)")
    }
}

/// What a misbehaving JSON-RPC server on loopback does with one request body.
#[derive(Debug)]
pub enum RpcAction {
    /// Pass this body on to the upstream node and relay its answer.
    Forward(String),
    /// Pass the body on, then answer 502 as if the node's answer were lost.
    ForwardAndLose,
    /// Answer with this JSON-RPC `result` (raw JSON) without asking anyone.
    Answer(String),
    /// Answer 200 with a body that is not JSON.
    Garbage,
    /// Answer 200 with exactly this body (a JSON-RPC error, say).
    Raw(String),
    /// Wait this long, then forward this body (a slow node).
    Delay(Duration, String),
    /// Close the connection without answering.
    Close,
    /// Answer with this HTTP status, extra headers and body (a 413, or a 429 with `Retry-After`).
    Http { status: u16, headers: Vec<(String, String)>, body: String },
    /// Forward this body and pass the node's answer through `rewrite` (another node's wording).
    Rewrite(String, fn(&str) -> String),
    /// Forward this batch (a JSON array; not sent when empty) and answer these requests of it
    /// here: the node's answers and these, in one array.
    Partly(String, Vec<Value>),
    /// Answer 200 with the body this future gives: a stand-in that asks the node itself (with
    /// [`post`]), or waits for it, before it knows what to answer.
    Later(Later),
}

/// POSTs the JSON-RPC `body` to `upstream` and returns the answer's body.
pub async fn post(http: &reqwest::Client, upstream: &str, body: String) -> String {
    http.post(upstream)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the upstream answers")
        .text()
        .await
        .expect("an upstream body")
}

/// A JSON-RPC server on loopback in front of `upstream` (if any) that does with each request
/// what `policy` says, for faults a real node cannot be made to show. Returns its base URL.
pub async fn start(upstream: Option<String>, policy: Arc<dyn Fn(&str) -> RpcAction + Send + Sync>) -> String {
    use tokio::io::{AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let address = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        let http = crate::http_client();
        while let Ok((socket, _)) = listener.accept().await {
            let (http, upstream, policy) = (http.clone(), upstream.clone(), Arc::clone(&policy));
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut read = BufReader::new(read);
                loop {
                    let Some(request) = crate::http1::read_request(&mut read).await else { return };
                    let body = request.body;
                    let body = String::from_utf8_lossy(&body).into_owned();
                    let forward = |body: String| {
                        let (http, upstream) = (http.clone(), upstream.clone());
                        async move { post(&http, &upstream.expect("an upstream node to forward to"), body).await }
                    };
                    let ok = |answer: String| {
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                            answer.len()
                        )
                    };
                    let response = match policy(&body) {
                        RpcAction::Forward(body) => ok(forward(body).await),
                        RpcAction::ForwardAndLose => {
                            forward(body).await;
                            "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n".to_owned()
                        }
                        RpcAction::Answer(result) => {
                            let id =
                                serde_json::from_str::<Value>(&body).map(|request| request["id"].clone());
                            ok(json!({ "jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "result": serde_json::from_str::<Value>(&result).expect("raw JSON") })
                                .to_string())
                        }
                        RpcAction::Garbage => ok("<html>not JSON-RPC</html>".to_owned()),
                        RpcAction::Raw(body) => ok(body),
                        RpcAction::Delay(pause, body) => {
                            tokio::time::sleep(pause).await;
                            ok(forward(body).await)
                        }
                        RpcAction::Close => return,
                        RpcAction::Http { status, headers, body } => {
                            let extra: String =
                                headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
                            format!(
                                "HTTP/1.1 {status} Refused\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
                                body.len()
                            )
                        }
                        RpcAction::Rewrite(body, rewrite) => ok(rewrite(&forward(body).await)),
                        RpcAction::Partly(batch, mut answers) => {
                            if batch != "[]" {
                                let forwarded: Vec<Value> = serde_json::from_str(&forward(batch).await)
                                    .expect("the node answers a batch");
                                answers.extend(forwarded);
                            }
                            ok(Value::Array(answers).to_string())
                        }
                        RpcAction::Later(Later(answer)) => ok(answer.await),
                    };
                    if write.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{address}")
}
