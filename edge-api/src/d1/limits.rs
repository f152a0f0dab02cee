//! D1's documented limits (`../shared/PROVIDERS.md`; Cloudflare's "D1 limits" page), checked
//! before a statement reaches D1. Production D1 refuses a string or row over 1,000,000 bytes, a
//! statement over 100,000 bytes or with more than 100 bound parameters, and more queries in one
//! invocation than the plan allows; the local runtime under `wrangler dev` enforces only some of
//! this, so a write that passes locally could stall the index in production. Checked here, on
//! every statement, what production refuses fails locally too, with an error naming the limit.
//! The checks are lengths of what is about to be sent: cheap enough to stay on in production.

use std::cell::Cell;

use wasm_bindgen::JsValue;

use crate::{Error, Result};

/// The longest string or BLOB D1 stores or binds, in bytes.
pub(crate) const MAX_STRING_BYTES: usize = 1_000_000;
/// The largest row D1 stores, in bytes.
pub(crate) const MAX_ROW_BYTES: usize = 1_000_000;
/// The longest SQL text of one statement, in bytes.
pub(crate) const MAX_STATEMENT_BYTES: usize = 100_000;
/// The most bound parameters of one statement.
pub(crate) const MAX_PARAMS: usize = 100;
/// D1 queries one invocation may make on Workers Free when `INDEX_D1_QUERIES` is not set
/// (Workers Paid: 1,000). Each statement of a batch counts.
pub(crate) const DEFAULT_QUERIES_PER_INVOCATION: u32 = 50;

/// A parameter of a statement, checked before it becomes a JavaScript value.
pub(crate) enum Param {
    Text(String),
    /// A whole number (a JavaScript number: exact up to 2^53, which ids, counts, blocks and
    /// times stay far below).
    Number(u64),
    /// A signed number (the compliance cursor starts below every timestamp).
    Signed(i64),
    Null,
}

impl From<&str> for Param {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<String> for Param {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<u64> for Param {
    fn from(number: u64) -> Self {
        Self::Number(number)
    }
}

impl Param {
    fn bytes(&self) -> usize {
        match self {
            Self::Text(text) => text.len(),
            Self::Number(_) | Self::Signed(_) | Self::Null => 8,
        }
    }

    /// The parameter as a JavaScript value, for a statement built in Rust.
    pub(crate) fn into_js(self) -> JsValue {
        match self {
            Self::Text(text) => text.into(),
            Self::Number(number) => JsValue::from_f64(number as f64),
            Self::Signed(number) => JsValue::from_f64(number as f64),
            Self::Null => JsValue::NULL,
        }
    }
}

/// The parameter as JSON, for a statement bound in JavaScript from one JSON text
/// ([`super::ReadSession`]): the value [`Param::into_js`] makes, `JSON.parse`d.
impl serde::Serialize for Param {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Text(text) => serializer.serialize_str(text),
            Self::Number(number) => serializer.serialize_u64(*number),
            Self::Signed(number) => serializer.serialize_i64(*number),
            Self::Null => serializer.serialize_unit(),
        }
    }
}

/// The checks of one invocation: each statement's size and parameters, and the queries made.
pub(crate) struct Limits {
    queries_allowed: u32,
    queries: Cell<u32>,
}

impl Limits {
    pub(crate) fn new(queries_allowed: u32) -> Self {
        Self { queries_allowed, queries: Cell::new(0) }
    }

    /// Checks `sql` and its `params` against D1's limits on statements.
    pub(crate) fn check(&self, sql: &str, params: &[Param]) -> Result<()> {
        let what = || excerpt(sql);
        if sql.len() > MAX_STATEMENT_BYTES {
            return Err(refused(format!(
                "a statement of {} bytes passes D1's {MAX_STATEMENT_BYTES}-byte limit on SQL statements ({})",
                sql.len(),
                what()
            )));
        }
        if params.len() > MAX_PARAMS {
            return Err(refused(format!(
                "{} bound parameters pass D1's limit of {MAX_PARAMS} a statement ({})",
                params.len(),
                what()
            )));
        }
        if let Some(long) = params.iter().map(Param::bytes).find(|&bytes| bytes > MAX_STRING_BYTES) {
            return Err(refused(format!(
                "a bound string of {long} bytes passes D1's {MAX_STRING_BYTES}-byte limit on strings ({})",
                what()
            )));
        }
        Ok(())
    }

    /// Checks that a row of `bytes` (its columns' lengths summed) fits D1's row limit.
    pub(crate) fn check_row(&self, table: &str, key: u64, bytes: usize) -> Result<()> {
        if bytes > MAX_ROW_BYTES {
            return Err(refused(format!(
                "a row of {bytes} bytes in {table} (key {key}) passes D1's {MAX_ROW_BYTES}-byte limit on rows"
            )));
        }
        Ok(())
    }

    /// Counts `count` queries about to be made, refusing those past the invocation's allowance.
    pub(crate) fn spend(&self, count: usize) -> Result<()> {
        let total = self.queries.get().saturating_add(u32::try_from(count).unwrap_or(u32::MAX));
        if total > self.queries_allowed {
            return Err(refused(format!(
                "{total} D1 queries in one invocation pass the plan's {} (INDEX_D1_QUERIES; Workers Free 50, Paid 1,000)",
                self.queries_allowed
            )));
        }
        self.queries.set(total);
        Ok(())
    }

    /// Queries made so far.
    pub(crate) fn spent(&self) -> u32 {
        self.queries.get()
    }
}

fn refused(message: String) -> Error {
    Error::D1Limit(message)
}

/// The start of `sql`, naming the statement in an error.
fn excerpt(sql: &str) -> String {
    let end = sql.char_indices().nth(60).map_or(sql.len(), |(at, _)| at);
    let ellipsis = if end < sql.len() { "…" } else { "" };
    format!("{}{ellipsis}", &sql[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: Result<impl Sized>) -> String {
        match result {
            Err(error) => error.to_string(),
            Ok(_) => panic!("within the limits"),
        }
    }

    #[test]
    fn each_limit_is_named_when_passed() {
        let limits = Limits::new(3);
        let long = "x".repeat(MAX_STRING_BYTES + 1);
        assert!(limits.check("SELECT ?1", &["x".repeat(MAX_STRING_BYTES).into()]).is_ok());
        assert!(message(limits.check("SELECT ?1", &[long.into()])).contains(
            "a bound string of 1000001 bytes passes D1's 1000000-byte limit on strings (SELECT ?1)"
        ));
        let params: Vec<Param> = (0..=MAX_PARAMS as u64).map(Param::from).collect();
        assert!(
            message(limits.check("SELECT 1", &params))
                .contains("101 bound parameters pass D1's limit of 100")
        );
        let sql = format!("SELECT '{}'", "y".repeat(MAX_STATEMENT_BYTES));
        assert!(message(limits.check(&sql, &[])).contains("passes D1's 100000-byte limit on SQL statements"));
        assert!(message(limits.check_row("agents", 7, MAX_ROW_BYTES + 1)).contains("in agents (key 7)"));
        assert!(limits.spend(2).is_ok());
        assert!(limits.spend(1).is_ok());
        assert!(message(limits.spend(1)).contains("4 D1 queries in one invocation pass the plan's 3"));
        assert_eq!(limits.spent(), 3);
    }
}
