//! Signed webhooks: the delivery task that POSTs the outbox's events (written by the store with
//! each change of a relay, `store/outbox.rs`) to `WEBHOOK_URL`, signed as Standard Webhooks
//! signs (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`), by
//! `kya_core::standard_webhooks`, which the registry's change feed signs with too.
//!
//! At least once, in order per relay: the store hands out only each relay's oldest undelivered
//! event, under a lease; a 2xx marks it delivered, anything else makes it due again after an
//! exponential pause with jitter, capped. Redirects are not followed: a 3xx is a failed attempt
//! (retried as a 5xx is) whose error names where it pointed, so a receiver moved elsewhere is
//! seen in the log and no signed event is handed to a host the configuration does not name. At
//! most `WEBHOOK_CONCURRENCY` attempts run at once,
//! each within `WEBHOOK_TIMEOUT_SECS`. What is not delivered stays in the outbox, which the next
//! start reads again.

use std::{sync::Arc, time::Duration};

use kya_core::standard_webhooks::signature;

use crate::{config::WebhookConfig, relayer::Relayer, store::DueEvent, time};

/// Longest pause between two looks at the outbox when nothing wakes the task earlier (a new
/// event does at once): how late a retry that came due, or an expired lease, is seen.
const POLL: Duration = Duration::from_millis(250);
/// What a lease adds to the attempt's timeout: time to record the attempt's outcome.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// The pause after the `attempts`-th failed attempt: `first` doubled per earlier failure, at
/// most `max`, then jittered into its upper half by `jitter` (0 to 1), so that events that
/// failed together (a receiver that went down) do not all come back in the same instant.
pub(crate) fn backoff(attempts: u32, first: Duration, max: Duration, jitter: f64) -> Duration {
    let doublings = attempts.saturating_sub(1).min(32);
    let pause = first.saturating_mul(1u32 << doublings.min(31)).min(max);
    pause / 2 + pause.mul_f64(jitter.clamp(0.0, 1.0)) / 2
}

/// A number from 0 to 1 for the jitter: std's randomly keyed hasher, so no RNG crate is needed
/// for a pause.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    (random >> 11) as f64 / (1u64 << 53) as f64
}

/// Unix milliseconds now.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
}

/// A 3xx answer as an attempt's error: the status and its `Location`, shown without user info,
/// path or query when absolute (it may carry a token, as the receiver's own URL may), and
/// without its query when relative.
fn redirect_error(status: u16, location: Option<&str>) -> String {
    let shown = match location.map(str::trim) {
        None | Some("") => "no Location".to_owned(),
        Some(location) if location.contains("://") => kya_core::chain::redact::url(location),
        Some(location) => {
            let path = location.split(['?', '#']).next().unwrap_or_default();
            if location.len() > path.len() { format!("{path}?…") } else { path.to_owned() }
        }
    };
    format!("HTTP {status} redirect to {shown} (redirects are not followed: set WEBHOOK_URL to the target)")
}

/// The HTTP client's error without the URL (a receiver's URL may carry a token), kept short.
fn describe(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    // Only the innermost cause: reqwest's own text quotes the URL.
    match kya_native_http::root_cause(error) {
        Some(detail) if !detail.is_empty() => format!("{kind}: {detail}"),
        _ => kind.to_owned(),
    }
}

impl Relayer {
    /// Starts the delivery task, if webhooks are configured.
    pub(crate) fn spawn_webhooks(self: &Arc<Self>) {
        let Some(config) = self.config.webhook.clone() else { return };
        let relayer = Arc::clone(self);
        self.shutdown.spawn_background(async move { relayer.deliver_events(config).await });
    }

