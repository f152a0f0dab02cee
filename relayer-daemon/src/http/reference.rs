//! The API reference at `/docs`: Swagger UI rendering `/openapi.json`, as the Worker's `/docs`
//! does, from files embedded at build time (`build.rs`): the page (`public/docs.html`), the
//! Worker's `docs.js`, and Swagger UI's bundle and stylesheet from the npm package
//! `swagger-ui-dist`. Every file is served with the Worker's security headers
//! (`edge-api/public/_headers`): the page may load scripts, styles and the document from its own
//! origin only, and runs no inline script; a file that is no page loads and runs nothing.

use warp::{
    http::{HeaderValue, header},
    reply::Response,
};

/// The page's policy: the Worker's `/docs` policy, word for word. Swagger UI's stylesheet draws
/// its icons as `data:` SVGs; `connect-src 'self'` lets it fetch `/openapi.json`.
pub(crate) const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Every other file's policy: it loads nothing and runs nothing when opened on its own.
pub(crate) const FILE_POLICY: &str =
    "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A file of the reference: where it is served, its type, and its bytes.
pub(crate) struct File {
    /// The path it is served at.
    pub(crate) path: &'static str,
    /// Its `Content-Type`.
    pub(crate) content_type: &'static str,
    /// Its content.
    pub(crate) body: &'static [u8],
}

/// The page and what it loads, paths as the page names them (relative to `/docs`).
pub(crate) const FILES: [File; 4] = [
    File {
        path: "/docs",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../../public/docs.html"),
    },
    File {
        path: "/docs.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../edge-api/public/docs.js"),
    },
    File {
        path: "/vendor/swagger-ui/swagger-ui-bundle.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!(concat!(env!("SWAGGER_UI_DIST"), "/swagger-ui-bundle.js")),
    },
    File {
        path: "/vendor/swagger-ui/swagger-ui.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!(concat!(env!("SWAGGER_UI_DIST"), "/swagger-ui.css")),
    },
];

/// The reference's file at `path`, if it is one.
pub(crate) fn file(path: &str) -> Option<&'static File> {
    FILES.iter().find(|file| file.path == path)
}

/// The answer serving `file`, with its security headers.
pub(crate) fn response(file: &File) -> Response {
    let mut response = Response::new(file.body.into());
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(file.content_type));
    let policy = if file.path == "/docs" { PAGE_POLICY } else { FILE_POLICY };
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(policy));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page names exactly the files served beside it, and the policies are the Worker's
    /// (`edge-api/public/_headers`), so the two references cannot drift apart.
    #[test]
    fn the_page_loads_what_is_served_under_the_workers_policies() {
        let page = std::str::from_utf8(FILES[0].body).expect("UTF-8");
        for file in &FILES[1..] {
            let relative = file.path.trim_start_matches('/');
            assert!(page.contains(&format!("\"{relative}\"")), "the page loads {relative}");
            assert!(!file.body.is_empty(), "{} is embedded", file.path);
        }
        assert!(!page.contains("<script>") && !page.contains("<style"), "nothing inline");
        let headers = include_str!("../../../edge-api/public/_headers");
        for policy in [PAGE_POLICY, FILE_POLICY] {
            assert!(headers.contains(&format!("Content-Security-Policy: {policy}")), "{policy}");
        }
        let script = std::str::from_utf8(FILES[1].body).expect("UTF-8");
        assert!(script.contains("url: '/openapi.json'"), "the page renders the daemon's own document");
        assert_eq!(file("/docs").map(|file| file.content_type), Some("text/html; charset=utf-8"));
        assert!(file("/docs/").is_none() && file("/vendor/swagger-ui/").is_none());
    }
}
