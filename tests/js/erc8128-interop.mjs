// ERC-8128 both ways with the ERC authors' TypeScript implementation (@slicekit/erc8128, signing
// and recovering through viem), against the real Worker:
//   (a) requests signed by @slicekit/erc8128 with a viem local account, forwarded to
//       POST /api/v1/kya/verify as a provider would, come back verified with the right signer and
//       its KYA standing; a replay and a tampered body are refused with the API's reasons;
//   (b) requests signed by kya-core (`kya_core::erc8128::sign_request_with_secret`, written to a
//       file by the Rust test) pass @slicekit/erc8128's own verifyRequest, with viem's
//       verifyMessage and a nonce store that accepts each nonce once; replays and tampering fail.
//
// Run by the Rust end-to-end test `edge_api::interop` with:
//   KYA_API_URL        base URL of the Worker under wrangler dev
//   KYA_CHAIN_ID       the chain id the Worker verifies keyids against
//   KYA_INTEROP_KEY    the private key (hex) of the @slicekit/erc8128 signer, a registered agent
//   KYA_INTEROP_OURS   a JSON file of requests kya-core signed (see tests/it/edge_api/interop.rs)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import { signRequest, verifyRequest } from '@slicekit/erc8128';
import { getAddress, verifyMessage } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';

import { forwardedBody, OnceNonceStore } from './erc8128-provider.mjs';

const env = (name) => {
  const value = process.env[name];
  assert.ok(value, `${name} is set (the Rust test edge_api::interop runs this file)`);
  return value;
};
const API = env('KYA_API_URL');
const CHAIN_ID = Number(env('KYA_CHAIN_ID'));
const ours = JSON.parse(fs.readFileSync(env('KYA_INTEROP_OURS'), 'utf8'));

/** An @slicekit/erc8128 signer over a viem local account, as its README writes it. */
function signerOf(account) {
  return {
    chainId: CHAIN_ID,
    address: account.address,
    signMessage: (message) => account.signMessage({ message: { raw: message } }),
  };
}

const agent = privateKeyToAccount(env('KYA_INTEROP_KEY'));
const signer = signerOf(agent);

/** POSTs `request`'s parts to the Worker's verify endpoint; its status and JSON body. */
async function forward(request, overrides = {}) {
  const body = { ...(await forwardedBody(request)), ...overrides };
  const response = await fetch(`${API}/api/v1/kya/verify`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'cf-connecting-ip': '203.0.113.80' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

/** The parameters of the `eth` member of `request`'s Signature-Input. */
function signatureParams(request) {
  const input = request.headers.get('signature-input');
  const member = /^eth=\(([^)]*)\);(.*)$/.exec(input);
  assert.ok(member, `one eth member: ${input}`);
  const components = [...member[1].matchAll(/"([^"]+)"/g)].map((match) => match[1]);
  const params = Object.fromEntries(member[2].split(';').map((param) => {
    const [name, value] = param.split('=');
    return [name, value.startsWith('"') ? value.slice(1, -1) : Number(value)];
  }));
  return { components, ...params };
}

/** Asserts the Worker's accepted answer for `request` signed by `account`, exactly. */
function assertAccepted({ status, body }, request, account) {
  assert.equal(status, 200, JSON.stringify(body));
  const { components, created, expires, nonce, keyid } = signatureParams(request);
  assert.equal(keyid, `erc8128:${CHAIN_ID}:${account.address.toLowerCase()}`);
  const { kya, ...signature } = body;
  assert.deepEqual(signature, {
    verified: true,
    signer: getAddress(account.address),
    keyid,
    chainId: CHAIN_ID,
    created,
    expires,
    nonce,
    components,
  });
  assert.equal(kya.wallet, getAddress(account.address));
  return kya;
}

/** Asserts the agent's standing: registered, an active root, compliant. */
function assertCompliant(kya) {
  assert.equal(kya.isRegistered, true, JSON.stringify(kya));
  assert.equal(kya.isCompliant, true, JSON.stringify(kya));
  assert.equal(kya.agent.status, 'Active');
  assert.equal(kya.agent.agentWallet, getAddress(agent.address));
}

const INFER = 'https://api.provider.example/v1/infer?model=small&stream=0';
const PROMPT = JSON.stringify({ prompt: 'hello', max_tokens: 32 });

test('(a) @slicekit/erc8128: a POST with a JSON body and a query is verified by the Worker, its signer compliant', async () => {
  const request = await signRequest(INFER, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: PROMPT,
  }, signer);
  const { components } = signatureParams(request);
  assert.deepEqual(components, ['@authority', '@method', '@path', '@query', 'content-digest']);
  assertCompliant(assertAccepted(await forward(request), request, agent));
});

test('(a) @slicekit/erc8128: a GET with a query is verified by the Worker', async () => {
  const request = await signRequest('https://api.provider.example/v1/agents?status=Active&page=2', {}, signer);
  assert.deepEqual(signatureParams(request).components, ['@authority', '@method', '@path', '@query']);
  assertCompliant(assertAccepted(await forward(request), request, agent));
});

