//! The Durable Object that delivers one receiver's events ([`WebhookSender`], binding
//! `WEBHOOK_SENDERS`, one object per receiver name), in order per agent.
//!
//! - **Order.** Queues deliver in no promised order and a retried message comes back later, so
//!   order is not left to the queue. The queue's consumer hands each message (a [`Handoff`]) to
//!   its receiver's object, which stores its events (SQLite storage) and puts the handoffs back
//!   in their chain: an event is released only once every handoff before it has arrived. Of the
//!   released events, each agent's oldest is the only one of that agent attempted; its later
//!   events wait until it is delivered or dead-lettered. Other agents go on meanwhile.
//! - **Once.** A handoff at or before what the object accepted is a copy (the queue delivers at
//!   least once) and is dropped; an event is stored once by its id, and deleted when delivered.
//! - **Retries.** A failed attempt (no 2xx in `WEBHOOK_TIMEOUT_SECS`, a 3xx included: redirects
//!   are never followed) is tried again after `WEBHOOK_RETRY_SECS` doubled per failure, at most
//!   `WEBHOOK_RETRY_MAX_SECS`, from the object's alarm. After `WEBHOOK_MAX_ATTEMPTS` the event is
//!   sent to the dead-letter queue, and the agent's next event goes on.
//! - **Signing.** `kya_core::standard_webhooks`, as the relayer signs: `webhook-id` is the
//!   event's id (the same on every attempt, for the receiver's deduplication),
//!   `webhook-timestamp` the attempt's time.

use std::time::Duration;

use futures::future::{Either, join_all, select};
use kya_core::{chain::redact, feed::Cursor, standard_webhooks::signature};
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{
    AbortController, Date, Delay, DurableObject, Env, Fetch, Headers, MessageBuilder, Method,
    QueueContentType, Request, RequestInit, RequestRedirect, Response, SqlStorage, SqlStorageValue, State,
    durable_object,
};

use super::{
    DEAD_QUEUE_BINDING, Settings,
    message::{DeadLetter, Handoff, backoff_secs, follow_chain},
    receivers::{self, Receiver},
};

/// The binding of the senders' namespace in `wrangler.toml`.
pub(crate) const BINDING: &str = "WEBHOOK_SENDERS";

/// Attempts made at once (Workers: 6 connections open at a time per invocation).
const AT_ONCE: usize = 6;
/// Attempts one alarm makes at most (each a subrequest; Workers Free allows 50 per invocation);
/// the rest follow in the next alarm, at once.
const PER_ALARM: usize = 36;

/// What the queue's consumer sends the object.
#[derive(Debug, Deserialize)]
pub(crate) struct Accept {
    pub(crate) handoff: Handoff,
    /// The handoff went to the dead-letter queue: keep its place in the chain, not its events.
    #[serde(default)]
    pub(crate) skip: bool,
}

/// A stored event of the receiver.
#[derive(Debug, Deserialize)]
struct Pending {
    batch: u64,
    idx: u32,
    body: String,
    attempts: u32,
    due_ms: u64,
}

impl Pending {
    fn id(&self) -> Cursor {
        Cursor { batch: self.batch, index: self.idx }
    }
}

/// The Durable Object delivering one receiver's events.
#[durable_object(alarm)]
pub struct WebhookSender {
    state: State,
    env: Env,
}

impl DurableObject for WebhookSender {
    fn new(state: State, env: Env) -> Self {
        Self { state, env }
    }

    /// `POST /accept` with an [`Accept`]: stores the handoff, answers once it is stored.
    async fn fetch(&self, mut request: Request) -> worker::Result<Response> {
        if request.method() != Method::Post {
            return Response::error("POST a handoff", 405);
        }
        let Ok(accept) = request.json::<Accept>().await else {
            return Response::error("a handoff is {handoff: {receiver, after, events}, skip}", 400);
        };
        let sql = self.state.storage().sql();
        schema(&sql)?;
        set_meta(&sql, "receiver", &accept.handoff.receiver)?;
        let outcome = accept_handoff(&sql, &accept.handoff, accept.skip, now_ms())?;
        // An alarm already set is at most the earliest retry; a release is due now.
        let storage = self.state.storage();
        if outcome == "released" {
            storage.set_alarm(Duration::ZERO).await?;
        }
        Response::ok(outcome)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let storage = self.state.storage();
        let sql = storage.sql();
        schema(&sql)?;
        let name = meta(&sql, "receiver")?.unwrap_or_default();
        let settings = Settings::from_env(&self.env);
        // The receiver as configured now, and its key: either missing fails each attempt, so an
        // operator's fix is picked up by the next retry, and a receiver removed dead-letters.
        let target: Result<(Receiver, Vec<u8>), String> =
            receivers::named(&self.env, &name).and_then(|receiver| {
                let key = receiver.key(&self.env)?;
                Ok((receiver, key))
            });
        let mut made = 0;
        while made < PER_ALARM {
            let now = now_ms();
            let due: Vec<Pending> = heads(&sql)?
                .into_iter()
                .filter(|head| head.due_ms <= now)
                .take(AT_ONCE.min(PER_ALARM - made))
                .collect();
            if due.is_empty() {
                break;
            }
            made += due.len();
            let outcomes = join_all(due.iter().map(|head| async {
                match &target {
                    Ok((receiver, key)) => attempt(receiver, key, head, settings.timeout_secs).await,
                    Err(error) => Err(error.clone()),
                }
            }))
            .await;
            for (head, outcome) in due.iter().zip(outcomes) {
                match outcome {
                    Ok(()) => delete(&sql, head)?,
                    Err(error) => self.failed(&sql, &name, head, &error, &settings).await?,
                }
            }
        }
        let next = if made >= PER_ALARM {
            Some(now_ms())
        } else {
            heads(&sql)?.into_iter().map(|head| head.due_ms).min()
        };
        if let Some(next) = next {
            storage.set_alarm(Duration::from_millis(next.saturating_sub(now_ms()))).await?;
        }
        Response::ok("delivered")
    }
}

