// Node (ESM) importing the installed package by name, as a user's script would: prints the results.
import * as kya from 'kya-core';

import { run } from './checks.js';

console.log(JSON.stringify(run(kya)));
