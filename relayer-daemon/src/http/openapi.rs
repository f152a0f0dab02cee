//! The relayer's OpenAPI 3.1 document (`relayer-daemon/openapi.json`), served at `/openapi.json`.
//!
//! Kept beside the code rather than generated, like the Worker's: the answer types
//! (`kya_core::api::relayer_view`) are the smaller part of it beside the preflights, the HEAD
//! variants, the refusals and the examples (`docs/openapi.md`). Drift is caught by tests: the
//! end-to-end tests validate every response they receive against it (`kya_tests::openapi`),
//! Schemathesis fuzzes the running daemon from it (`tests/it/openapi/`), and the unit tests below
//! hold its methods and CORS headers to the server's.

/// The document, embedded at build time.
pub const DOCUMENT: &str = include_str!("../../openapi.json");

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use kya_core::api::openapi_testing::resolved;
    use serde_json::Value;

    use super::*;
    use crate::http::server;

    fn document() -> Value {
        serde_json::from_str(DOCUMENT).expect("the document is JSON")
    }

    /// Each path documents exactly the methods the server answers there (`Allow` of its 405s).
    /// Operation ids, and HEAD as GET without the body, are checked for both services'
    /// documents by the end-to-end suite (`tests/it/openapi/`).
    #[test]
    fn documents_the_methods_of_every_path() {
        let document = document();
        for (path, item) in document["paths"].as_object().expect("paths") {
            // A concrete path: any segment stands for a `{parameter}`.
            let concrete: String = path
                .split('/')
                .map(|segment| if segment.starts_with('{') { "x" } else { segment })
                .collect::<Vec<_>>()
                .join("/");
            let served: BTreeSet<String> =
                server::methods_of(&concrete).split(", ").map(str::to_lowercase).collect();
            let methods: BTreeSet<String> = item.as_object().expect("a path item").keys().cloned().collect();
            assert_eq!(methods, served, "{path}");
        }
    }

    /// OPTIONS is the CORS preflight: a 204 with the headers the server sends, and every
    /// response of every method lets any origin read it.
    #[test]
    fn options_is_the_preflight_and_every_answer_is_cors() {
        let document = document();
        for (path, item) in document["paths"].as_object().expect("paths") {
            let responses = item["options"]["responses"].as_object().expect("responses");
            assert_eq!(responses.keys().collect::<Vec<_>>(), ["204"], "{path}");
            let preflight = resolved(&document, &responses["204"]);
            assert!(preflight.get("content").is_none(), "{path}: a preflight has no body");
            let header = |name: &str| {
                let header = resolved(&document, &preflight["headers"][name]);
                assert_eq!(header["required"], true, "{path} {name}");
                header["schema"]["const"].clone()
            };
            assert_eq!(header("Access-Control-Allow-Methods"), server::methods_of(path), "{path}");
            assert_eq!(header("Access-Control-Allow-Headers"), server::ALLOWED_HEADERS);
            let max_age: u64 = server::PREFLIGHT_MAX_AGE.parse().expect("seconds");
            assert_eq!(header("Access-Control-Max-Age"), max_age);
            for (method, operation) in item.as_object().expect("a path item") {
                for (status, response) in operation["responses"].as_object().expect("responses") {
                    let origin = resolved(
                        &document,
                        &resolved(&document, response)["headers"]["Access-Control-Allow-Origin"],
                    );
                    assert_eq!(origin["schema"]["const"], "*", "{method} {path} {status}");
                    assert_eq!(origin["required"], true, "{method} {path} {status}");
                }
            }
        }
    }
}