    /// Claims due events (up to the free places) and delivers each in a task of its own, until
    /// shutdown; then lets the attempts under way finish within the grace, and gives back the
    /// leases of those cut short.
    async fn deliver_events(self: Arc<Self>, config: WebhookConfig) {
        let owner = format!("{}-{:016x}", std::process::id(), (jitter() * (1u64 << 53) as f64) as u64);
        // reqwest panics building a client before a TLS crypto provider is installed.
        kya_native_http::install_crypto_provider();
        let http = match reqwest::Client::builder()
            .timeout(config.timeout)
            // A redirect is the receiver's answer, not an instruction: see the module's doc.
            .redirect(reqwest::redirect::Policy::none())
            .build()
        {
            Ok(http) => http,
            Err(error) => {
                tracing::error!(error = %describe(&error), "cannot build the webhook client; no webhooks");
                return;
            }
        };
        let lease_ms = u64::try_from((config.timeout * 2 + LEASE_MARGIN).as_millis()).unwrap_or(u64::MAX);
        let config = Arc::new(config);
        let mut in_flight = tokio::task::JoinSet::new();
        tracing::info!(url = %kya_core::chain::redact::url(config.url.as_str()), "delivering relay events");
        loop {
            let free = config.concurrency.saturating_sub(in_flight.len());
            if free > 0 {
                let (claimer, now) = (owner.clone(), now_ms());
                match self.stores.db(move |store| store.claim_events(&claimer, free, now, lease_ms)).await {
                    Ok(due) => {
                        for event in due {
                            let attempt = Arc::clone(&self).attempt(
                                http.clone(),
                                Arc::clone(&config),
                                owner.clone(),
                                event,
                            );
                            in_flight.spawn(attempt);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(error = %error.detail(), "reading the webhook outbox failed")
                    }
                }
            }
            tokio::select! {
                () = self.shutdown.begun() => break,
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                () = self.stores.requests().event_written() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
        tokio::select! {
            () = async { while in_flight.join_next().await.is_some() {} } => {}
            () = self.shutdown.grace_over() => {
                in_flight.abort_all();
                while in_flight.join_next().await.is_some() {}
            }
        }
        match self.stores.db(move |store| store.release_events(&owner)).await {
            Ok(0) => {}
            Ok(released) => {
                tracing::info!(released, "webhook attempts cut short by shutdown; due again at start")
            }
            Err(error) => {
                tracing::warn!(error = %error.detail(), "releasing webhook leases failed; they expire")
            }
        }
    }

    /// One attempt at one event: signed now, POSTed, and its outcome recorded.
    async fn attempt(
        self: Arc<Self>,
        http: reqwest::Client,
        config: Arc<WebhookConfig>,
        owner: String,
        event: DueEvent,
    ) {
        let timestamp = time::now();
        let signature = signature(config.secret.bytes(), &event.event_id, timestamp, &event.body);
        let sent = http
            .post(config.url.as_str())
            .header("content-type", "application/json")
            .header("user-agent", concat!("kya-relayer/", env!("CARGO_PKG_VERSION")))
            .header("webhook-id", &event.event_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(event.body.clone())
            .send()
            .await;
        let failure = match sent {
            Ok(answer) if answer.status().is_success() => None,
            Ok(answer) if answer.status().is_redirection() => Some(redirect_error(
                answer.status().as_u16(),
                answer.headers().get(reqwest::header::LOCATION).and_then(|value| value.to_str().ok()),
            )),
            Ok(answer) => Some(format!("HTTP {}", answer.status().as_u16())),
            Err(error) => Some(describe(&error)),
        };
        let seq = event.seq;
        let recorded = match &failure {
            None => {
                self.metrics.webhook_delivered();
                tracing::debug!(relay = %event.relay_id, event = %event.event_id, kind = %event.event_type, "webhook delivered");
                let now = now_ms();
                self.stores.db(move |store| store.event_delivered(seq, now)).await
            }
            Some(error) => {
                self.metrics.webhook_failed();
                let pause = backoff(event.attempts, config.retry_first, config.retry_max, jitter());
                tracing::warn!(
                    relay = %event.relay_id,
                    event = %event.event_id,
                    kind = %event.event_type,
                    attempt = event.attempts,
                    %error,
                    retry_in = ?pause,
                    "webhook delivery failed"
                );
                let (error, retry_at) = (error.clone(), now_ms().saturating_add(pause.as_millis() as u64));
                self.stores.db(move |store| store.event_failed(seq, &owner, retry_at, &error)).await
            }
        };
        if let Err(error) = recorded {
            // The lease runs out and the event is claimed again: at least once, never lost.
            tracing::warn!(event = %event.event_id, error = %error.detail(), "recording a webhook attempt failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_names_its_location_without_tokens() {
        assert_eq!(
            redirect_error(301, Some("https://elsewhere.example/hooks?token=SECRET")),
            "HTTP 301 redirect to https://elsewhere.example/… (redirects are not followed: set WEBHOOK_URL to the target)"
        );
        assert!(
            redirect_error(307, Some("/moved?token=SECRET")).starts_with("HTTP 307 redirect to /moved?… ")
        );
        assert!(redirect_error(308, Some("/moved")).starts_with("HTTP 308 redirect to /moved "));
        assert!(redirect_error(302, None).starts_with("HTTP 302 redirect to no Location "));
    }

    #[test]
    fn pauses_double_up_to_the_cap_and_jitter_within_their_upper_half() {
        let (first, max) = (Duration::from_millis(100), Duration::from_secs(1));
        let exact: Vec<_> = (1..=6).map(|n| backoff(n, first, max, 1.0).as_millis()).collect();
        assert_eq!(exact, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(backoff(3, first, max, 0.0), Duration::from_millis(200));
        assert_eq!(backoff(u32::MAX, first, max, 1.0), max, "no overflow past the cap");
        for _ in 0..100 {
            let random = jitter();
            assert!((0.0..1.0).contains(&random), "{random}");
        }
    }
}
