//! A webhook receiver on loopback for the relayer's webhook tests: it records every delivery
//! attempt (headers and body, as received) and answers what the test says (200, 500, a redirect
//! elsewhere, …), or is
//! down (its port refuses connections) until the test brings it back on the same port. Plain
//! TCP, as `rpc_proxy` is. Deliveries are verified by Python's `standardwebhooks` package
//! (`tests/webhooks/verify.py` in `.tools/venv`), an implementation independent of ours.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU16, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// One attempt the receiver saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`.
    pub timestamp: String,
    /// `webhook-signature`.
    pub signature: String,
    /// `content-type`.
    pub content_type: String,
    /// The body, as received.
    pub body: String,
    /// The status the receiver answered (0: none, it hung).
    pub answered: u16,
}

impl Delivery {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("a JSON body: {}", self.body))
    }
}

/// A receiver on a loopback port.
#[derive(Debug)]
pub struct Receiver {
    address: SocketAddr,
    answer: Arc<AtomicU16>,
    /// The `Location` header of every answer, when set (a redirect).
    location: Arc<Mutex<Option<String>>>,
    seen: Arc<Mutex<Vec<Delivery>>>,
    serving: Option<JoinHandle<()>>,
}

impl Receiver {
    /// A receiver answering 200 on a free port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let mut receiver = Self {
            address: listener.local_addr().expect("bound"),
            answer: Arc::new(AtomicU16::new(200)),
            location: Arc::default(),
            seen: Arc::default(),
            serving: None,
        };
        receiver.serve(listener);
        receiver
    }

    /// A receiver that is down from the start: its port (free a moment ago) refuses connections
    /// until [`Receiver::up`].
    pub async fn down_from_start() -> Self {
        let mut receiver = Self::start().await;
        receiver.down().await;
        receiver
    }

    /// Its URL, with a path and a query as a real receiver's might have.
    pub fn url(&self) -> String {
        format!("http://{}/hooks/relays?token=receiver-url-token", self.address)
    }

    /// Makes every later attempt answer `status` (with an empty body); 0: read the request and
    /// never answer (a receiver that hangs).
    pub fn answer(&self, status: u16) {
        self.answer.store(status, Ordering::SeqCst);
    }

    /// Makes every later attempt answer `status` (a 3xx) with `location` as its `Location`.
    pub fn redirect(&self, status: u16, location: &str) {
        *self.location.lock().unwrap() = Some(location.to_owned());
        self.answer(status);
    }

    /// Stops listening: connections are refused.
    pub async fn down(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
            let _ = serving.await;
        }
    }

    /// Listens again, on the same port.
    pub async fn up(&mut self) {
        if self.serving.is_none() {
            let listener = tokio::net::TcpListener::bind(self.address).await.expect("the same port again");
            self.serve(listener);
        }
    }

    /// Every attempt seen so far, in the order received.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.seen.lock().unwrap().clone()
    }

    /// The attempts answered 2xx, in the order received.
    pub fn delivered(&self) -> Vec<Delivery> {
        self.deliveries().into_iter().filter(|delivery| (200..300).contains(&delivery.answered)).collect()
    }

    /// Waits (up to `patience`) until `done` holds for the attempts seen; panics after.
    pub async fn until(&self, patience: Duration, done: impl Fn(&[Delivery]) -> bool) -> Vec<Delivery> {
        let start = Instant::now();
        loop {
            let seen = self.deliveries();
            if done(&seen) {
                return seen;
            }
            assert!(start.elapsed() < patience, "the receiver never saw what was expected: {seen:#?}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let (answer, location, seen) =
            (Arc::clone(&self.answer), Arc::clone(&self.location), Arc::clone(&self.seen));
        self.serving = Some(tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (answer, location, seen) =
                    (Arc::clone(&answer), Arc::clone(&location), Arc::clone(&seen));
                tokio::spawn(async move {
                    let _ = receive(socket, &answer, &location, &seen).await;
                });
            }
        }));
    }
}

/// Reads one request, records it and answers.
async fn receive(
    socket: tokio::net::TcpStream,
    answer: &AtomicU16,
    location: &Mutex<Option<String>>,
    seen: &Mutex<Vec<Delivery>>,
) -> std::io::Result<()> {
    use tokio::io::{AsyncWriteExt, BufReader};
    let (read, mut write) = socket.into_split();
    let Some(request) = crate::http1::read_request(&mut BufReader::new(read)).await else { return Ok(()) };
    let header = |name: &str| request.header(name).unwrap_or_default().to_owned();
    let body = request.body.clone();
    let status = answer.load(Ordering::SeqCst);
    seen.lock().unwrap().push(Delivery {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        content_type: header("content-type"),
        body: String::from_utf8(body).expect("a UTF-8 body"),
        answered: status,
    });
    if status == 0 {
        std::future::pending::<()>().await;
    }
    let location = match location.lock().unwrap().as_deref() {
        Some(location) => format!("location: {location}\r\n"),
        None => String::new(),
    };
    write
        .write_all(
            format!("HTTP/1.1 {status} Answer\r\n{location}content-length: 0\r\nconnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
}

/// What Python's `standardwebhooks` says of `delivery` under `secret` (as `WEBHOOK_SECRET` is
/// written), checked at Unix time `at` (`None`: now): `Ok` or its error.
pub fn verify(secret: &str, deliveries: &[(Delivery, Option<u64>)]) -> Vec<Result<(), String>> {
    let job = json!({
        "secret": secret,
        "deliveries": deliveries.iter().map(|(delivery, at)| json!({
            "headers": {
                "webhook-id": delivery.id,
                "webhook-timestamp": delivery.timestamp,
                "webhook-signature": delivery.signature,
            },
            "body": delivery.body,
            "at": at,
        })).collect::<Vec<_>>(),
    });
    let answers: Vec<Value> =
        serde_json::from_value(crate::run_python("webhooks/verify.py", &job, "the verifier"))
            .expect("a list");
    answers
        .into_iter()
        .map(|answer| match answer["error"].as_str() {
            None => Ok(()),
            Some(error) => Err(error.to_owned()),
        })
        .collect()
}
