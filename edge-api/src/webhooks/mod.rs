//! Webhooks for operators (docs/change-feed.md, "Webhooks"): the change feed pushed to the
//! receivers `wrangler.toml` names, signed as Standard Webhooks.
//!
//! After each index run, the feed's outlet (`index::outlets`) puts each receiver's new events on
//! the `kya-webhooks` queue as [`message::Handoff`]s. The queue's consumer ([`consume`]) hands
//! each to its receiver's [`sender::WebhookSender`], a Durable Object that puts them in order,
//! signs and delivers them, retries with backoff, and sends what it gives up on to the
//! `kya-webhooks-dead` queue, whose consumer records it in D1 (`webhook_dead_letters`).
//!
//! - `receivers`: the receivers and their filters, from `WEBHOOKS`; their keys from secrets.
//! - `message`: the queues' messages, and the rules without I/O (cutting, grouping, backoff).
//! - `sender`: the Durable Object delivering one receiver's events.
//! - `dead_letters`: what a sender gave up on, in D1 where an operator reads it, and counted per
//!   receiver for `/health`.

mod dead_letters;
pub(crate) mod message;
pub(crate) mod receivers;
pub(crate) mod sender;

use wasm_bindgen::JsValue;
use worker::{Env, MessageBatch, MessageBuilder, MessageExt, QueueContentType, Request, RequestInit};

use self::message::{Dead, Handoff, send_groups};
use crate::d1::Store;

/// The producer binding of the handoffs' queue, and the queue's name (as its consumer sees it).
pub(crate) const QUEUE_BINDING: &str = "WEBHOOKS_QUEUE";
pub(crate) const QUEUE: &str = "kya-webhooks";
/// The producer binding of the dead-letter queue, and its name.
pub(crate) const DEAD_QUEUE_BINDING: &str = "WEBHOOKS_DEAD";
pub(crate) const DEAD_QUEUE: &str = "kya-webhooks-dead";

/// The delivery settings (`WEBHOOK_*` vars).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// Attempts of one event before it is dead-lettered (`WEBHOOK_MAX_ATTEMPTS`, default 12).
    pub(crate) max_attempts: u32,
    /// The pause after the first failure, doubled after each (`WEBHOOK_RETRY_SECS`, default 5).
    pub(crate) retry_secs: u64,
    /// The longest pause (`WEBHOOK_RETRY_MAX_SECS`, default 3,600).
    pub(crate) retry_max_secs: u64,
    /// How long an attempt waits for an answer (`WEBHOOK_TIMEOUT_SECS`, default 10).
    pub(crate) timeout_secs: u64,
}

impl Settings {
    pub(crate) fn from_env(env: &Env) -> Self {
        Self::from_vars(|name| env.var(name).ok().map(|value| value.to_string()))
    }

    /// The settings from `var`, each var's value by name (none: unset), the defaults for the rest.
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let number = |name: &str, default: u64| {
            var(name).and_then(|value| value.trim().parse().ok()).unwrap_or(default)
        };
        Self {
            max_attempts: u32::try_from(number("WEBHOOK_MAX_ATTEMPTS", 12)).unwrap_or(u32::MAX).max(1),
            retry_secs: number("WEBHOOK_RETRY_SECS", 5),
            retry_max_secs: number("WEBHOOK_RETRY_MAX_SECS", 3_600),
            timeout_secs: number("WEBHOOK_TIMEOUT_SECS", 10).max(1),
        }
    }
}

/// Puts `handoffs` on the queue, in as few `sendBatch` calls as Queues' limits allow.
pub(crate) async fn enqueue(env: &Env, handoffs: &[Handoff]) -> worker::Result<()> {
    if handoffs.is_empty() {
        return Ok(());
    }
    let queue = env.queue(QUEUE_BINDING)?;
    let texts = handoffs.iter().map(serde_json::to_string).collect::<Result<Vec<_>, _>>()?;
    for group in send_groups(texts) {
        let messages = group
            .into_iter()
            .map(|text| MessageBuilder::new(text).content_type(QueueContentType::Text).build());
        queue.send_batch(messages).await?;
    }
    Ok(())
}

/// The queues' consumer: handoffs go to their senders; dead letters are recorded. A message
/// that could not be handled is retried (the queue's `retry_delay`), up to its `max_retries`.
pub(crate) async fn consume(batch: MessageBatch<String>, env: &Env) {
    let queue = batch.queue();
    for message in batch.iter() {
        let message = match message {
            Ok(message) => message,
            Err(error) => {
                // Not a text message: nothing this Worker sent. Acknowledged so it cannot loop.
                worker::console_error!("queue {queue}: a message that is not text: {error}");
                continue;
            }
        };
        let outcome = match queue.as_str() {
            QUEUE => hand_over(env, message.body(), false).await,
            DEAD_QUEUE => record_dead(env, message.body()).await,
            other => Err(format!("no consumer for queue {other}")),
        };
        match outcome {
            Ok(()) => message.ack(),
            Err(error) => {
                worker::console_error!("queue {queue}: {error}; retried");
                message.retry();
            }
        }
    }
}

/// Hands a handoff to its receiver's sender; `skip`: its events were dead-lettered, only its
/// place in the chain is kept.
async fn hand_over(env: &Env, body: &str, skip: bool) -> Result<(), String> {
    let handoff: Handoff =
        serde_json::from_str(body).map_err(|error| format!("a handoff that does not decode: {error}"))?;
    let namespace = env.durable_object(sender::BINDING).map_err(|error| error.to_string())?;
    let stub = namespace
        .id_from_name(&handoff.receiver)
        .and_then(|id| id.get_stub())
        .map_err(|error| error.to_string())?;
    let accept = serde_json::json!({ "handoff": handoff, "skip": skip }).to_string();
    let mut init = RequestInit::new();
    init.with_method(worker::Method::Post).with_body(Some(JsValue::from_str(&accept)));
    // The URL is the object's own: only its path reaches it.
    let request =
        Request::new_with_init("https://webhook-sender/accept", &init).map_err(|error| error.to_string())?;
    let mut response = stub.fetch_with_request(request).await.map_err(|error| error.to_string())?;
    match response.status_code() {
        200 => Ok(()),
        status => Err(format!(
            "the sender of {} answered {status}: {}",
            handoff.receiver,
            response.text().await.unwrap_or_default()
        )),
    }
}

/// Records a dead letter in D1 (`webhook_dead_letters`), where an operator reads it. A handoff
/// the queue could not hand over also tells its sender to skip its place in the chain, so the
/// receiver's later events go on.
async fn record_dead(env: &Env, body: &str) -> Result<(), String> {
    let dead: Dead =
        serde_json::from_str(body).map_err(|error| format!("a dead letter that does not decode: {error}"))?;
    let store = Store::open(env).ok_or("no INDEX binding: dead letters cannot be recorded")?;
    let now = worker::Date::now().as_millis() / 1_000;
    match dead {
        Dead::Letter(letter) => {
            store
                .record_dead_letters(
                    &letter.receiver,
                    &[letter.event],
                    letter.attempts,
                    &letter.last_error,
                    now,
                )
                .await
                .map_err(|error| error.to_string())?;
        }
        Dead::Handoff(handoff) => {
            let why = "the queue could not hand it to its sender";
            store
                .record_dead_letters(&handoff.receiver, &handoff.events, 0, why, now)
                .await
                .map_err(|error| error.to_string())?;
            worker::console_error!(
                "webhook {}: {} events dead-lettered: {why}",
                handoff.receiver,
                handoff.events.len()
            );
            hand_over(env, body, true).await?;
        }
    }
    Ok(())
}
