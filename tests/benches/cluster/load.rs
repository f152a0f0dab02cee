//! The burst: one signed registration per signer, sent with bounded concurrency, round-robin over
//! the daemons (a daemon holding no key, a standby, answers 503: the request goes on to the next
//! daemon, as a load balancer's retry would send it); each accepted relay then watched through `GET /relay/:id` on the daemon that took
//! it until it ends (or the run's patience does).
//!
//! The requests go through a plain HTTP client rather than the fixture's `Client`, which checks
//! every answer against the OpenAPI document: here that check would be the client's CPU taken
//! from the daemons on the same two cores, and a refusal under load must be counted, not panic.

use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::plan::Plan;

/// One request's story, in times since the burst began.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// The daemon it went to (index into the configuration's daemons).
    pub(crate) daemon: usize,
    /// When it was sent, and when its answer came.
    pub(crate) sent: Duration,
    pub(crate) answered: Duration,
    /// The HTTP status; 0 if no answer came.
    pub(crate) status: u16,
    /// The error message of a refusal (`{"error"}`, or the transport's).
    pub(crate) error: Option<String>,
    /// The relay id of an accepted request (200 or 202).
    pub(crate) relay_id: Option<String>,
    /// The last status `GET /relay/:id` showed, and when it was first seen ending.
    pub(crate) final_status: Option<String>,
    pub(crate) ended: Option<Duration>,
    /// The relay's last view (for the checks: its mined transaction).
    pub(crate) view: Option<Value>,
    /// Daemons that answered 503 for holding no key before one took it.
    pub(crate) passed_on: usize,
    /// `GET /relay/:id` requests it took, and when the last one was answered.
    pub(crate) looks: usize,
    pub(crate) last_look: Option<Duration>,
}

impl Outcome {
    pub(crate) fn accepted(&self) -> bool {
        self.relay_id.is_some()
    }

    pub(crate) fn mined(&self) -> bool {
        self.final_status.as_deref() == Some("mined")
    }

    /// Refused by a daemon that holds no key (a standby of the cluster).
    fn holds_no_key(&self) -> bool {
        self.status == 503
            && self.error.as_deref().is_some_and(|error| error.starts_with("No relayer key is free"))
    }
}

/// Statuses a relay can still leave (`expired` may be a cancellation still racing its relay,
/// but the bench takes it as the end).
fn is_open(status: &str) -> bool {
    matches!(status, "accepted" | "sent" | "replaced")
}

/// What the burst's requests share: the daemons' base URLs (`http://127.0.0.1:<port>`), the
/// client, the clock and the two bounds.
struct Burst<'a> {
    http: reqwest::Client,
    daemons: &'a [String],
    started: Instant,
    sending: Semaphore,
    polling: Semaphore,
    poll: Duration,
}

/// Sends `bodies` (request `n` to daemon `n mod daemons`) and follows every accepted relay to its
/// end; the outcomes in the order of `bodies`. The watching stops `plan.settle` after the last
/// answer: the relays still open then keep their last status.
pub(crate) async fn burst(daemons: &[String], bodies: &[Value], plan: &Plan) -> Vec<Outcome> {
    let burst = Burst {
        http: kya_tests::http_client(),
        daemons,
        started: Instant::now(),
        sending: Semaphore::new(plan.concurrency),
        polling: Semaphore::new(plan.polls_in_flight),
        poll: plan.poll,
    };
    let clients = plan.clients.unwrap_or(bodies.len()).max(1);
    let answers = Answers::default();
    join_all(bodies.iter().enumerate().map(|(n, body)| {
        let (burst, answers) = (&burst, &answers);
        async move {
            let daemons = burst.daemons.len();
            let client = client_address(n % clients);
            let mut outcome = burst.send(n % daemons, body, &client).await;
            let first_sent = outcome.sent;
            while outcome.holds_no_key() && outcome.passed_on + 1 < daemons {
                let passed_on = outcome.passed_on + 1;
                outcome = burst.send((n + passed_on) % daemons, body, &client).await;
                outcome.passed_on = passed_on;
            }
            outcome.sent = first_sent;
            answers.record(burst.started + outcome.answered);
            if let Some(id) = outcome.relay_id.clone() {
                burst.watch(&mut outcome, &id, || answers.deadline(bodies.len(), plan.settle)).await;
            }
            outcome
        }
    }))
    .await
}

