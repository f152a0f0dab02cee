//! One query layer over both engines: the store's SQL is written once (SQLite's `?1`
//! placeholders, read as `$1` on PostgreSQL), its values are 64-bit integers and text on both,
//! and rows come back owned, read by column index as on either driver.
//!
//! A write goes through [`Connection::transaction`], named with the [`Lock`] it needs. SQLite
//! takes its one database write lock (`BEGIN IMMEDIATE`) whatever the lock; PostgreSQL takes
//! just that lock, so several daemons on one database stay exact where one daemon on SQLite is.
//!
//! Over 500 lines with its tests: the code is 508 lines (the connection, its transactions and
//! its rows, each for both engines), and its tests follow it.

use std::collections::HashMap;

use postgres::types::ToSql;

pub(crate) use super::statement::{Lock, Value};
use super::{
    deadline::Call,
    prepared::{Bound, Prepared, lock_statement},
    statement::placeholders,
};
use crate::error::{Error, Result};

/// The placeholders' values of one statement: `args![a, b]`.
macro_rules! args {
    ($($value:expr),* $(,)?) => {
        &[$($crate::store::sql::Value::from($value)),*] as &[$crate::store::sql::Value]
    };
}
pub(crate) use args;

/// A column's value as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cell {
    Null,
    Int(i64),
    Text(String),
}

/// One row, owned: its cells in the order of the query's columns.
#[derive(Debug, Clone)]
pub(crate) struct Row(Vec<Cell>);

impl Row {
    /// Column `index` as `T`; a column of another type is a damaged store.
    pub(crate) fn get<T: FromCell>(&self, index: usize) -> Result<T> {
        let cell = self.0.get(index).unwrap_or(&Cell::Null);
        T::from_cell(cell)
            .ok_or_else(|| Error::StoreCorrupt(format!("column {index} holds {cell:?}, not {}", T::WHAT)))
    }
}

/// A Rust type a cell reads as.
pub(crate) trait FromCell: Sized {
    /// Named in the error of a cell that does not read.
    const WHAT: &'static str;
    fn from_cell(cell: &Cell) -> Option<Self>;
}

impl FromCell for i64 {
    const WHAT: &'static str = "an integer";
    fn from_cell(cell: &Cell) -> Option<Self> {
        match cell {
            Cell::Int(value) => Some(*value),
            _ => None,
        }
    }
}

impl FromCell for u32 {
    const WHAT: &'static str = "a count";
    fn from_cell(cell: &Cell) -> Option<Self> {
        i64::from_cell(cell).and_then(|value| u32::try_from(value).ok())
    }
}

impl FromCell for String {
    const WHAT: &'static str = "text";
    fn from_cell(cell: &Cell) -> Option<Self> {
        match cell {
            Cell::Text(value) => Some(value.clone()),
            _ => None,
        }
    }
}

impl<T: FromCell> FromCell for Option<T> {
    const WHAT: &'static str = T::WHAT;
    fn from_cell(cell: &Cell) -> Option<Self> {
        match cell {
            Cell::Null => Some(None),
            cell => T::from_cell(cell).map(Some),
        }
    }
}

/// Statements the store runs: on a connection (each its own transaction) or in a
/// [`Transaction`].
pub(crate) trait Sql {
    /// Runs `sql` with `args`; returns the number of rows it changed.
    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<usize>;
    /// The rows `sql` returns.
    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>>;

    /// The first row `sql` returns, if any.
    fn query_opt(&mut self, sql: &str, args: &[Value]) -> Result<Option<Row>> {
        Ok(self.query(sql, args)?.into_iter().next())
    }

    /// The row `sql` returns; none is an error (an id that is not in the store).
    fn query_one(&mut self, sql: &str, args: &[Value]) -> Result<Row> {
        self.query_opt(sql, args)?.ok_or_else(|| Error::Store("no row where one was expected".into()))
    }
}

/// One connection of the store, to either engine.
pub(crate) enum Connection {
    Sqlite(rusqlite::Connection),
    // Boxed: one per store, and the client with its runtime is three times SQLite's handle.
    Postgres(Box<PgConnection>),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Sqlite(_) => "Connection::Sqlite",
            Self::Postgres(_) => "Connection::Postgres",
        })
    }
}

/// A PostgreSQL client with its prepared statements: each statement of the store is parsed
/// once per connection, not at every call (which would double the round trips).
pub(crate) struct PgConnection {
    /// Always `Some` but while dropping (see [`Drop`]).
    client: Option<postgres::Client>,
    statements: HashMap<String, postgres::Statement>,
    /// The batches' statements it has prepared with SQL's `PREPARE` (see `super::prepared`).
    prepared: Prepared,
    /// The store call it serves now: once that is abandoned (past its deadline), nothing more
    /// is sent on it ([`PgConnection::live`]) and it leaves the pool.
    call: Call,
}

