// A request a Python agent signed (python/e2e/system_agent.py's `sign`), checked by the npm
// package's verifiers, for tests/it/edge_api/python_system.rs. Reads the JSON file it is given:
// `{ request: { method, url, headers, body (base64) }, authority, jwks, issuer, chainId,
// registry }`; prints `{ request, agent }`: `verifyRequest`'s verdict on the signature and
// `verifyAgentRequest`'s on the signature with the pass.
import { readFileSync } from 'node:fs';

import { verifyAgentRequest, verifyRequest } from '../../core/pkg/node.js';

const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const now = Math.floor(Date.now() / 1000);
const received = {
  method: job.request.method,
  url: job.request.url,
  headers: job.request.headers,
  body: new Uint8Array(Buffer.from(job.request.body, 'base64')),
  authority: job.authority,
  now,
  chainId: job.chainId,
};
const trust = { jwks: job.jwks, issuer: job.issuer, chainId: job.chainId, registry: job.registry, now };
console.log(JSON.stringify({ request: verifyRequest(received), agent: verifyAgentRequest(received, trust) }));
