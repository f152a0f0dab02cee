//! Keeping a rarely run answer's future out of its caller's.

use std::{future::Future, pin::Pin};

/// `future` behind a pointer and a virtual call: its state machine is compiled as a function of
/// its own instead of being inlined into its caller's. A restarted Worker compiles each function
/// of the wasm when a request first runs it, so an answer kept apart costs its compile only to
/// the requests that give it: the rare arms of `handler::serve` stay out of the fetch handler's future,
/// and each registry-wide answer out of the others' (`docs/bench/index-cold.md`).
pub(crate) fn apart<'a, T>(future: impl Future<Output = T> + 'a) -> Pin<Box<dyn Future<Output = T> + 'a>> {
    Box::pin(future)
}
