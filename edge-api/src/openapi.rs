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

    use super::*;
    use crate::routes;

    /// Every row of the endpoint table is a documented path, and every documented path a row.
    #[test]
    fn documents_every_route_and_no_other() {
        let document: serde_json::Value = serde_json::from_str(DOCUMENT).expect("the document is JSON");
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
        let served: BTreeSet<String> = routes::patterns().map(str::to_owned).collect();
        assert_eq!(documented, served);
        for (path, item) in document["paths"].as_object().expect("paths") {
            let methods: Vec<&String> = item.as_object().expect("a path item").keys().collect();
            assert_eq!(methods, ["get"], "{path}: the API serves GET (and HEAD) only");
        }
    }
}