test('(a) @slicekit/erc8128: a POST that also covers content-type, with a 5-minute window, is verified', async () => {
  const request = await signRequest('https://api.provider.example/v1/jobs', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ job: 'summarise', urls: ['https://example.org/a'] }),
  }, signer, { components: ['content-type'], ttlSeconds: 300 });
  const { components, created, expires } = signatureParams(request);
  assert.deepEqual(components, ['@authority', '@method', '@path', 'content-digest', 'content-type']);
  assert.equal(expires - created, 300);
  assertCompliant(assertAccepted(await forward(request), request, agent));
});

test('(a) @slicekit/erc8128: its nonce is used once; a changed body, query or header is refused', async () => {
  const request = await signRequest(INFER, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: PROMPT,
  }, signer, { components: ['content-type'] });
  const refused = async (overrides, reason) => {
    const { status, body } = await forward(request, overrides);
    assert.equal(status, 200, JSON.stringify(body));
    assert.equal(body.verified, false, JSON.stringify(body));
    assert.equal(body.reason, reason, JSON.stringify(body));
    assert.deepEqual(Object.keys(body).sort(), ['message', 'reason', 'verified']);
  };
  // Refused before the nonce is claimed, so they do not use it up.
  await refused({ body: Buffer.from('{"prompt":"rm -rf"}').toString('base64') }, 'digest_mismatch');
  await refused({ url: INFER.replace('model=small', 'model=large') }, 'bad_signature');
  const headers = Object.fromEntries(request.headers);
  await refused({ headers: { ...headers, 'content-type': 'text/plain' } }, 'bad_signature');
  assertAccepted(await forward(request), request, agent);
  await refused({}, 'replayed');
});

test('(a) @slicekit/erc8128: a signer with no agent is verified, and its standing says so', async () => {
  const stranger = privateKeyToAccount(generatePrivateKey());
  const request = await signRequest('https://api.provider.example/v1/agents?status=Active', {}, signerOf(stranger));
  const kya = assertAccepted(await forward(request), request, stranger);
  assert.equal(kya.isRegistered, false);
  assert.equal(kya.isCompliant, false);
  assert.equal(kya.agent, null);
});

/** `case` of the Rust-written file as the fetch Request a provider received. */
function receivedRequest(signed, changes = {}) {
  const { method, url, headers, body } = { ...signed, ...changes };
  return new Request(url, { method, headers, body: body ?? undefined });
}

/** @slicekit/erc8128's verifyRequest with viem's verifyMessage (EIP-191 recovery) and `nonceStore`. */
function theirVerify(request, nonceStore) {
  return verifyRequest({ request, verifyMessage, nonceStore });
}

for (const signed of ours.cases) {
  test(`(b) kya-core's ${signed.name} passes @slicekit/erc8128's verifyRequest, once`, async () => {
    const nonces = new OnceNonceStore();
    const keyid = `erc8128:${ours.chainId}:${ours.signer.toLowerCase()}`;
    const result = await theirVerify(receivedRequest(signed), nonces);
    assert.deepEqual(result, {
      ok: true,
      address: ours.signer.toLowerCase(),
      chainId: ours.chainId,
      label: 'eth',
      components: signed.components,
      params: { created: ours.created, expires: ours.expires, nonce: signed.nonce, keyid },
      replayable: false,
      binding: 'request-bound',
    });
    assert.equal(getAddress(result.address), ours.signer);
    // The nonce store saw exactly this keyid and nonce, for the rest of the signature's window.
    assert.deepEqual([...nonces.seen.keys()], [`${keyid}:${signed.nonce}`]);
    const ttl = nonces.seen.get(`${keyid}:${signed.nonce}`);
    assert.ok(ttl > 0 && ttl <= ours.expires - ours.created, `ttl ${ttl}`);
    // The same request again is a replay.
    assert.deepEqual(await theirVerify(receivedRequest(signed), nonces), { ok: false, reason: 'replay' });
  });
}

test("(b) kya-core's signatures, tampered, fail @slicekit/erc8128's verifyRequest", async () => {
  const byName = Object.fromEntries(ours.cases.map((signed) => [signed.name, signed]));
  const post = byName['POST with a JSON body and a query'];
  const get = byName['GET with a query'];
  const nonces = new OnceNonceStore();
  const verdict = async (signed, changes) => theirVerify(receivedRequest(signed, changes), nonces);
  assert.deepEqual(await verdict(post, { body: '{"prompt":"rm -rf"}' }), { ok: false, reason: 'digest_mismatch' });
  assert.deepEqual(await verdict(post, { method: 'PUT' }), { ok: false, reason: 'bad_signature' });
  assert.deepEqual(await verdict(get, { url: get.url.replace('page=2', 'page=3') }), { ok: false, reason: 'bad_signature' });
  assert.deepEqual(await verdict(get, { url: get.url.replace('api.provider.example', 'api.other.example') }),
    { ok: false, reason: 'bad_signature' });
  // A real signature by the same key, of another request.
  const borrowed = { ...get.headers, signature: post.headers.signature };
  assert.deepEqual(await verdict(get, { headers: borrowed }), { ok: false, reason: 'bad_signature' });
  // None of them used a nonce: the untampered requests still pass.
  assert.equal(nonces.seen.size, 0);
  assert.equal((await verdict(post, {})).ok, true);
  assert.equal((await verdict(get, {})).ok, true);
});
