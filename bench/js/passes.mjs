// The Node half of `cargo bench -p kya-bench --bench passes`: one pass (from the fixture file the
// Rust bench wrote) verified by the npm package's verifyPass (wasm) and by npm jose's jwtVerify
// with the same checks, and the Ed25519 check alone in Node's crypto, interleaved sample by sample
// in one process. Prints JSON: the median nanoseconds per verification of each, and the versions.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';

import { createLocalJWKSet, jwtVerify } from 'jose';

import { verifyPass } from '../../core/pkg/node.js';

const fixture = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const { pass, jwks, issuer, chainId, registry, now, samples, sampleMillis } = fixture;
const trust = { jwks, issuer, chainId, registry, now };
const keys = createLocalJWKSet(jwks);
const options = { issuer, algorithms: ['EdDSA'], typ: 'kya-pass+jwt', clockTolerance: 60, currentDate: new Date(now * 1000) };

// The signature check alone, as jose makes it: Node's crypto (OpenSSL) under the signer's key.
const [header, payload, signatureText] = pass.split('.');
const signingInput = Buffer.from(`${header}.${payload}`);
const signature = Buffer.from(signatureText, 'base64url');
const signer = jwks.keys.find((key) => key.kid === JSON.parse(Buffer.from(header, 'base64url')).kid);
const publicKey = crypto.createPublicKey({ key: signer, format: 'jwk' });
const checkSignature = () => crypto.verify(null, signingInput, publicKey, signature);
if (!checkSignature()) throw new Error('crypto.verify refused the signature');

// Both must accept the pass, or the bench measures a refusal.
if (verifyPass(pass, trust).outcome !== 'verified') throw new Error('verifyPass refused the pass');
await jwtVerify(pass, keys, options);

/** Nanoseconds per call of one sample: a loop of at least `sampleMillis`. */
async function sample(run) {
  const started = process.hrtime.bigint();
  let runs = 0;
  let elapsed = 0n;
  do {
    await run();
    runs += 1;
    elapsed = process.hrtime.bigint() - started;
  } while (Number(elapsed) / 1e6 < sampleMillis);
  return Number(elapsed) / runs;
}

const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)];
// Warm both up (JIT, the wasm's first calls) before anything counts.
for (let i = 0; i < 200; i += 1) {
  verifyPass(pass, trust);
  await jwtVerify(pass, keys, options);
}
const ours = [];
const theirs = [];
const signatures = [];
for (let i = 0; i < samples; i += 1) {
  ours.push(await sample(() => verifyPass(pass, trust)));
  theirs.push(await sample(() => jwtVerify(pass, keys, options)));
  signatures.push(await sample(checkSignature));
}
const require = createRequire(import.meta.url);
console.log(JSON.stringify({
  oursNanos: median(ours), joseNanos: median(theirs), signatureNanos: median(signatures), node: process.version,
  jose: require('jose/package.json').version,
}));
