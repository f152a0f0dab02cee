//! The index at the chain's pace: a Durable Object ([`IndexPacer`], binding `INDEX_PACER`) runs
//! the index from its alarm every `INDEX_INTERVAL_SECS` (default 2, Base's block time), so a
//! write shows in answers within a block or two of being mined, where a Cron Trigger's runs
//! come once a minute.
//!
//! - **One runner.** A Durable Object runs one event at a time, so runs never overlap, whichever
//!   data centre asked. The object stores nothing but its alarm.
//! - **Bounded as before.** Each alarm is one [`super::run()`], the same bounded step a Cron
//!   Trigger ran. The next alarm is set after it ends, `INDEX_INTERVAL_SECS` after it began. A
//!   run longer than the interval is followed at once, never by two runs at a time.
//! - **A watchdog.** The Cron Trigger ([`watch`]) sets the alarm again when none is set. That
//!   happens on the first deployment, or after an alarm that failed all its retries.
//!   `INDEX_INTERVAL_SECS = "0"` turns the loop off: the Cron Trigger then runs the index itself.

use std::time::Duration;

use worker::{Date, DurableObject, Env, Request, RequestInit, Response, State, durable_object};

use crate::{Error, Result, config::Config};

/// The binding of the pacer's namespace in `wrangler.toml`.
pub(crate) const BINDING: &str = "INDEX_PACER";

/// The one object's name: one index, one runner.
const NAME: &str = "index";

/// The shortest pause between two runs, so a run longer than the interval still leaves the
/// object a moment for the watchdog's calls.
const MIN_PAUSE_MS: u64 = 50;

/// The Cron Trigger's part: with the loop on and the binding present, makes sure the pacer's
/// alarm is set and does no run of its own (the pacer's runs would overlap it); otherwise runs
/// the index once, as before the loop.
pub(crate) async fn watch(env: &Env) {
    let config = Config::from_env(env);
    if config.index.interval_secs == 0 || env.durable_object(BINDING).is_err() {
        super::run(env).await;
        return;
    }
    match arm(env).await {
        Ok(true) => worker::console_log!("index pacer: the alarm was not set; set it"),
        Ok(false) => {}
        Err(error) => {
            // The pacer is unreachable: run once from here, so the index still moves each minute.
            worker::console_error!("index pacer: {error}; running the index from the Cron Trigger");
            super::run(env).await;
        }
    }
}

/// Asks the pacer to set its alarm if none is set: true when it was not set.
async fn arm(env: &Env) -> Result<bool> {
    let stub = env.durable_object(BINDING)?.id_from_name(NAME)?.get_stub()?;
    let mut init = RequestInit::new();
    init.with_method(worker::Method::Post);
    // The URL is the object's own: only its path reaches it.
    let request = Request::new_with_init("https://index-pacer/arm", &init)?;
    let mut response = stub.fetch_with_request(request).await?;
    let text = response.text().await.unwrap_or_default();
    match (response.status_code(), text.as_str()) {
        (200, "armed") => Ok(true),
        (200, "running") => Ok(false),
        (status, text) => {
            Err(Error::Runtime(worker::Error::RustError(format!("the pacer answered {status}: {text}"))))
        }
    }
}

/// The Durable Object that runs the index from its alarm.
#[durable_object(alarm)]
pub struct IndexPacer {
    state: State,
    env: Env,
    /// Whether an alarm's run is under way. While an alarm handler runs, the runtime's
    /// `getAlarm` answers null (no alarm is set until the run sets the next), so a watchdog
    /// call arriving meanwhile would arm a second one and report the loop as stopped.
    running: std::cell::Cell<bool>,
}

impl DurableObject for IndexPacer {
    fn new(state: State, env: Env) -> Self {
        Self { state, env, running: std::cell::Cell::new(false) }
    }

    /// `POST /arm`: sets the alarm now unless one is set or its run is under way ("armed", or
    /// "running").
    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        let storage = self.state.storage();
        if self.running.get() || storage.get_alarm().await?.is_some() {
            return Response::ok("running");
        }
        storage.set_alarm(Duration::ZERO).await?;
        Response::ok("armed")
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let interval_ms = Config::from_env(&self.env).index.interval_secs.saturating_mul(1_000);
        if interval_ms == 0 {
            // Turned off since the alarm was set: the Cron Trigger runs the index again.
            return Response::ok("off");
        }
        let began = Date::now().as_millis();
        self.running.set(true);
        super::run(&self.env).await;
        let took = Date::now().as_millis().saturating_sub(began);
        let pause = interval_ms.saturating_sub(took).max(MIN_PAUSE_MS);
        let next = self.state.storage().set_alarm(Duration::from_millis(pause)).await;
        self.running.set(false);
        next?;
        Response::ok("ran")
    }
}
