//! End-to-end tests, one binary: each test starts what it needs (a fresh anvil with the real
//! contracts, and later the real Worker or relayer) and stops it when it ends.

mod browser;
mod cli;
mod contracts;
mod core_package;
mod edge_api;
mod one_source;
mod openapi;
mod pass_keys;
mod python_package;
mod python_relayer;
mod relayer;
