//! The relayer's OpenAPI 3.1 document (`relayer-daemon/openapi.json`), served at `/openapi.json`.
//!
//! Kept beside the code rather than generated: the answers are `serde_json::Value`s built with
//! `json!`, so there are no response types to derive it from. Drift is caught by tests: the
//! end-to-end tests validate every response they receive against it (`kya_tests::openapi`), and
//! Schemathesis fuzzes the running daemon from it (`tests/it/openapi/`).

/// The document, embedded at build time.
pub const DOCUMENT: &str = include_str!("../openapi.json");
