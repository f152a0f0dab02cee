//! The Worker's D1 database (the `INDEX` binding), below every feature that keeps rows in it:
//! the index's tables (`index/store.rs`), the change feed's batches (`index/feed.rs`,
//! `index/changes.rs`), the outlets' cursors and the webhooks' dead letters. This layer knows
//! statements, batches and D1's limits, not tables: each feature writes its own SQL through it.
//!
//! Every statement passes [`Limits`] before it reaches D1, and every query is counted against the
//! plan's queries per invocation; the rows D1 reports read and written are summed for the
//! index's log line (what D1 bills).

pub(crate) mod limits;
mod session;

use serde::{Deserialize, Serialize};
use wasm_bindgen::{JsCast, JsValue};
use worker::{
    D1Database, D1PreparedStatement, D1Result, Env,
    js_sys::{Array, Reflect},
    wasm_bindgen_futures::JsFuture,
};

use self::limits::DEFAULT_QUERIES_PER_INVOCATION;
pub(crate) use self::{
    limits::{Limits, Param},
    session::{ReadSession, checked_bookmark},
};
use crate::{Error, Result, per_env::PerEnv};

/// The D1 binding, in `wrangler.toml`.
const BINDING: &str = "INDEX";

/// The most bytes of JSON one chunk's parameter holds: a quarter of D1's limit on strings, so
/// a run's statements stay well under it.
pub(crate) const CHUNK_BYTES: usize = 250_000;

/// The database, with what this invocation has spent of D1's limits and the rows it read and
/// wrote.
pub(crate) struct Store {
    db: D1Database,
    limits: Limits,
    rows_written: std::cell::Cell<u64>,
    rows_read: std::cell::Cell<u64>,
}

impl Store {
    /// The database, or `None` without the `INDEX` binding. `INDEX_D1_QUERIES` is the plan's D1
    /// queries per invocation (Workers Free 50, the default; Paid 1,000). A read-only answer
    /// reads in a session instead ([`ReadSession`]).
    pub(crate) fn open(env: &Env) -> Option<Self> {
        binding(env).map(|(queries, db)| Self {
            db: D1Database::unchecked_from_js(db),
            limits: Limits::new(queries),
            rows_written: 0.into(),
            rows_read: 0.into(),
        })
    }

    /// `sql` with `params` bound, once both pass D1's limits.
    pub(crate) fn statement(&self, sql: &str, params: Vec<Param>) -> Result<D1PreparedStatement> {
        self.limits.check(sql, &params)?;
        let values: Vec<_> = params.into_iter().map(Param::into_js).collect();
        Ok(self.db.prepare(sql).bind(&values)?)
    }

    /// Every row `statement` selects.
    pub(crate) async fn all<T: for<'de> Deserialize<'de>>(
        &self,
        statement: D1PreparedStatement,
    ) -> Result<Vec<T>> {
        self.limits.spend(1)?;
        let result = statement.all().await?;
        let read = result.meta().ok().flatten().and_then(|meta| meta.rows_read).unwrap_or(0);
        self.rows_read.set(self.rows_read.get() + read as u64);
        Ok(result.results()?)
    }

    /// The rows `statement` selects, left as the JavaScript array D1's binding made: for an
    /// answer that goes back to JavaScript whole, where decoding it into Rust would cost more
    /// than the rest of the answer.
    pub(crate) async fn all_in_javascript(&self, statement: D1PreparedStatement) -> Result<Array> {
        self.limits.spend(1)?;
        let result = JsFuture::from(statement.inner().all().map_err(worker::Error::from)?)
            .await
            .map_err(worker::Error::from)?;
        let field = |object: &JsValue, name: &str| Reflect::get(object, &JsValue::from_str(name));
        let read = field(&result, "meta").and_then(|meta| field(&meta, "rows_read"));
        self.rows_read
            .set(self.rows_read.get() + read.ok().and_then(|read| read.as_f64()).unwrap_or(0.0) as u64);
        Ok(field(&result, "results").map_err(worker::Error::from)?.unchecked_into())
    }

    /// Runs `statements` as one batch (one round trip, one transaction), for their results.
    pub(crate) async fn batch(&self, statements: Vec<D1PreparedStatement>) -> Result<Vec<D1Result>> {
        self.limits.spend(statements.len())?;
        Ok(self.db.batch(statements).await?)
    }

    /// Runs `statements` as one transaction, counting the rows D1 reports they wrote.
    pub(crate) async fn commit(&self, statements: Vec<D1PreparedStatement>) -> Result<()> {
        let results = self.batch(statements).await?;
        let written: usize = results
            .iter()
            .filter_map(|result| result.meta().ok().flatten().and_then(|meta| meta.rows_written))
            .sum();
        self.rows_written.set(self.rows_written.get() + written as u64);
        Ok(())
    }

    /// Rows this invocation's reads ([`Store::all`]) read, as D1 reports them for billing.
    pub(crate) fn rows_read(&self) -> u64 {
        self.rows_read.get()
    }

    /// Rows D1 reported written by this invocation's commits (its `meta.rows_written`).
    pub(crate) fn rows_written(&self) -> u64 {
        self.rows_written.get()
    }

    /// D1's limits, as this invocation checks them.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// D1 queries this invocation made.
    pub(crate) fn queries(&self) -> u32 {
        self.limits.spent()
    }
}

/// The plan's D1 queries per invocation (`INDEX_D1_QUERIES`) and the `INDEX` binding (`None`
/// without it), read once per `Env` ([`crate::per_env`]).
fn binding(env: &Env) -> Option<(u32, JsValue)> {
    thread_local! {
        static OPENED: PerEnv<(u32, Option<JsValue>)> = const { PerEnv::new() };
    }
    let (queries, db) = OPENED.with(|opened| {
        opened.get(env, || {
            let queries = env
                .var("INDEX_D1_QUERIES")
                .ok()
                .and_then(|value| value.to_string().trim().parse().ok())
                .unwrap_or(DEFAULT_QUERIES_PER_INVOCATION);
            (queries, env.d1(BINDING).ok().map(JsValue::from))
        })
    });
    Some((queries, db?))
}

/// `value` as one JSON text parameter.
pub(crate) fn json_param<T: Serialize + ?Sized>(value: &T) -> Result<Param> {
    Ok(serde_json::to_string(value).map_err(|error| Error::Runtime(error.into()))?.into())
}

/// `items` as JSON arrays of at most `max` bytes each (an item longer than that alone in its
/// array); none for no items.
pub(crate) fn json_chunks<T: Serialize>(items: &[T], max: usize) -> Result<Vec<String>> {
    let mut chunks = Vec::new();
    let mut chunk = String::from("[");
    for item in items {
        let text = serde_json::to_string(item).map_err(|error| Error::Runtime(error.into()))?;
        if chunk.len() > 1 && chunk.len() + text.len() + 2 > max {
            chunk.push(']');
            chunks.push(std::mem::replace(&mut chunk, String::from("[")));
        }
        if chunk.len() > 1 {
            chunk.push(',');
        }
        chunk.push_str(&text);
    }
    if chunk.len() > 1 {
        chunk.push(']');
        chunks.push(chunk);
    }
    Ok(chunks)
}
