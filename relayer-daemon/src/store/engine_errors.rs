//! The database engines' errors as the relayer's [`Error`]s: what is "not now" (a lock not
//! granted, a connection lost: [`Error::StoreUnavailable`], 503 and try again) and what is a
//! failure, with the server's own words and never the connection's settings. Kept here, beside
//! the engines, so the error type above them names neither.

use crate::error::Error;

impl From<rusqlite::Error> for Error {
    fn from(error: rusqlite::Error) -> Self {
        Self::Store(error.to_string())
    }
}

impl From<postgres::Error> for Error {
    fn from(error: postgres::Error) -> Self {
        if is_unavailable(&error) {
            Self::StoreUnavailable(postgres_detail(&error))
        } else {
            Self::Store(postgres_detail(&error))
        }
    }
}

/// Whether a PostgreSQL error says "not now" rather than "never": a timeout, a lock not
/// granted, a deadlock victim, a server shutting down or starting, or a connection lost. A retry
/// of the whole operation (its transaction rolled back) can succeed.
pub(crate) fn is_unavailable(error: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    match error.as_db_error() {
        Some(db) => {
            [
                SqlState::LOCK_NOT_AVAILABLE,
                SqlState::QUERY_CANCELED,
                SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
                SqlState::T_R_DEADLOCK_DETECTED,
                SqlState::T_R_SERIALIZATION_FAILURE,
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::TOO_MANY_CONNECTIONS,
                // A batch's prepared statement gone from the session (a pooler in transaction
                // mode, a `DISCARD ALL`): the connection prepares it again on its next use.
                SqlState::INVALID_SQL_STATEMENT_NAME,
            ]
            .contains(db.code())
                || db.code().code().starts_with("08")
        }
        // No answer from the server: the connection is closed, or its socket failed.
        None => {
            error.is_closed()
                || std::error::Error::source(error).is_some_and(|source| {
                    kya_native_http::causes(source).any(|cause| cause.is::<std::io::Error>())
                })
        }
    }
}

/// A PostgreSQL error as told: the server's own words when it sent any (`40P01: deadlock
/// detected`), else the driver's with its cause (`error connecting to server: Connection
/// refused`). Neither holds the connection's password: the driver never formats its settings.
pub(crate) fn postgres_detail(error: &postgres::Error) -> String {
    match (error.as_db_error(), std::error::Error::source(error)) {
        (Some(db), _) => format!("{}: {}", db.code().code(), db.message()),
        (None, Some(cause)) => format!("{error}: {cause}"),
        (None, None) => error.to_string(),
    }
}
