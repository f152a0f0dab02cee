//! What the store's statements are made of, on either engine: the values bound to their
//! placeholders, the lock a write transaction names, and SQLite's placeholders read as
//! PostgreSQL's. Below both the query layer ([`super::sql`]) and the prepared statements
//! ([`super::prepared`]), which each use them.

/// A value bound to a placeholder: every column of the store is an integer or text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Int(Option<i64>),
    Text(Option<String>),
}

impl From<i64> for Value {
    fn from(value: i64) -> Self {
        Self::Int(Some(value))
    }
}

impl From<Option<i64>> for Value {
    fn from(value: Option<i64>) -> Self {
        Self::Int(value)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Self::Text(Some(value.to_owned()))
    }
}

impl From<&String> for Value {
    fn from(value: &String) -> Self {
        Self::Text(Some(value.clone()))
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Self::Text(Some(value))
    }
}

impl From<Option<&str>> for Value {
    fn from(value: Option<&str>) -> Self {
        Self::Text(value.map(str::to_owned))
    }
}

impl From<&Option<String>> for Value {
    fn from(value: &Option<String>) -> Self {
        Self::Text(value.clone())
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Self::Int(value) => rusqlite::ToSql::to_sql(value),
            Self::Text(value) => rusqlite::ToSql::to_sql(value),
        }
    }
}

/// What a write transaction must hold so that its checks and its updates are one step against
/// every other writer, in this process or another daemon on the same database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lock {
    /// The budget row (`SELECT … FOR UPDATE`): everything that reads or changes the budget or a
    /// share of it (reservations, replacements, settlements) runs one at a time.
    Budget,
    /// One rate-window key (a transaction-scoped advisory lock on its hash): counts of one IP
    /// or one signer are exact; other keys go on at once.
    Key(String),
    /// One relay's row (`SELECT … FOR UPDATE`): its before-and-after (and so its webhook
    /// event's sequence) is not interleaved with another change of it.
    Relay(i64),
    /// One lane's lease row (`SELECT … FOR UPDATE`): a transaction recorded under the lease is
    /// not interleaved with a takeover, a renewal or a release of it.
    Lane(String),
    /// Nothing beyond the statements' own row locks: single conditional updates (the outbox's
    /// leases, fenced by their `WHERE`) and deletions of what nobody changes any more.
    Rows,
}

/// `sql` with SQLite's numbered placeholders (`?1`) written as PostgreSQL's (`$1`). The store's
/// SQL has no `?` inside a string literal, so every `?` followed by a digit is a placeholder.
pub(crate) fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_placeholders_become_postgres_ones() {
        assert_eq!(
            placeholders("a = ?1 AND b IN (?2, ?13) AND c = '?'"),
            "a = $1 AND b IN ($2, $13) AND c = '?'"
        );
    }
}
