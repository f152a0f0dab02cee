//! Nothing to run: this example is here so that the workspace's test build (`cargo test
//! --workspace --all-targets`, which compiles examples) also builds the package's library
//! as a library, and with it the extension module `lib_core.so` (the lib's `cdylib`), which
//! tests/it/python_package.rs loads as `kya/_core.abi3.so`. Without it, that build compiles
//! the lib only as its (empty) test harness, and the module would need a build of its own, in
//! another feature set of kya-core's dependencies.

fn main() {}
