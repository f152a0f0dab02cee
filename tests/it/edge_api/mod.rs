//! The edge API Worker under `wrangler dev` against a real anvil with the real registry: every
//! endpoint's fields against the seed's model, the block each answer names, every REST error row,
//! caching measured by a counting RPC proxy, the rate limit, and RPC round trips on 1,000 agents.
//!
//! One Worker per test (each test runs its checks in sequence against it): a `wrangler dev`
//! costs CPU, and these machines have two cores.

mod blocks;
mod bulk;
mod changes;
mod changes_js;
mod demo;
mod expect;
mod failures;
mod feed;
mod grace;
mod hostile;
mod index;
mod index_attacks;
mod index_stampede;
mod interop;
mod methods;
mod pace;
mod pass_provider;
mod passes;
mod point;
mod providers;
mod python_system;
mod reorgs;
mod stream;
mod stream_bounds;
mod stream_crowd;
mod verify;
mod webhooks;
