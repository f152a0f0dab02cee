//! Nonces seen once, worldwide (INTERFACE.md section 6): a Durable Object per keyid holds the
//! `(keyid, nonce)` pairs its signatures used, each until the last moment the same signature could
//! pass the time checks again. A Durable Object runs one request at a time, and its SQL storage
//! answers synchronously, so "insert unless present" is one atomic step: of two requests with one
//! nonce, at the same moment from two data centres, exactly one is fresh. KV could not promise
//! that (it is eventually consistent, about 60 s between locations).

use kya_core::erc8128::NonceClaim;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use worker::{
    Date, DurableObject, Env, Method, Request, RequestInit, Response, SqlStorageValue, State, durable_object,
};

use crate::{Error, Result};

/// The binding of the nonce store's namespace in `wrangler.toml`.
pub(crate) const BINDING: &str = "NONCES";

/// What a claim asks of the store: keep `key` until `until` unless it is already kept.
#[derive(Debug, Serialize, Deserialize)]
struct Claim {
    key: String,
    until: u64,
    now: u64,
}

/// What a release asks of the store: forget `key`, which a claim of this request kept.
#[derive(Debug, Serialize, Deserialize)]
struct Release {
    key: String,
}

/// The store's answer.
#[derive(Debug, Serialize, Deserialize)]
struct Claimed {
    fresh: bool,
}

/// Claims `claim`'s nonce at `now`: true when it was fresh (and is now used), false when the
/// store already held it (a replay). The object is the keyid's, so one account's nonces are
/// decided in one place and different accounts never wait on each other.
pub(crate) async fn claim(env: &Env, claim: &NonceClaim, now: u64) -> Result<bool> {
    let body = Claim { key: claim.key.clone(), until: claim.remember_until, now };
    let mut response = ask(env, claim, CLAIM, &body).await?;
    let claimed: Claimed = response.json().await?;
    Ok(claimed.fresh)
}

/// Gives back a nonce this request [`claim`]ed fresh but could not answer for (the signer's
/// standing could not be read): the provider's retry of the same request then passes, once.
pub(crate) async fn release(env: &Env, claim: &NonceClaim) -> Result<()> {
    ask(env, claim, RELEASE, &Release { key: claim.key.clone() }).await.map(drop)
}

/// The store's paths.
const CLAIM: &str = "/claim";
const RELEASE: &str = "/release";

/// POSTs `body` to `path` of `claim`'s keyid's store; its answer, when 200.
async fn ask(env: &Env, claim: &NonceClaim, path: &str, body: &impl Serialize) -> Result<Response> {
    let namespace = env.durable_object(BINDING)?;
    let stub = namespace.id_from_name(&claim.keyid)?.get_stub()?;
    let body = serde_json::to_string(body).map_err(|error| Error::Runtime(error.into()))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(body.into()));
    // The URL is the object's own: only its path reaches it.
    let request = Request::new_with_init(&format!("https://nonces{path}"), &init)?;
    let mut response = stub.fetch_with_request(request).await?;
    if response.status_code() != 200 {
        let text = response.text().await.unwrap_or_default();
        return Err(Error::Runtime(worker::Error::RustError(format!("the nonce store answered: {text}"))));
    }
    Ok(response)
}

/// The Durable Object of one keyid's nonces, in its SQLite storage. A claim forgets what has
/// expired; an alarm at the latest kept moment does the same for a keyid that stops signing, and
/// clears the object's storage once nothing is left to keep.
#[durable_object(alarm)]
pub struct NonceStore {
    state: State,
}

impl DurableObject for NonceStore {
    fn new(state: State, _env: Env) -> Self {
        Self { state }
    }

    async fn fetch(&self, mut request: Request) -> worker::Result<Response> {
        if request.method() != Method::Post {
            return Response::error("POST a claim", 405);
        }
        if request.path() == RELEASE {
            let Ok(release) = request.json::<Release>().await else {
                return Response::error("a release is {key}", 400);
            };
            // Nothing else can have kept the key meanwhile: a claim of it found it kept (ours).
            self.state
                .storage()
                .sql()
                .exec("DELETE FROM nonces WHERE key = ?", vec![SqlStorageValue::from(release.key)])?
                .raw()
                .for_each(drop);
            return Response::ok("");
        }
        let Ok(claim) = request.json::<Claim>().await else {
            return Response::error("a claim is {key, until, now}", 400);
        };
        let sql = self.state.storage().sql();
        sql.exec(
            "CREATE TABLE IF NOT EXISTS nonces (key TEXT PRIMARY KEY, until INTEGER NOT NULL) WITHOUT ROWID",
            None,
        )?
        .raw()
        .for_each(drop);
        sql.exec("CREATE INDEX IF NOT EXISTS nonces_by_until ON nonces (until)", None)?.raw().for_each(drop);
        // Forget what can no longer pass the time checks: the table holds one window's nonces.
        sql.exec("DELETE FROM nonces WHERE until < ?", vec![SqlStorageValue::from(as_i64(claim.now))])?
            .raw()
            .for_each(drop);
        // A cursor runs as it is read, so the inserted row is asked for (`RETURNING`) and read:
        // one row when the key was new, none when it was already kept.
        let inserted: Vec<serde_json::Value> = sql
            .exec(
                "INSERT INTO nonces (key, until) VALUES (?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                vec![SqlStorageValue::from(claim.key), SqlStorageValue::from(as_i64(claim.until))],
            )?
            .to_array()?;
        let fresh = inserted.len() == 1;
        // Decided above, in one synchronous step; the alarm only tidies up afterwards.
        let storage = self.state.storage();
        if fresh && storage.get_alarm().await?.is_none() {
            storage.set_alarm(Duration::from_secs(claim.until.saturating_sub(claim.now) + 1)).await?;
        }
        Response::from_json(&Claimed { fresh })
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let now = Date::now().as_millis() / 1000;
        let storage = self.state.storage();
        let sql = storage.sql();
        sql.exec("DELETE FROM nonces WHERE until < ?", vec![SqlStorageValue::from(as_i64(now))])?
            .raw()
            .for_each(drop);
        #[derive(Deserialize)]
        struct Next {
            until: Option<u64>,
        }
        let next: Vec<Next> = sql.exec("SELECT MIN(until) AS until FROM nonces", None)?.to_array()?;
        match next.first().and_then(|next| next.until) {
            Some(until) => storage.set_alarm(Duration::from_secs(until.saturating_sub(now) + 1)).await?,
            None => storage.delete_all().await?,
        }
        Response::ok("")
    }
}

/// SQLite integers are signed: times beyond `i64` (which no valid signature has) saturate.
fn as_i64(seconds: u64) -> i64 {
    i64::try_from(seconds).unwrap_or(i64::MAX)
}
