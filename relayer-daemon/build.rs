//! Finds Swagger UI for the API reference at `/docs` (`src/reference.rs`): the npm package
//! `swagger-ui-dist` that `scripts/bootstrap.sh` installs into `node_modules/` at the version
//! `package-lock.json` pins, the same files the Worker's `/docs` serves. The daemon embeds them,
//! so a deployment is one binary; building it needs the npm packages installed first.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let dist = manifest.join("../node_modules/swagger-ui-dist");
    for file in ["swagger-ui-bundle.js", "swagger-ui.css"] {
        let path = dist.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        assert!(
            path.is_file(),
            "{} is missing: the relayer's /docs embeds Swagger UI from the npm package swagger-ui-dist; \
             install the npm packages first (scripts/bootstrap.sh, or `npm install` at the repository's root)",
            path.display()
        );
    }
    println!("cargo:rustc-env=SWAGGER_UI_DIST={}", dist.display());
}
