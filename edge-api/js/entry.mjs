// Entry module of the edge API Worker: instantiates the Rust wasm (built by
// scripts/build-worker.sh into edge-api/build/) once per isolate and hands it every request.
import { DurableObject } from "cloudflare:workers";
import {
  initSync,
  fetch as handleFetch,
  scheduled as handleScheduled,
  queue as handleQueue,
  NonceStore as RustNonceStore,
  IndexPacer as RustIndexPacer,
  RefreshLease as RustRefreshLease,
  StreamShard as RustStreamShard,
  WebhookSender as RustWebhookSender,
} from "../build/kya_edge_api.js";
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
  // The webhooks' queues (wrangler.toml): handoffs to the receivers' senders, dead letters.
  async queue(batch, env, ctx) {
    return handleQueue(batch, env, ctx);
  },
};

// The Durable Object of one keyid's ERC-8128 nonces (edge-api/src/verify/nonces.rs). The runtime
// wants a class that extends DurableObject; the Rust object built by wasm-bindgen does the work.
export class NonceStore extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.inner = new RustNonceStore(ctx, env);
  }

  async fetch(request) {
    return this.inner.fetch(request);
  }

  async alarm() {
    return this.inner.alarm();
  }
}

// The registry index's runner (edge-api/src/index/pace.rs): runs the index from its alarm at the
// chain's pace; the Cron Trigger only makes sure its alarm is set.
export class IndexPacer extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.inner = new RustIndexPacer(ctx, env);
  }

  async fetch(request) {
    return this.inner.fetch(request);
  }

  async alarm() {
    return this.inner.alarm();
  }
}

// The lease of one registry-wide answer's refresh in one data centre (edge-api/src/cache/refresh.rs).
export class RefreshLease extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.inner = new RustRefreshLease(ctx, env);
  }

  async fetch(request) {
    return this.inner.fetch(request);
  }
}

// A shard of the change feed's stream (edge-api/src/index/stream/shard.rs): holds its listeners'
// open Server-Sent Events responses and writes to them the batches each index run hands it.
export class StreamShard extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.inner = new RustStreamShard(ctx, env);
  }

  async fetch(request) {
    return this.inner.fetch(request);
  }
}

// The sender of one webhook receiver (edge-api/src/webhooks/sender.rs): orders, signs, delivers
// and retries its events from its alarm.
export class WebhookSender extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.inner = new RustWebhookSender(ctx, env);
  }

  async fetch(request) {
    return this.inner.fetch(request);
  }

  async alarm() {
    return this.inner.alarm();
  }
}
