// Entry module of the edge API Worker: instantiates the Rust wasm (built by
// scripts/build-worker.sh into edge-api/build/) once per isolate and hands it every request.
import { initSync, fetch as handleFetch, scheduled as handleScheduled } from "../build/kya_edge_api.js";
import wasmModule from "../build/kya_edge_api_bg.wasm";

// Wrangler imports `.wasm` files as compiled WebAssembly.Module objects, so no fetch of the
// binary and no top-level await are needed.
initSync({ module: wasmModule });

export default {
  async fetch(request, env, ctx) {
    return handleFetch(request, env, ctx);
  },
  // The registry index's run (a Cron Trigger in wrangler.toml).
  async scheduled(event, env, ctx) {
    return handleScheduled(event, env, ctx);
  },
};
