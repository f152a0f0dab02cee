//! A read-only answer's D1 session (the Sessions API of D1's read replication): its reads may be
//! served by a replica near the Worker, and never by one older than the bookmark it starts from
//! (a client's `X-D1-Bookmark`, from an answer it saw), so a client that passes back the bookmark
//! of each answer never sees the index go back in time. Without a bookmark the first read may go
//! to any replica. The index's runs and every write keep the primary ([`super::Store`]).
//!
//! A point answer is read on every request a provider makes, so its read is one call into
//! JavaScript ([`session_rows`]): the session, the statement, its parameters (one JSON text), the
//! rows as arrays (`raw()`, not `all()`'s objects) and the bookmark after the read, back as one
//! JSON text that `serde_json` decodes. workers-rs's D1 types made that a call across the glue
//! for each step and decoded the rows field by field from JavaScript objects
//! (`serde_wasm_bindgen`): about 0.1 ms of a polled `/kya`'s CPU in the profiles, about half
//! that now. The rest of the read is D1's binding, JavaScript of the runtime's
//! (docs/bench/point-answers-*.md).

use std::cell::RefCell;

use serde::de::DeserializeOwned;
use wasm_bindgen::{JsValue, prelude::wasm_bindgen};
use worker::{Env, js_sys::Promise, wasm_bindgen_futures::JsFuture};

use super::{Limits, Param, binding};
use crate::{Error, Result};

#[wasm_bindgen(inline_js = "export function session_rows(db, bookmark, sql, params) {
  const session = db.withSession(bookmark ?? 'first-unconstrained');
  return session.prepare(sql).bind(...JSON.parse(params)).raw().then(
    (rows) => JSON.stringify([session.getBookmark(), rows]));
}")]
extern "C" {
    /// In a new session of `db` from `bookmark` (any replica for the first read without one):
    /// the rows `sql` selects with `params` (a JSON array) bound, each an array of its columns,
    /// and the session's bookmark after the read, as the JSON text `[bookmark, rows]`: a promise.
    #[wasm_bindgen(catch, js_name = session_rows)]
    fn session_rows(
        db: &JsValue,
        bookmark: Option<&str>,
        sql: &str,
        params: &str,
    ) -> Result<Promise, JsValue>;
}

/// The longest bookmark taken: D1's are four groups of hex digits, 59 characters under
/// `wrangler dev`; the bound leaves room for a longer form and none for a page of text.
const MAX_BOOKMARK_BYTES: usize = 256;

/// The client's `X-D1-Bookmark`, trimmed (`None` when blank or absent), if it can be a bookmark:
/// at most [`MAX_BOOKMARK_BYTES`] of letters, digits and `-`. D1 judges the rest. Other text is
/// refused before it reaches D1, which would fail the read (the answer would then read the chain
/// and blame the index) or, under `wrangler dev`, hand it back as the answer's bookmark.
pub(crate) fn checked_bookmark(header: Option<&str>) -> Result<Option<&str>> {
    let Some(bookmark) = header.map(str::trim).filter(|bookmark| !bookmark.is_empty()) else {
        return Ok(None);
    };
    let well_formed = bookmark.len() <= MAX_BOOKMARK_BYTES
        && bookmark.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-');
    if well_formed { Ok(Some(bookmark)) } else { Err(Error::InvalidBookmark(bookmark.len())) }
}

/// A D1 session for one answer's reads: what it started from, the bookmark its last read left,
/// and the invocation's D1 limits.
pub(crate) struct ReadSession {
    db: JsValue,
    /// The client's bookmark (`None`: any replica may serve the first read).
    from: Option<String>,
    /// The bookmark after the latest read: what the client passes back.
    after: RefCell<Option<String>>,
    limits: Limits,
}

impl ReadSession {
    /// A session of the `INDEX` database from `bookmark` (one [`checked_bookmark`] took), or
    /// `None` without the binding. Nothing is read until [`ReadSession::rows`].
    pub(crate) fn open(env: &Env, bookmark: Option<&str>) -> Option<Self> {
        let (queries, db) = binding(env)?;
        let from = bookmark.map(str::to_owned);
        Some(Self { db, from, after: RefCell::new(None), limits: Limits::new(queries) })
    }

    /// Every row `sql` selects with `params` bound, each decoded from the array of its columns
    /// in the order `sql` names them (a struct's fields in that order, or a tuple), once the
    /// statement passes D1's limits. Later reads of the session start from this one's bookmark.
    pub(crate) async fn rows<T: DeserializeOwned>(&self, sql: &str, params: Vec<Param>) -> Result<Vec<T>> {
        self.limits.check(sql, &params)?;
        self.limits.spend(1)?;
        let params = serde_json::to_string(&params).map_err(|error| Error::Runtime(error.into()))?;
        let bookmark = self.after.borrow().clone().or_else(|| self.from.clone());
        let read = session_rows(&self.db, bookmark.as_deref(), sql, &params).map_err(worker::Error::from)?;
        let text = JsFuture::from(read).await.map_err(worker::Error::from)?;
        let text = text.as_string().ok_or_else(|| Error::BadConfig("D1's rows are no text".into()))?;
        let (bookmark, rows): (Option<String>, Vec<T>) = serde_json::from_str(&text)
            .map_err(|error| Error::BadConfig(format!("D1's rows do not decode: {error}")))?;
        *self.after.borrow_mut() = bookmark;
        Ok(rows)
    }

    /// The session's bookmark after its reads (`None` before the first): what a client passes
    /// back as `X-D1-Bookmark`.
    pub(crate) fn bookmark(&self) -> Option<String> {
        self.after.borrow().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bookmark_is_taken_as_d1_writes_it_and_other_text_is_refused() {
        let local = "00000000-00000017-00000000-00000000000000000000000000000000";
        assert_eq!(checked_bookmark(Some(local)).unwrap(), Some(local));
        assert_eq!(checked_bookmark(Some(&format!(" {local} "))).unwrap(), Some(local), "trimmed");
        assert_eq!(checked_bookmark(Some("  ")).unwrap(), None, "blank: none");
        assert_eq!(checked_bookmark(None).unwrap(), None);
        let longest = "a".repeat(MAX_BOOKMARK_BYTES);
        assert_eq!(checked_bookmark(Some(&longest)).unwrap(), Some(longest.as_str()));
        for other in
            ["a".repeat(MAX_BOOKMARK_BYTES + 1), "0000-00 00".into(), "x\"y".into(), "bookmark;1".into()]
        {
            let error = checked_bookmark(Some(&other)).unwrap_err();
            assert_eq!(error.status(), 400, "{other}");
            assert_eq!(
                error.to_string(),
                format!(
                    "invalid X-D1-Bookmark header: must be the X-D1-Bookmark of an answer, letters, digits and '-' \
                     up to 256 bytes (got {} bytes)",
                    other.len()
                )
            );
        }
    }
}
