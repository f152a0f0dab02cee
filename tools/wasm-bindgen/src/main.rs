//! `wasm-bindgen`: the JS glue and the final wasm of a wasm32 build (the Worker, the browser
//! package, the benchmarks' module), from `wasm-bindgen-cli-support`, the library the upstream
//! CLI is a front for.
//!
//! Built here, not installed: the upstream CLI is a crate of its own to compile cold (about six
//! CPU-minutes on these machines, most of a fresh machine's set-up), where this one shares the
//! workspace's compiled dependencies and is built by the same `cargo` run as the tests. Its
//! version is the `wasm-bindgen` crate's by construction (one Cargo.lock), where an installed
//! CLI had to be checked against it. It takes the flags our scripts pass (`scripts/lib/wasm.sh`),
//! spelled as upstream's, and writes what upstream writes for them (checked byte for byte on the
//! Worker and the browser package when it replaced the installed CLI).

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use wasm_bindgen_cli_support::Bindgen;

/// The target our builds use, spelled as upstream's `--target` value for it.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Target {
    /// An ES module that fetches or is handed its wasm (the Worker, the browser package).
    Web,
}

/// Upstream's command line, as far as our scripts use it.
#[derive(Debug, Parser)]
#[command(name = "kya-wasm-bindgen", version, about)]
struct Args {
    /// The wasm32 build to generate glue for.
    input: PathBuf,
    /// What kind of JS module the glue is.
    #[arg(long, value_enum, default_value = "web")]
    target: Target,
    /// Where the glue and the wasm are written.
    #[arg(long)]
    out_dir: PathBuf,
    /// The files' stem (`<name>.js`, `<name>_bg.wasm`); the input's stem by default.
    #[arg(long)]
    out_name: Option<String>,
    /// Write no TypeScript declarations.
    #[arg(long)]
    no_typescript: bool,
    /// Keep the input's DWARF debug sections.
    #[arg(long)]
    keep_debug: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut bindgen = Bindgen::new();
    match args.target {
        Target::Web => bindgen.web(true)?,
    };
    // Upstream's CLI sets these whatever its flags, overriding the library's own defaults (it
    // omits the default module path) and its environment variables (WASM_BINDGEN_EXTERNREF):
    // set as it sets them, so the output is its output.
    #[allow(deprecated)] // as upstream calls it: externref is otherwise read from the wasm itself
    bindgen
        .input_path(&args.input)
        .typescript(!args.no_typescript)
        .keep_debug(args.keep_debug)
        .omit_default_module_path(false)
        .reference_types(false)
        .demangle(true);
    if let Some(name) = &args.out_name {
        bindgen.out_name(name);
    }
    bindgen.generate(&args.out_dir)
}