impl WebhookSender {
    /// A failed attempt: due again after the backoff, or dead-lettered after the last attempt.
    async fn failed(
        &self,
        sql: &SqlStorage,
        receiver: &str,
        head: &Pending,
        error: &str,
        settings: &Settings,
    ) -> worker::Result<()> {
        let attempts = head.attempts + 1;
        if attempts >= settings.max_attempts {
            let letter = DeadLetter {
                receiver: receiver.to_owned(),
                event: serde_json::from_str(&head.body)?,
                attempts,
                last_error: error.to_owned(),
            };
            let sent = async {
                let body = serde_json::to_string(&letter)?;
                self.env
                    .queue(DEAD_QUEUE_BINDING)?
                    .send(MessageBuilder::new(body).content_type(QueueContentType::Text).build())
                    .await
            }
            .await;
            match sent {
                Ok(()) => {
                    worker::console_error!(
                        "webhook {receiver}: event {} dead-lettered after {attempts} attempts: {error}",
                        head.id()
                    );
                    return delete(sql, head);
                }
                Err(send_error) => {
                    worker::console_error!(
                        "webhook {receiver}: event {} could not reach the dead-letter queue ({send_error}); kept",
                        head.id()
                    );
                }
            }
        } else {
            worker::console_warn!(
                "webhook {receiver}: event {} attempt {attempts} failed: {error}",
                head.id()
            );
        }
        let pause = backoff_secs(attempts, settings.retry_secs, settings.retry_max_secs);
        run(sql.exec(
            "UPDATE pending SET attempts = ?, due_ms = ? WHERE batch = ? AND idx = ?",
            vec![
                int(u64::from(attempts)),
                int(now_ms() + pause * 1_000),
                int(head.batch),
                int(u64::from(head.idx)),
            ],
        )?);
        Ok(())
    }
}

/// One attempt: the event POSTed, signed, within `timeout_secs`; a 2xx is delivered.
async fn attempt(receiver: &Receiver, key: &[u8], head: &Pending, timeout_secs: u64) -> Result<(), String> {
    let id = head.id().to_string();
    let timestamp = now_ms() / 1_000;
    let headers = Headers::new();
    let set = |name: &str, value: &str| headers.set(name, value).map_err(|error| error.to_string());
    set("content-type", "application/json")?;
    set("webhook-id", &id)?;
    set("webhook-timestamp", &timestamp.to_string())?;
    set("webhook-signature", &signature(key, &id, timestamp, &head.body))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(JsValue::from_str(&head.body)))
        // A 3xx comes back as it is: a signed event never goes to a host the configuration
        // does not name.
        .with_redirect(RequestRedirect::Manual);
    let request =
        Request::new_with_init(&receiver.url, &init).map_err(|error| redact::urls_in(&error.to_string()))?;
    let fetch = Fetch::Request(request);
    let controller = AbortController::default();
    let signal = controller.signal();
    let sent = Box::pin(fetch.send_with_signal(&signal));
    let timeout = Box::pin(Delay::from(Duration::from_secs(timeout_secs)));
    let response = match select(sent, timeout).await {
        Either::Left((Ok(response), _)) => response,
        Either::Left((Err(error), _)) => {
            return Err(format!("could not deliver: {}", redact::urls_in(&error.to_string())));
        }
        Either::Right((_, sent)) => {
            // Closes the connection rather than leave it to a receiver that never answers.
            drop(sent);
            controller.abort();
            return Err(format!("no answer within {timeout_secs} s"));
        }
    };
    match response.status_code() {
        200..=299 => Ok(()),
        status @ 300..=399 => Err(format!(
            "HTTP {status} redirect (redirects are not followed: set the receiver's url to the target)"
        )),
        status => Err(format!("HTTP {status}")),
    }
}

fn schema(sql: &SqlStorage) -> worker::Result<()> {
    for statement in [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        // Handoffs that arrived before the one they follow.
        "CREATE TABLE IF NOT EXISTS chain (after TEXT PRIMARY KEY, last TEXT NOT NULL) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS pending (batch INTEGER NOT NULL, idx INTEGER NOT NULL, \
         agent_id INTEGER NOT NULL, body TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, \
         due_ms INTEGER NOT NULL, PRIMARY KEY (batch, idx)) WITHOUT ROWID",
    ] {
        run(sql.exec(statement, None)?);
    }
    Ok(())
}

