// The edge API Worker on a socket of its own, as Cloudflare's edge calls it: the runtime
// `wrangler dev` runs (Miniflare's workerd), with the bindings wrangler.toml gives it (read by
// wrangler's own `unstable_getMiniflareWorkerOptions`), on a state directory `wrangler dev`
// filled, but reached without wrangler's proxy Worker and without the runtime's entry Worker:
// Miniflare's `unsafeDirectSockets` serve the Worker's default export itself.
//
// Used by the index benchmark (`direct.rs`) only. Usage, from the repository's root:
//   node tests/benches/index/direct_worker.mjs <state directory> <vars as a JSON object>
// Prints `direct <url>` once the Worker answers there; stops on SIGTERM or SIGINT.

import { Miniflare } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";

const [state, varsJson] = process.argv.slice(2);
if (!state || !varsJson) {
  console.error("usage: direct_worker.mjs <state directory> <vars as a JSON object>");
  process.exit(2);
}

const { workerOptions, main } = unstable_getMiniflareWorkerOptions("wrangler.toml");
// The explorer's static files are served by an assets Worker of their own in front of ours;
// the benchmark asks none of them.
delete workerOptions.assets;

const mf = new Miniflare({
  workers: [
    {
      ...workerOptions,
      // The entry module as wrangler bundles it, its imports followed by Miniflare: the glue
      // (ES modules) and the wasm (compiled at load, as wrangler imports `.wasm`).
      modules: true,
      scriptPath: main,
      modulesRules: [
        { type: "CompiledWasm", include: ["**/*.wasm"] },
        { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      ],
      bindings: { ...workerOptions.bindings, ...JSON.parse(varsJson) },
      unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
    },
  ],
  // `wrangler dev --persist-to <state>` keeps each kind of state here.
  d1Persist: `${state}/v3/d1`,
  kvPersist: `${state}/v3/kv`,
  cachePersist: `${state}/v3/cache`,
  durableObjectsPersist: `${state}/v3/do`,
});

const direct = await mf.unsafeGetDirectURL();
console.log(`direct ${direct.href.replace(/\/$/, "")}`);

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, async () => {
    await mf.dispose();
    process.exit(0);
  });
}
