//! Finds Swagger UI for the API reference at `/docs` (`src/reference.rs`): the npm package
//! `swagger-ui-dist` that `scripts/bootstrap.sh` installs into `node_modules/` at the version
//! `package-lock.json` pins, the same files the Worker's `/docs` serves. The daemon embeds them,
//! so a deployment is one binary; building it needs the npm packages installed first.

use std::{
    fs::File,
    path::{Path, PathBuf},
};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let node_modules = manifest.join("../node_modules");
    wait_for_an_npm_install(&node_modules);
    let dist = node_modules.join("swagger-ui-dist");
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

/// `scripts/test.sh` starts the workspace's build beside the npm install, holding
/// `node_modules/.kya-npm-install.lock` (flock) until the packages are in place, and build scripts
/// run seconds into a build: wait for the lock (shared, at once when nobody holds it) before
/// looking for the packages. No lock file: no install was started beside this build.
fn wait_for_an_npm_install(node_modules: &Path) {
    let lock = node_modules.join(".kya-npm-install.lock");
    if let Ok(file) = File::open(&lock) {
        // A file system without locks answers an error; the check below then says what is missing.
        let _ = file.lock_shared();
    }
}
