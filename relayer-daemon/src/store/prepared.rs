//! PostgreSQL batches of statements prepared once per connection.
//!
//! The store sends a write's statements to PostgreSQL as one batch (one round trip: `BEGIN`, the
//! locks, the reads or writes, `COMMIT`), which goes by the simple protocol and so takes no
//! parameters. Written with their values in the text, every statement of a batch would be
//! parsed and planned again at every call: the cluster bench's statement counts
//! (`BENCH_CLUSTER_PG_STATEMENTS`) put planning alone at about a quarter of the server's CPU per
//! relay, most of it the few long statements of a reservation, a send's record and the rate
//! windows. So a batch's statements are SQL `PREPARE`d on the connection the first time it
//! sends them (a round trip of its own, once per connection and statement) and sent as
//! `EXECUTE name(values)`: the server parses and plans the statement once, and each call binds
//! its values (the plan cache then keeps a generic plan, or plans for the values when that is
//! cheaper, as for the driver's own prepared statements).
//!
//! A `PREPARE` is not undone by a rollback, so the names recorded stay valid for the life of
//! the connection, whatever its transactions do.

use std::collections::HashMap;

use super::statement::{Lock, Value, placeholders};
use crate::error::{Error, Result};

/// A statement of a batch with its values: the store's SQL (`?1` placeholders) and one value
/// per placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bound {
    sql: String,
    args: Vec<Value>,
}

/// `sql` (with `?1` … placeholders) bound to `args`, for a batch. Every placeholder must have a
/// value and every value a placeholder: checked here, before anything is sent.
pub(crate) fn bind(sql: &str, args: &[Value]) -> Result<Bound> {
    let highest = placeholder_numbers(sql).max().unwrap_or(0);
    if placeholder_numbers(sql).any(|number| number == 0) || highest != args.len() {
        return Err(Error::Internal(format!(
            "a batch statement with placeholders up to ?{highest} bound to {} values",
            args.len()
        )));
    }
    Ok(Bound { sql: sql.to_owned(), args: args.to_vec() })
}

/// The numbers of the `?N` placeholders in `sql`, in order (the store's SQL has no `?` inside a
/// string literal).
fn placeholder_numbers(sql: &str) -> impl Iterator<Item = usize> + '_ {
    let bytes = sql.as_bytes();
    (0..bytes.len()).filter(|&at| bytes[at] == b'?').filter_map(move |at| {
        let digits: &str = &sql[at + 1..];
        let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
        (end > 0).then(|| digits[..end].parse().unwrap_or(usize::MAX))
    })
}

/// The statement that takes `lock` (its rows say nothing: it is run for the lock it takes), or
/// `None` for [`Lock::Rows`].
pub(crate) fn lock_statement(lock: &Lock) -> Option<Bound> {
    let (sql, args): (&str, Vec<Value>) = match lock {
        Lock::Budget => ("SELECT id FROM budget WHERE id = 1 FOR UPDATE", vec![]),
        Lock::Key(key) => ("SELECT pg_advisory_xact_lock(hashtextextended(?1, 0))", vec![Value::from(key)]),
        Lock::Relay(id) => ("SELECT id FROM relays WHERE id = ?1 FOR UPDATE", vec![Value::from(*id)]),
        Lock::Lane(address) => {
            ("SELECT address FROM lanes WHERE address = ?1 FOR UPDATE", vec![Value::from(address)])
        }
        Lock::Rows => return None,
    };
    Some(Bound { sql: sql.to_owned(), args })
}

/// The statements one connection has prepared, by their SQL.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    names: HashMap<String, String>,
}

impl Prepared {
    /// `bound` as the text of a batch: `EXECUTE` of its prepared statement with its values.
    /// `prepare` runs a `PREPARE` on the connection, when this connection has not yet prepared
    /// the statement; it is recorded once that succeeded.
    pub(crate) fn execute_text(
        &mut self,
        bound: &Bound,
        prepare: impl FnOnce(&str) -> Result<()>,
    ) -> Result<String> {
        let name = match self.names.get(&bound.sql) {
            Some(name) => name.clone(),
            None => {
                let name = format!("kya_batch_{}", self.names.len());
                prepare(&format!("PREPARE {name} AS {}", placeholders(&bound.sql)))?;
                self.names.insert(bound.sql.clone(), name.clone());
                name
            }
        };
        Ok(execute(&name, &bound.args))
    }
}

