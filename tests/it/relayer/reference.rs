//! The relayer's API reference at `/docs` (issue 28, item 9): the page, the files it loads and
//! the document it renders, each served by the running daemon with the Worker's security headers.
//! Fetched with a plain HTTP client: the page and its files are not API answers, so the OpenAPI
//! document (which the fixture's client holds every answer to) does not list them.

use kya_tests::relayer_fixture::Engine;

use super::start;

/// The `/docs` page's policy: the Worker's (`edge-api/public/_headers`), word for word.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
/// Every file's that is no page.
const FILE_POLICY: &str = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

#[tokio::test]
async fn the_reference_page_its_files_and_its_document_are_served_under_the_workers_policy() {
    let (_t, _db, relayer) = start(Engine::Sqlite, &[]).await;
    let base = &relayer.client.base;
    let http = kya_tests::http_client();
    let get = |path: String| {
        let http = http.clone();
        async move { http.get(path).send().await.expect("the relayer answers") }
    };
    let header = |response: &reqwest::Response, name: &str| {
        response.headers().get(name).and_then(|value| value.to_str().ok()).map(str::to_owned)
    };

    let page = get(format!("{base}/docs")).await;
    assert_eq!(page.status(), 200);
    assert_eq!(header(&page, "content-type").as_deref(), Some("text/html; charset=utf-8"));
    assert_eq!(header(&page, "content-security-policy").as_deref(), Some(PAGE_POLICY));
    assert_eq!(header(&page, "x-frame-options").as_deref(), Some("DENY"));
    assert_eq!(header(&page, "referrer-policy").as_deref(), Some("no-referrer"));
    assert_eq!(header(&page, "x-content-type-options").as_deref(), Some("nosniff"));
    let html = page.text().await.unwrap();
    assert!(html.contains("<title>KYA relayer API reference</title>"), "{html}");
    assert!(!html.contains("<script>") && !html.contains("<style"), "no inline script or style");

    // Every file the page names (relative to /docs) is served, typed, under the files' policy.
    let loaded: Vec<&str> =
        html.split(['"', '\'']).filter(|part| part.ends_with(".js") || part.ends_with(".css")).collect();
    assert_eq!(
        loaded,
        ["vendor/swagger-ui/swagger-ui.css", "vendor/swagger-ui/swagger-ui-bundle.js", "docs.js"]
    );
    let mut script = String::new();
    for file in loaded {
        let response = get(format!("{base}/{file}")).await;
        assert_eq!(response.status(), 200, "{file}");
        let expected_type =
            if file.ends_with(".css") { "text/css; charset=utf-8" } else { "text/javascript; charset=utf-8" };
        assert_eq!(header(&response, "content-type").as_deref(), Some(expected_type), "{file}");
        assert_eq!(header(&response, "content-security-policy").as_deref(), Some(FILE_POLICY), "{file}");
        let text = response.text().await.unwrap();
        assert!(text.len() > 100, "{file} has content");
        if file == "docs.js" {
            script = text;
        }
    }
    // Swagger UI is the same npm package the Worker serves.
    let bundle = get(format!("{base}/vendor/swagger-ui/swagger-ui-bundle.js")).await.bytes().await.unwrap();
    let installed =
        std::fs::read(kya_tests::repo_root().join("node_modules/swagger-ui-dist/swagger-ui-bundle.js"))
            .expect("swagger-ui-dist installed");
    assert!(bundle == installed, "the bundle is swagger-ui-dist's");

    // The document the page renders is the daemon's own, served beside it.
    assert!(script.contains("url: '/openapi.json'"), "{script}");
    let document = get(format!("{base}/openapi.json")).await;
    assert_eq!(document.status(), 200);
    assert_eq!(document.text().await.unwrap(), kya_relayer::openapi::DOCUMENT);

    // HEAD as GET without the body; other methods 405 naming the reads; near misses 404.
    let head = http.head(format!("{base}/docs")).send().await.unwrap();
    assert_eq!(
        (head.status().as_u16(), header(&head, "content-security-policy").as_deref()),
        (200, Some(PAGE_POLICY))
    );
    assert!(head.bytes().await.unwrap().is_empty());
    let post = http.post(format!("{base}/docs")).body("{}").send().await.unwrap();
    assert_eq!(
        (post.status().as_u16(), header(&post, "allow").as_deref()),
        (405, Some("GET, HEAD, OPTIONS"))
    );
    for missing in
        ["/docs/", "/docs.html", "/vendor/swagger-ui/swagger-ui-bundle.js.map", "/vendor/swagger-ui/"]
    {
        let response = get(format!("{base}{missing}")).await;
        assert_eq!(response.status(), 404, "{missing}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body, serde_json::json!({ "error": "Not found", "code": "not_found" }), "{missing}");
    }
    let stray = http.post(format!("{base}/nowhere")).body("{}").send().await.unwrap();
    assert_eq!(stray.status(), 404, "another method elsewhere stays a 404");
    relayer.stop().await;
}