/// Client `n`'s IPv4 address, in 10.0.0.0/8 (the relayer counts an IPv4 client by its address).
fn client_address(n: usize) -> String {
    let n = n as u32 & 0x00ff_ffff;
    format!("10.{}.{}.{}", n >> 16, (n >> 8) & 0xff, n & 0xff)
}

/// The answers so far: how many, and the last one's time.
#[derive(Default)]
struct Answers(std::sync::Mutex<(usize, Option<Instant>)>);

impl Answers {
    fn record(&self, answered: Instant) {
        let mut answers = self.0.lock().unwrap();
        answers.0 += 1;
        answers.1 = Some(answers.1.map_or(answered, |last| last.max(answered)));
    }

    /// `settle` after the last of `total` answers; none while answers are missing.
    fn deadline(&self, total: usize, settle: Duration) -> Option<Instant> {
        let answers = self.0.lock().unwrap();
        answers.1.filter(|_| answers.0 == total).map(|last| last + settle)
    }
}

impl Burst<'_> {
    /// `POST /relay` to daemon `daemon` for `client` (as the load balancer in front of the
    /// daemons names it), holding one of the sending permits.
    async fn send(&self, daemon: usize, body: &Value, client: &str) -> Outcome {
        let _permit = self.sending.acquire().await.expect("the semaphore stays open");
        let sent = self.started.elapsed();
        let answer = self
            .http
            .post(format!("{}/relay", self.daemons[daemon]))
            .header("content-type", "application/json")
            .header("x-forwarded-for", client)
            .body(body.to_string())
            .timeout(Duration::from_secs(60))
            .send()
            .await;
        let (status, json) = match answer {
            Ok(response) => {
                let status = response.status().as_u16();
                let text = response.text().await.unwrap_or_default();
                (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
            }
            Err(error) => (0, Value::String(error.to_string())),
        };
        let answered = self.started.elapsed();
        let relay_id = match status {
            200 | 202 => json["relayId"].as_str().map(str::to_owned),
            _ => None,
        };
        let error = relay_id.is_none().then(|| match &json {
            Value::String(text) => text.clone(),
            json => json["error"].as_str().map_or_else(|| json.to_string(), str::to_owned),
        });
        let final_status = json["status"].as_str().map(str::to_owned);
        Outcome {
            daemon,
            sent,
            answered,
            status,
            error,
            relay_id,
            final_status,
            ended: None,
            view: None,
            passed_on: 0,
            looks: 0,
            last_look: None,
        }
    }

    /// Looks at the relay every `poll` until it ends or the patience after the last answer runs
    /// out; each look holds one of the polling permits.
    async fn watch(&self, outcome: &mut Outcome, id: &str, deadline: impl Fn() -> Option<Instant>) {
        let url = format!("{}/relay/{id}", self.daemons[outcome.daemon]);
        loop {
            let view = {
                let _permit = self.polling.acquire().await.expect("the semaphore stays open");
                self.look(&url).await
            };
            let seen = self.started.elapsed();
            outcome.looks += 1;
            outcome.last_look = Some(seen);
            if let Some(view) = view {
                let status = view["status"].as_str().unwrap_or("unknown").to_owned();
                let open = is_open(&status);
                outcome.final_status = Some(status);
                outcome.view = Some(view);
                if !open {
                    outcome.ended = Some(seen);
                    return;
                }
            }
            if deadline().is_some_and(|deadline| Instant::now() >= deadline) {
                return;
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// One `GET /relay/:id`: the relay's view, or `None` when the daemon did not answer it.
    async fn look(&self, url: &str) -> Option<Value> {
        let response = self.http.get(url).timeout(Duration::from_secs(10)).send().await.ok()?;
        if response.status() != 200 {
            return None;
        }
        response.json().await.ok()
    }
}