impl PgConnection {
    pub(super) fn new(client: postgres::Client) -> Self {
        Self {
            client: Some(client),
            statements: HashMap::new(),
            prepared: Prepared::default(),
            call: Call::default(),
        }
    }

    /// The client, for what is not a store call's (start-up's migrations, the hand-off
    /// listener, a rollback).
    pub(super) fn client(&mut self) -> &mut postgres::Client {
        self.client.as_mut().expect("the client is only taken when dropped")
    }

    /// The client, for a round trip of the call it serves: refused once that call was abandoned,
    /// so a server that resumes after the daemon stopped waiting gets no further statement and
    /// no `COMMIT` of it.
    fn live(&mut self) -> Result<&mut postgres::Client> {
        if self.call.is_abandoned() {
            return Err(Call::refused());
        }
        Ok(self.client())
    }

    /// From now on it serves `call`.
    pub(super) fn serve(&mut self, call: Call) {
        self.call = call;
    }

    /// Whether the server closed the connection.
    pub(super) fn is_closed(&self) -> bool {
        self.client.as_ref().is_none_or(postgres::Client::is_closed)
    }

    /// Whether the call it serves was abandoned: the server did not answer it in time, and may
    /// still be working on it (or stopped), so the connection is not handed out again.
    pub(super) fn is_abandoned(&self) -> bool {
        self.call.is_abandoned()
    }

    fn statement(&mut self, sql: &str) -> Result<postgres::Statement> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.live()?.prepare(&placeholders(sql))?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// `bound` as a batch's text, `EXECUTE` of a statement prepared on this connection (the
    /// `PREPARE` sent first, in a round trip of its own, if this is its first use here).
    fn executable(&mut self, bound: &Bound) -> Result<String> {
        // Taken out for the call, so that the `PREPARE` goes through `live` like every round trip.
        let mut prepared = std::mem::take(&mut self.prepared);
        let text = prepared.execute_text(bound, |prepare| Ok(self.live()?.batch_execute(prepare)?));
        self.prepared = prepared;
        text
    }

    /// After `error`: if the server no longer knows a statement this connection prepared (its
    /// session was reset behind the daemon's back), every statement, the driver's and the
    /// batches', is prepared again on its next use.
    fn forget_lost_statements(&mut self, error: &postgres::Error) {
        if error.code() == Some(&postgres::error::SqlState::INVALID_SQL_STATEMENT_NAME) {
            self.statements.clear();
            self.prepared = Prepared::default();
        }
    }

    /// `BEGIN` and the statements that take `locks`, in their order, then `statements`, as the
    /// text of one batch.
    fn batch_text(&mut self, locks: &[Lock], statements: &[Bound]) -> Result<String> {
        let mut batch = String::from("BEGIN");
        for lock in locks.iter().filter_map(lock_statement) {
            batch.push_str("; ");
            batch.push_str(&self.executable(&lock)?);
        }
        for statement in statements {
            batch.push_str("; ");
            batch.push_str(&self.executable(statement)?);
        }
        Ok(batch)
    }
}

impl Drop for PgConnection {
    /// The client says goodbye to the server and drops its runtime, both blocking: on a thread
    /// of its own when the store is dropped on an async one (a test's body, the daemon's exit).
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::spawn(move || drop(client)).join();
            } else {
                drop(client);
            }
        }
    }
}

impl Connection {
    /// Begins a write transaction holding `locks`, taken in their order (always the budget's
    /// before a relay's, and a lane's last, so two writers never wait on each other). It rolls back when dropped
    /// uncommitted, so an early return (a refusal, an error) leaves nothing behind.
    pub(crate) fn transaction(&mut self, locks: &[Lock]) -> Result<Transaction<'_>> {
        match self {
            // The database's one write lock, taken now rather than at the first write, so a
            // read-then-write cannot meet a writer in between.
            Self::Sqlite(connection) => connection.execute_batch("BEGIN IMMEDIATE")?,
            // READ COMMITTED (the default): each statement sees every transaction committed
            // before it, so once the lock is held the checks read what the lock's last holder
            // wrote. REPEATABLE READ would read a snapshot older than the lock. `BEGIN` and the
            // locks go in one round trip (a lock's rows say nothing: it is run for the lock it
            // takes); a lock not granted in time rolls the transaction back.
            Self::Postgres(connection) => {
                let begin = connection.batch_text(locks, &[])?;
                let client = connection.live()?;
                if let Err(error) = client.batch_execute(&begin) {
                    let _ = client.batch_execute("ROLLBACK");
                    return Err(error.into());
                }
            }
        }
        Ok(Transaction { connection: self, done: false })
    }
}

