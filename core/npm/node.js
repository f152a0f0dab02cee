// kya-core's entry point under Node (the `node` condition of package.json's `exports`): the same
// module as in browsers, with its wasm read from beside this file and instantiated at import, so
// Node code calls the functions with no `init()` of its own. The default export (`init`) stays
// for code written for browsers: once instantiated, it returns at once.
import { readFileSync } from 'node:fs';

import { initSync } from './kya_core.js';

initSync({ module: readFileSync(new URL('./kya_core_bg.wasm', import.meta.url)) });

export * from './kya_core.js';
export { default } from './kya_core.js';
