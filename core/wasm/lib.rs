//! The browser package's wasm module (`scripts/build-core-wasm.sh`): `kya-core` with its
//! JavaScript bindings (feature `browser`), linked as a cdylib. The bindings' exports are
//! `kya_core::browser`'s own; this crate only links them.

pub use kya_core::browser;
