//! The API's OpenAPI 3.1 document (`edge-api/openapi.json`), served at `/openapi.json`.
//!
//! The document is kept beside the code rather than generated: most answers are JSON rendered
//! by `kya_core` (some as precomputed text), so the types alone could not describe them. Drift
//! is caught by tests: the unit test below holds the document's paths to the endpoint table, the
//! end-to-end tests validate every response they receive against it (`kya_tests::openapi`), and
//! Schemathesis fuzzes the running Worker from it.

/// The document, embedded at build time (a few KiB of wasm once compressed).
pub(crate) const DOCUMENT: &str = include_str!("../openapi.json");

/// The document changes only with a new deployment.
pub(crate) const CACHE_CONTROL: &str = "public, max-age=300";

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use kya_core::api::openapi_testing::resolved;
    use serde_json::Value;

    use super::*;
    use crate::{http, passes, routes, verify};

    /// The paths that take POST (and are not in the table of GET routes).
    const POST_PATHS: [&str; 2] = [verify::PATH, passes::batch::PATH];

    fn document() -> Value {
        serde_json::from_str(DOCUMENT).expect("the document is JSON")
    }

    /// Every row of the endpoint table is a documented path, and every documented path a row.
    #[test]
    fn documents_every_route_and_no_other() {
        let document = document();
        assert_eq!(document["openapi"], "3.1.0");
        let documented: BTreeSet<String> = document["paths"]
            .as_object()
            .expect("paths")
            .keys()
            .map(|path| {
                // `/agent/{id}` in OpenAPI is `/agent/:id` in the table.
                path.split('/')
                    .map(|segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                        Some(name) => format!(":{name}"),
                        None => segment.to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect();
        let mut served: BTreeSet<String> = routes::patterns().map(str::to_owned).collect();
        served.extend(POST_PATHS.map(str::to_owned));
        assert_eq!(documented, served);
    }

    /// Every path documents exactly the methods the Worker serves on every path (`Allow` of its
    /// 405s). Operation ids, and HEAD as GET without the body, are checked for both services'
    /// documents by the end-to-end suite (`tests/it/openapi/`).
    #[test]
    fn documents_every_method_of_every_path() {
        let document = document();
        let methods_of =
            |list: &str| -> BTreeSet<String> { list.split(", ").map(str::to_lowercase).collect() };
        for (path, item) in document["paths"].as_object().expect("paths") {
            let methods: BTreeSet<String> = item.as_object().expect("a path item").keys().cloned().collect();
            let served = if POST_PATHS.contains(&path.as_str()) { http::POST_METHODS } else { http::METHODS };
            assert_eq!(methods, methods_of(served), "{path}");
        }
        let allow = &document["components"]["headers"]["Allow"]["schema"]["const"];
        assert_eq!(allow, http::METHODS);
        let allow = &document["components"]["headers"]["AllowVerify"]["schema"]["const"];
        assert_eq!(allow, http::POST_METHODS);
    }

    /// OPTIONS is the CORS preflight: a 204 whose headers are exactly what [`http::preflight`]
    /// and [`http::finish`] send.
    #[test]
    fn options_is_the_preflight() {
        let document = document();
        let preflight = &document["components"]["responses"]["Preflight"];
        let verify_preflight = &document["components"]["responses"]["PreflightVerify"];
        for (path, item) in document["paths"].as_object().expect("paths") {
            let responses = item["options"]["responses"].as_object().expect("responses");
            assert_eq!(responses.keys().collect::<Vec<_>>(), ["204"], "{path}");
            let expected = if POST_PATHS.contains(&path.as_str()) { verify_preflight } else { preflight };
            assert_eq!(resolved(&document, &responses["204"]), expected, "{path}");
        }
        let verify_methods =
            resolved(&document, &verify_preflight["headers"]["Access-Control-Allow-Methods"]);
        assert_eq!(verify_methods["schema"]["const"], http::POST_METHODS);
        let header = |name: &str| {
            let header = resolved(&document, &preflight["headers"][name]);
            assert_eq!(header["required"], true, "{name}");
            header["schema"]["const"].clone()
        };
        assert_eq!(header("Access-Control-Allow-Origin"), "*");
        assert_eq!(header("Access-Control-Allow-Methods"), http::METHODS);
        assert_eq!(header("Access-Control-Allow-Headers"), http::ALLOWED_HEADERS);
        assert_eq!(header("Access-Control-Expose-Headers"), http::EXPOSED_HEADERS);
        let max_age: u64 = http::PREFLIGHT_MAX_AGE.parse().expect("seconds");
        assert_eq!(header("Access-Control-Max-Age"), max_age);
        assert!(preflight.get("content").is_none(), "a preflight has no body");
    }
}
