// A page's script importing the installed package by name, bundled by esbuild (the wasm copied
// beside the bundle by the `file` loader): puts the results on the document for the test.
import init, * as kya from 'kya-core';
import wasmUrl from 'kya-core/wasm';

import { run } from './checks.js';

try {
  await init({ module_or_path: wasmUrl });
  document.getElementById('results').textContent = JSON.stringify(run(kya));
  document.body.dataset.ready = 'true';
} catch (error) {
  document.getElementById('results').textContent = String(error?.stack ?? error);
  document.body.dataset.ready = 'error';
}