impl Connection {
    /// Whether this is a PostgreSQL connection (one whose round trips to a server are worth
    /// batching: [`Connection::transaction_reading`], [`Transaction::commit_after`]).
    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self, Self::Postgres(_))
    }

    /// PostgreSQL only: [`Connection::transaction`], with `reads` run in the same round trip
    /// right after the locks are granted. Each statement of a batch reads what was committed
    /// before it ran (READ COMMITTED), so the reads see what the locks' last holder wrote, as
    /// statements sent after the batch would. Returns the rows of each read, every cell as text.
    pub(crate) fn transaction_reading(
        &mut self,
        locks: &[Lock],
        reads: &[Bound],
    ) -> Result<(Transaction<'_>, Vec<TextRows>)> {
        let read = self.batch(locks, reads, false)?;
        Ok((Transaction { connection: self, done: false }, read))
    }

    /// PostgreSQL only: a whole transaction in one round trip, `BEGIN`, the statements taking
    /// `locks`, `statements` and `COMMIT` as one batch, for a
    /// write whose conditions are in its own SQL (a statement that finds nothing to change
    /// changes nothing). A statement that fails runs nothing after it, and the transaction is
    /// rolled back. Returns the rows of each of `statements`.
    pub(crate) fn transaction_at_once(
        &mut self,
        locks: &[Lock],
        statements: &[Bound],
    ) -> Result<Vec<TextRows>> {
        self.batch(locks, statements, true)
    }

    /// `BEGIN`, the statements taking `locks`, `statements`, and `COMMIT` if `commit`, sent as
    /// one batch; the rows of each of `statements`. A statement that fails runs nothing after
    /// it, and the transaction is rolled back.
    fn batch(&mut self, locks: &[Lock], statements: &[Bound], commit: bool) -> Result<Vec<TextRows>> {
        let Self::Postgres(connection) = self else {
            return Err(Error::Internal("a batched transaction on SQLite".into()));
        };
        let mut batch = connection.batch_text(locks, statements)?;
        if commit {
            batch.push_str("; COMMIT");
        }
        let outcome = connection.live()?.simple_query(&batch);
        let mut results = match outcome {
            Ok(messages) => by_statement(messages),
            Err(error) => {
                connection.forget_lost_statements(&error);
                let _ = connection.client().batch_execute("ROLLBACK");
                return Err(error.into());
            }
        };
        if commit {
            results.pop();
        }
        // Before `statements`' results are BEGIN's and the locks'.
        Ok(results.split_off(results.len().saturating_sub(statements.len())))
    }
}

/// Rows read through PostgreSQL's simple protocol: every cell as text (`None`: NULL).
pub(crate) type TextRows = Vec<Vec<Option<String>>>;

/// The rows of each statement of a batch, in order.
fn by_statement(messages: Vec<postgres::SimpleQueryMessage>) -> Vec<TextRows> {
    let (mut statements, mut rows) = (Vec::new(), Vec::new());
    for message in messages {
        match message {
            postgres::SimpleQueryMessage::Row(row) => {
                rows.push((0..row.len()).map(|index| row.get(index).map(str::to_owned)).collect());
            }
            postgres::SimpleQueryMessage::CommandComplete(_) => statements.push(std::mem::take(&mut rows)),
            _ => {}
        }
    }
    statements
}

impl Sql for Connection {
    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<usize> {
        match self {
            Self::Sqlite(connection) => {
                Ok(connection.prepare_cached(sql)?.execute(rusqlite::params_from_iter(args))?)
            }
            Self::Postgres(connection) => {
                let statement = connection.statement(sql)?;
                let outcome = connection.live()?.execute(&statement, &pg_args(args));
                let changed = outcome.inspect_err(|error| connection.forget_lost_statements(error))?;
                Ok(usize::try_from(changed).unwrap_or(usize::MAX))
            }
        }
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>> {
        match self {
            Self::Sqlite(connection) => {
                let mut statement = connection.prepare_cached(sql)?;
                let columns = statement.column_count();
                let mut rows = statement.query(rusqlite::params_from_iter(args))?;
                let mut read = Vec::new();
                while let Some(row) = rows.next()? {
                    read.push(Row((0..columns)
                        .map(|index| sqlite_cell(row, index))
                        .collect::<Result<_>>()?));
                }
                Ok(read)
            }
            Self::Postgres(connection) => {
                let statement = connection.statement(sql)?;
                let outcome = connection.live()?.query(&statement, &pg_args(args));
                outcome
                    .inspect_err(|error| connection.forget_lost_statements(error))?
                    .iter()
                    .map(|row| {
                        (0..row.len()).map(|index| pg_cell(row, index)).collect::<Result<_>>().map(Row)
                    })
                    .collect()
            }
        }
    }
}

/// A write transaction (see [`Connection::transaction`]).
pub(crate) struct Transaction<'c> {
    connection: &'c mut Connection,
    done: bool,
}