/// Stores `handoff` and advances the chain: "released" when events became deliverable,
/// "held" when it waits for an earlier handoff, "copy" when it was already taken.
fn accept_handoff(sql: &SqlStorage, handoff: &Handoff, skip: bool, now: u64) -> worker::Result<&'static str> {
    let Some(last) = handoff.last() else { return Ok("copy") };
    let accepted = meta(sql, "accepted")?.map(|text| parse_cursor(&text)).transpose()?;
    if accepted.is_some_and(|accepted| last <= accepted) {
        return Ok("copy");
    }
    if !skip {
        for event in &handoff.events {
            run(sql.exec(
                "INSERT INTO pending (batch, idx, agent_id, body, due_ms) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT DO NOTHING",
                vec![
                    int(event.id.batch),
                    int(u64::from(event.id.index)),
                    int(event.change.agent_id),
                    SqlStorageValue::from(event.to_json()),
                    int(now),
                ],
            )?);
        }
    }
    run(sql.exec(
        "INSERT INTO chain (after, last) VALUES (?, ?) ON CONFLICT DO NOTHING",
        vec![SqlStorageValue::from(chain_key(handoff.after)), SqlStorageValue::from(last.to_string())],
    )?);
    #[derive(Deserialize)]
    struct Link {
        after: String,
        last: String,
    }
    let rows: Vec<Link> = sql.exec("SELECT after, last FROM chain", None)?.to_array()?;
    let links = rows
        .iter()
        .map(|link| {
            let after = if link.after == chain_key(None) { None } else { Some(parse_cursor(&link.after)?) };
            Ok((after, parse_cursor(&link.last)?))
        })
        .collect::<worker::Result<Vec<_>>>()?;
    let (through, taken) = follow_chain(accepted, &links);
    for index in taken {
        run(sql.exec(
            "DELETE FROM chain WHERE after = ?",
            vec![SqlStorageValue::from(rows[index].after.clone())],
        )?);
    }
    match through {
        // The chain moved on (it never moves back).
        Some(through) if Some(through) != accepted => {
            set_meta(sql, "accepted", &through.to_string())?;
            Ok("released")
        }
        _ => Ok("held"),
    }
}

/// Each agent's oldest released event, oldest first: one row per agent however many of its
/// events wait (SQLite gives a `MIN()` query's other columns from the row holding the minimum).
fn heads(sql: &SqlStorage) -> worker::Result<Vec<Pending>> {
    let Some(accepted) = meta(sql, "accepted")?.map(|text| parse_cursor(&text)).transpose()? else {
        return Ok(Vec::new());
    };
    let mut heads: Vec<Pending> = sql
        .exec(
            "SELECT batch, idx, body, attempts, due_ms, MIN(batch * 4294967296 + idx) AS place \
             FROM pending WHERE batch < ? OR (batch = ? AND idx <= ?) GROUP BY agent_id",
            vec![int(accepted.batch), int(accepted.batch), int(u64::from(accepted.index))],
        )?
        .to_array()?;
    heads.sort_by_key(Pending::id);
    Ok(heads)
}

fn delete(sql: &SqlStorage, head: &Pending) -> worker::Result<()> {
    run(sql.exec(
        "DELETE FROM pending WHERE batch = ? AND idx = ?",
        vec![int(head.batch), int(u64::from(head.idx))],
    )?);
    Ok(())
}

fn meta(sql: &SqlStorage, key: &str) -> worker::Result<Option<String>> {
    #[derive(Deserialize)]
    struct Row {
        value: String,
    }
    let rows: Vec<Row> =
        sql.exec("SELECT value FROM meta WHERE key = ?", vec![SqlStorageValue::from(key)])?.to_array()?;
    Ok(rows.into_iter().next().map(|row| row.value))
}

fn set_meta(sql: &SqlStorage, key: &str, value: &str) -> worker::Result<()> {
    run(sql.exec(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        vec![SqlStorageValue::from(key), SqlStorageValue::from(value)],
    )?);
    Ok(())
}

/// The chain's key of a handoff's `after`: `-` for a first handoff.
fn chain_key(after: Option<Cursor>) -> String {
    after.map_or_else(|| "-".to_owned(), |after| after.to_string())
}

fn parse_cursor(text: &str) -> worker::Result<Cursor> {
    Cursor::parse(text, "cursor").map_err(|error| worker::Error::RustError(error.to_string()))
}

/// A cursor runs as it is read.
fn run(cursor: worker::SqlCursor) {
    cursor.raw().for_each(drop);
}

/// SQLite integers are signed; ids, counts and times stay far below `i64::MAX`.
fn int(value: u64) -> SqlStorageValue {
    SqlStorageValue::from(i64::try_from(value).unwrap_or(i64::MAX))
}

fn now_ms() -> u64 {
    Date::now().as_millis()
}