/// `EXECUTE name(values)`, the values written as literals (a batch takes no parameters).
fn execute(name: &str, args: &[Value]) -> String {
    if args.is_empty() {
        return format!("EXECUTE {name}");
    }
    let values: Vec<String> = args.iter().map(literal).collect();
    format!("EXECUTE {name}({})", values.join(", "))
}

/// A value as an SQL literal: an integer as a number, text quoted with its quotes doubled
/// (PostgreSQL's standard strings, which every connection sets), `NULL`. A quoted literal is of
/// no type until `EXECUTE` gives it its parameter's, as a value bound by the driver is.
fn literal(value: &Value) -> String {
    match value {
        Value::Int(Some(value)) => value.to_string(),
        Value::Text(Some(text)) => format!("'{}'", text.replace('\'', "''")),
        Value::Int(None) | Value::Text(None) => "NULL".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::args;

    #[test]
    fn a_statement_is_prepared_once_then_executed_with_its_values_as_literals() {
        let mut prepared = Prepared::default();
        let mut sent = Vec::new();
        let bound = bind(
            "SELECT a FROM t WHERE a = ?1 AND b = ?2 AND c IS ?3 AND e = '?'",
            args![7, "o'k", None::<&str>],
        )
        .unwrap();
        let first = prepared
            .execute_text(&bound, |sql| {
                sent.push(sql.to_owned());
                Ok(())
            })
            .unwrap();
        let again = prepared
            .execute_text(&bind(&bound.sql, args![-12, "x", "y"]).unwrap(), |_| panic!("prepared already"))
            .unwrap();
        assert_eq!(
            sent,
            ["PREPARE kya_batch_0 AS SELECT a FROM t WHERE a = $1 AND b = $2 AND c IS $3 AND e = '?'"]
        );
        assert_eq!(first, "EXECUTE kya_batch_0(7, 'o''k', NULL)");
        assert_eq!(again, "EXECUTE kya_batch_0(-12, 'x', 'y')");
        let other = prepared.execute_text(&lock_statement(&Lock::Budget).unwrap(), |_| Ok(())).unwrap();
        assert_eq!(other, "EXECUTE kya_batch_1");
    }

    #[test]
    fn a_failed_prepare_is_not_recorded() {
        let mut prepared = Prepared::default();
        let bound = bind("SELECT ?1", args![1]).unwrap();
        let failed = prepared.execute_text(&bound, |_| Err(Error::Store("refused".into())));
        assert!(matches!(failed, Err(Error::Store(_))));
        let mut sent = 0;
        prepared
            .execute_text(&bound, |_| {
                sent += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(sent, 1, "prepared again after the failure");
    }

    #[test]
    fn every_placeholder_needs_a_value_and_every_value_a_placeholder() {
        assert!(bind("a = ?1 AND b = ?12", &vec![Value::from(1); 12]).is_ok());
        assert!(matches!(bind("a = ?2", args![1]), Err(Error::Internal(_))));
        assert!(matches!(bind("a = ?0", args![1]), Err(Error::Internal(_))));
        assert!(matches!(bind("a = ?1", args![1, 2]), Err(Error::Internal(_))));
        assert!(bind("a = '?'", &[]).is_ok());
    }

    #[test]
    fn the_locks_statements_bind_their_keys() {
        assert_eq!(lock_statement(&Lock::Rows), None);
        let lane = lock_statement(&Lock::Lane("0xab".into())).unwrap();
        assert_eq!(lane.args, args!["0xab"]);
        assert_eq!(lock_statement(&Lock::Relay(7)).unwrap().args, args![7]);
        let key = lock_statement(&Lock::Key("rate:ip:o'k".into())).unwrap();
        assert_eq!(execute("k", &key.args), "EXECUTE k('rate:ip:o''k')");
    }
}