impl Transaction<'_> {
    /// Commits: durable before this returns (SQLite's `synchronous=FULL`, PostgreSQL's
    /// `synchronous_commit=on`), so an answer given after it survives a crash.
    pub(crate) fn commit(mut self) -> Result<()> {
        // An abandoned call's transaction is rolled back (when dropped), not committed.
        if let Connection::Postgres(connection) = &mut *self.connection {
            connection.live()?;
        }
        self.done = true;
        match self.connection {
            Connection::Sqlite(connection) => connection.execute_batch("COMMIT")?,
            Connection::Postgres(connection) => connection.live()?.batch_execute("COMMIT")?,
        }
        Ok(())
    }
}

impl Transaction<'_> {
    /// Whether the transaction is on PostgreSQL ([`Connection::is_postgres`]).
    pub(crate) fn is_postgres(&self) -> bool {
        self.connection.is_postgres()
    }

    /// PostgreSQL only: runs `writes` and commits, in one round trip. Returns the rows of each
    /// statement of `writes`. A failed statement runs nothing after it, and the transaction
    /// rolls back when dropped.
    pub(crate) fn commit_after(mut self, writes: &[Bound]) -> Result<Vec<TextRows>> {
        let Connection::Postgres(connection) = &mut *self.connection else {
            return Err(Error::Internal("a batched commit on SQLite".into()));
        };
        let mut batch = String::new();
        for write in writes {
            batch.push_str(&connection.executable(write)?);
            batch.push_str("; ");
        }
        batch.push_str("COMMIT");
        let outcome = connection.live()?.simple_query(&batch);
        let mut results =
            by_statement(outcome.inspect_err(|error| connection.forget_lost_statements(error))?);
        self.done = true;
        results.pop();
        Ok(results)
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Nothing to report to: the transaction's work is undone either way (a failed
            // rollback means a broken connection, whose transaction the server drops).
            let _ = match self.connection {
                Connection::Sqlite(connection) => connection.execute_batch("ROLLBACK").map_err(Error::from),
                Connection::Postgres(connection) => {
                    connection.client().batch_execute("ROLLBACK").map_err(Error::from)
                }
            };
        }
    }
}

impl Sql for Transaction<'_> {
    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<usize> {
        self.connection.execute(sql, args)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>> {
        self.connection.query(sql, args)
    }
}

fn pg_args(args: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    args.iter()
        .map(|value| match value {
            Value::Int(value) => value as &(dyn ToSql + Sync),
            Value::Text(value) => value as &(dyn ToSql + Sync),
        })
        .collect()
}

fn sqlite_cell(row: &rusqlite::Row<'_>, index: usize) -> Result<Cell> {
    use rusqlite::types::ValueRef;
    Ok(match row.get_ref(index)? {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(value) => Cell::Int(value),
        ValueRef::Text(text) => Cell::Text(
            String::from_utf8(text.to_vec())
                .map_err(|_| Error::StoreCorrupt(format!("column {index} is not UTF-8")))?,
        ),
        other => return Err(Error::StoreCorrupt(format!("column {index} holds a {:?}", other.data_type()))),
    })
}

fn pg_cell(row: &postgres::Row, index: usize) -> Result<Cell> {
    use postgres::types::Type;
    let ty = row.columns()[index].type_().clone();
    let cell = if ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(index)?.map(Cell::Int)
    } else if ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(index)?.map(|value| Cell::Int(value.into()))
    } else if ty == Type::TEXT || ty == Type::VARCHAR {
        row.try_get::<_, Option<String>>(index)?.map(Cell::Text)
    } else {
        return Err(Error::StoreCorrupt(format!("column {index} is of type {ty}")));
    };
    Ok(cell.unwrap_or(Cell::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_read_as_their_type_and_refuse_another() {
        let row = Row(vec![Cell::Int(7), Cell::Text("x".into()), Cell::Null, Cell::Int(-1)]);
        assert_eq!(row.get::<i64>(0).unwrap(), 7);
        assert_eq!(row.get::<String>(1).unwrap(), "x");
        assert_eq!(row.get::<Option<i64>>(2).unwrap(), None);
        assert_eq!(row.get::<Option<String>>(1).unwrap().as_deref(), Some("x"));
        assert!(matches!(row.get::<i64>(1), Err(Error::StoreCorrupt(_))));
        assert!(matches!(row.get::<u32>(3), Err(Error::StoreCorrupt(_))), "a negative count");
        assert!(matches!(row.get::<String>(2), Err(Error::StoreCorrupt(_))), "NULL where text must be");
    }
}
