// A provider's HTTP server in Node that serves `POST /v1/infer` to AI agents that sign their
// requests with ERC-8128 and carry a KYA pass (`KYA-Pass`), deciding every request offline with
// the package's `verifyAgentRequest`: the signature and the pass are checked here, the nonce is
// remembered here (`NonceMemory`), the issuer's keys are fetched once and kept as `KeyCache` says
// (again for a key not held yet, throttled), and the change feed (`followChanges`) revokes the
// passes of an agent that lost compliance. No call to the KYA API per request. The Rust twin is
// client/examples/pass_provider.rs.
//
//   200 {agentId, signer, passBlock, echo}: a valid signature and the signer's compliant pass;
//   401 {error, message}: no valid signature (the reason), or no pass;
//   403 {error, message}: a pass that does not admit the signer (not_the_signer, not_compliant,
//       expired, revoked, unknown_key, ...);
//   503 {error, message}: the issuer's keys could not be refreshed within their bound.
//
// Settings: KYA_API_URL (default http://127.0.0.1:3000, the passes' issuer), CHAIN_ID and
// REGISTRY_ADDRESS (the chain and registry it trusts), PROVIDER_LISTEN (default 127.0.0.1:8082)
// and PROVIDER_ORIGIN, the origin agents sign for (default http://<PROVIDER_LISTEN>).
//
// In a project of your own, import from the package: `import { KeyCache, NonceMemory, lostComplianceAt, verifyAgentRequest } from 'kya-core'`
// and `import { followChanges } from 'kya-core/changes'`.
import http from 'node:http';

import { followChanges } from '../../pkg/changes.js';
import { KeyCache, NonceMemory, lostComplianceAt, verifyAgentRequest } from '../../pkg/node.js';

const API = (process.env.KYA_API_URL || 'http://127.0.0.1:3000').replace(/\/$/, '');
const LISTEN = process.env.PROVIDER_LISTEN || '127.0.0.1:8082';
const ORIGIN = (process.env.PROVIDER_ORIGIN || `http://${LISTEN}`).replace(/\/$/, '');
/** The host agents sign for: from this server's settings, never from a request's Host header. */
const AUTHORITY = new URL(ORIGIN).host;
const CHAIN_ID = Number(process.env.CHAIN_ID || 84532);
const REGISTRY = process.env.REGISTRY_ADDRESS;
if (!REGISTRY) throw new Error('REGISTRY_ADDRESS is required: the registry whose standing this provider trusts');
const MAX_BODY_BYTES = 64 * 1024;

// The issuer's keys, kept by the package's KeyCache: a fetch at most every 10 s whether it
// works or not, one at a time (requests that want one meanwhile wait for it), and no key trusted
// once the JWKS could not be refreshed for one lifetime past its freshness. So passes naming
// made-up keys, which anyone can sign, cannot make this server call the API per request, and a
// key the issuer removed stops verifying while the API is down.
const keys = new KeyCache();
let fetching = null;
function refreshKeys(reason) {
  if (fetching) return fetching;
  if (!keys.beginFetch(reason, Date.now())) return Promise.resolve();
  fetching = (async () => {
    try {
      const response = await fetch(`${API}/.well-known/jwks.json`);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      keys.fetched(await response.json(), response.headers.get('cache-control'), Date.now());
    } catch (error) {
      if (keys.inFlight) keys.failed();
      console.error(`provider: the issuer's keys could not be fetched (${error.message})`);
    } finally {
      fetching = null;
    }
  })();
  return fetching;
}
await refreshKeys('stale');
if (keys.jwks(Date.now()) === null) throw new Error(`the issuer's JWKS at ${API} could not be fetched`);

// Revocations: the latest block at which each wallet was seen not compliant.
const lostAt = new Map();
(async () => {
  for await (const event of followChanges({ base: API, type: 'agent.compliance_changed' })) {
    // The core's rule (the Rust and Python providers apply the same): a loss at its block.
    const loss = lostComplianceAt(event);
    if (loss !== null) lostAt.set(loss.wallet, Math.max(lostAt.get(loss.wallet) ?? 0, loss.block));
  }
})().catch((error) => console.error(`provider: the change feed stopped (${error.message}); no revocations`));

// Nonces seen, each kept until its signature could no longer pass.
const nonces = new NonceMemory();

const KEYS_UNAVAILABLE = [503, { error: 'issuer_keys_unavailable', message: "the issuer's keys could not be refreshed in time: no pass is trusted until they are" }];

async function admit(request, body) {
  if (keys.isStale(Date.now())) await refreshKeys('stale');
  const now = Math.floor(Date.now() / 1000);
  const received = { method: request.method, url: `${ORIGIN}${request.url}`, headers: request.headers, body, authority: AUTHORITY, now, chainId: CHAIN_ID };
  const check = () => {
    const jwks = keys.jwks(Date.now());
    return jwks && verifyAgentRequest(received, { jwks, issuer: API, chainId: CHAIN_ID, registry: REGISTRY });
  };
  let verdict = check();
  if (verdict?.reason === 'unknown_key') {
    await refreshKeys('unknown_key');
    verdict = check();
  }
  if (!verdict) return KEYS_UNAVAILABLE;
  if (verdict.outcome === 'refused') {
    const status = verdict.stage === 'signature' || verdict.reason === 'no_pass' ? 401 : 403;
    return [status, { error: verdict.reason, message: verdict.message }];
  }
  const { signature, pass } = verdict;
  const lost = lostAt.get(pass.wallet);
  if (lost !== undefined && lost >= pass.claims.block.number) {
    return [403, { error: 'revoked', message: `${pass.wallet}'s compliance was lost at block ${lost}` }];
  }
  if (!nonces.claim(signature.nonceKey, signature.rememberUntil, now)) {
    return [401, { error: 'replayed', message: `nonce ${signature.nonce} was used before` }];
  }
  let prompt = null;
  try {
    prompt = JSON.parse(body.toString('utf8'));
  } catch {}
  return [200, { agentId: pass.claims.kya.agentId, signer: signature.signer, passBlock: pass.claims.block.number, echo: prompt }];
}

const server = http.createServer(async (request, response) => {
  const chunks = [];
  let size = 0;
  for await (const chunk of request) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) break;
    chunks.push(chunk);
  }
  const [status, answer] = request.method !== 'POST' || !request.url.startsWith('/v1/infer')
    ? [404, { error: 'not found' }]
    : size > MAX_BODY_BYTES
      ? [413, { error: 'the body is too large' }]
      : await admit(request, Buffer.concat(chunks)).catch((error) => [502, { error: `the issuer's keys: ${error.message}` }]);
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(answer));
});
const [host, port] = LISTEN.split(':');
server.listen(Number(port), host, () => {
  console.log(`provider: POST ${ORIGIN}/v1/infer, for agents with a KYA pass (issuer ${API})`);
});
