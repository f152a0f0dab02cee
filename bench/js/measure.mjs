// Runs kya-bench's cases compiled to wasm (scripts/build-bench-wasm.sh) in Node's V8, the engine
// of workerd, instantiated the way the Worker's entry module does (`initSync`).
//   node bench/js/measure.mjs <folder of kya_bench.js> <agents>...
// prints {"<agents>": [nanoseconds per case, in kya_bench::CASES' order], ...} as JSON.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [folder, ...sizes] = process.argv.slice(2);
const glue = await import(pathToFileURL(resolve(folder, 'kya_bench.js')).href);
glue.initSync({ module: readFileSync(join(folder, 'kya_bench_bg.wasm')) });
const figures = Object.fromEntries(sizes.map((agents) => [agents, Array.from(glue.measureCases(Number(agents)))]));
process.stdout.write(`${JSON.stringify(figures)}\n`);
