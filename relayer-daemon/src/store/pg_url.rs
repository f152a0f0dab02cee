//! `DATABASE_URL` split into its user info and the rest, as an operator means it when the password
//! holds `/`, `?`, `@` or `%` unencoded. URL rules would end the user info at the first `/` or `?`.
//! That showed `postgres://kya:ab/…` (the user and the start of the password) in logs, and it
//! read `?sslmode=require` after a `?` in the password as part of the host, so the connection
//! went out in plain text. tokio-postgres ends the user info at the first `@`, libpq at the first
//! `@` before a `/`. Here the user info runs up to the **last `@` before the host**. The host comes
//! before the query, and the query starts at the first `?` followed by a connection parameter's
//! name and `=`. A `?` inside a password is never followed by one in practice. An `@` in a query
//! value is read as a query value. The user and the password are percent-decoded, as libpq does,
//! and handed to the driver as values, never re-parsed from text.

use crate::error::{Error, Result};

/// The connection parameters libpq reads from a URL's query: where the query starts.
const PARAMETERS: &[&str] = &[
    "application_name",
    "channel_binding",
    "connect_timeout",
    "dbname",
    "host",
    "hostaddr",
    "keepalives",
    "keepalives_count",
    "keepalives_idle",
    "keepalives_interval",
    "load_balance_hosts",
    "options",
    "password",
    "port",
    "sslcert",
    "sslcrl",
    "sslcrldir",
    "sslkey",
    "sslmode",
    "sslpassword",
    "sslrootcert",
    "target_session_attrs",
    "tcp_user_timeout",
    "user",
];

/// A URL's parts: `scheme://[user[:password]@]rest`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Parts<'a> {
    pub(super) scheme: &'a str,
    /// The user, percent-decoded.
    pub(super) user: Option<String>,
    /// The password, percent-decoded (bytes: a password need not be UTF-8).
    pub(super) password: Option<Vec<u8>>,
    /// Host (and port), then the path and the query, as written.
    pub(super) rest: &'a str,
}

impl Parts<'_> {
    /// The URL without its user info: what the driver parses.
    pub(super) fn without_user_info(&self) -> String {
        format!("{}://{}", self.scheme, self.rest)
    }

    /// The URL as it may be logged: scheme, host and port (`/…` when a path or query follows).
    pub(super) fn shown(&self) -> String {
        kya_core::chain::redact::url(&self.without_user_info())
    }
}

/// Splits `url`; the error shows nothing of it past the scheme.
pub(super) fn split(url: &str) -> Result<Parts<'_>> {
    let unparseable = || Error::Config("DATABASE_URL is not a URL (scheme://host/database)".into());
    let (scheme, after) = url.split_once("://").ok_or_else(unparseable)?;
    let query = query_start(after).unwrap_or(after.len());
    let (user_info, rest) = match after[..query].rfind('@') {
        Some(at) => (Some(&after[..at]), &after[at + 1..]),
        None => (None, after),
    };
    if rest.split(['/', '?']).next().is_none_or(str::is_empty) {
        return Err(unparseable());
    }
    let (user, password) = match user_info {
        Some(info) => match info.split_once(':') {
            Some((user, password)) => (Some(decode(user)), Some(percent_decode(password))),
            None => (Some(decode(info)), None),
        },
        None => (None, None),
    };
    Ok(Parts { scheme, user, password, rest })
}

/// The first `?` of `after` that a connection parameter's `name=` follows.
fn query_start(after: &str) -> Option<usize> {
    after.match_indices('?').map(|(at, _)| at).find(|&at| {
        let query = &after[at + 1..];
        PARAMETERS.iter().any(|name| query.strip_prefix(name).is_some_and(|rest| rest.starts_with('=')))
    })
}

/// `%XX` escapes decoded; a `%` that starts none is kept as written (as the driver does).
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| bytes.get(at + 1..at + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                at += 3;
            }
            None => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    out
}

/// [`percent_decode`]d, as text (a byte sequence that is not UTF-8 replaced).
pub(super) fn decode(text: &str) -> String {
    String::from_utf8_lossy(&percent_decode(text)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_with_slash_question_mark_at_or_percent_is_read_whole() {
        let read = |url| {
            let parts = split(url).unwrap();
            (
                parts.user.clone(),
                parts.password.clone().map(|bytes| String::from_utf8(bytes).unwrap()),
                parts.rest,
            )
        };
        let kya = Some("kya".to_owned());
        let password = |text: &str| Some(text.to_owned());
        assert_eq!(
            read("postgres://kya:ab/cd@db:5432/relayer"),
            (kya.clone(), password("ab/cd"), "db:5432/relayer")
        );
        assert_eq!(
            read("postgres://kya:ab?cd@db/relayer?sslmode=require&sslrootcert=/ca.pem"),
            (kya.clone(), password("ab?cd"), "db/relayer?sslmode=require&sslrootcert=/ca.pem")
        );
        assert_eq!(read("postgres://kya:a@b@db/relayer"), (kya.clone(), password("a@b"), "db/relayer"));
        assert_eq!(read("postgres://kya:p%ss@db/relayer"), (kya.clone(), password("p%ss"), "db/relayer"));
        assert_eq!(
            read("postgres://kya:p%25ss%40@db/relayer"),
            (kya.clone(), password("p%ss@"), "db/relayer")
        );
        // An `@` in a query value stays in the query.
        assert_eq!(
            read("postgres://kya:pw@db/relayer?application_name=a@b"),
            (kya, password("pw"), "db/relayer?application_name=a@b")
        );
        assert_eq!(read("postgresql://db/relayer"), (None, None, "db/relayer"));
        assert_eq!(read("postgres://only-user@db"), (Some("only-user".into()), None, "db"));
        for bad in ["postgres://kya:SECRET@/relayer", "postgres://kya:SECRET@", "kya:SECRET@db"] {
            let error = split(bad).unwrap_err().to_string();
            assert!(!error.contains("SECRET"), "{error}");
        }
    }

    #[test]
    fn what_is_shown_has_no_part_of_the_user_info() {
        for (url, shown) in [
            ("postgres://kya:ab/cd@db:5432/relayer", "postgres://db:5432/…"),
            ("postgres://kya:ab?cd@db/relayer?sslmode=require", "postgres://db/…"),
            ("postgres://kya:a@b@db", "postgres://db"),
            ("postgres://kya:p%ss@db/relayer", "postgres://db/…"),
        ] {
            assert_eq!(split(url).unwrap().shown(), shown, "{url}");
        }
    }
}
