//! The cases compiled to wasm, for `benches/wasm_factor.rs` to run in Node through
//! `bench/js/measure.mjs`, timed by `performance.now()`.

use wasm_bindgen::prelude::wasm_bindgen;

use crate::{Fixture, measure};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance)]
    fn now() -> f64;
}

/// Every case's median at a registry of `agents` agents, in nanoseconds, in `CASES`' order.
#[wasm_bindgen(js_name = measureCases)]
pub fn measure_cases(agents: u32) -> Vec<f64> {
    measure(&Fixture::new(u64::from(agents)), now)
}
