// KYA passes both ways with an independent JOSE implementation (npm `jose`), and the package's
// verifyAgentRequest, in one Node process:
//   (a) passes kya-core signed (written to a file by the Rust test core_package::passes) verify
//       with our verifyPass and with jose's jwtVerify, the same claims out of both; every change
//       to a claim, the header or the signature is refused by both;
//   (b) passes jose mints with the issuer's private JWK verify with ours; jose's with another
//       `typ` or `alg`-confusion header are refused by ours;
//   (c) verifyAgentRequest admits a request signed by the pass's wallet (signRequest) and refuses
//       it with another wallet's pass, without one, or with a stale one.
//
// Run with KYA_PASSES, the JSON file the Rust test wrote.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import { SignJWT, createLocalJWKSet, importJWK, jwtVerify } from 'jose';

import * as kya from '../../core/pkg/node.js';

const fixture = JSON.parse(fs.readFileSync(process.env.KYA_PASSES ?? assert.fail('KYA_PASSES is set'), 'utf8'));
const { jwks, issuer, chainId, registry, wallet, walletKey, strangerKey, passes, privateJwk, now } = fixture;
const trust = { jwks, issuer, chainId, registry, now };
const joseKeys = createLocalJWKSet(jwks);
const joseOptions = {
  issuer, algorithms: ['EdDSA'], typ: 'kya-pass+jwt', clockTolerance: 60, currentDate: new Date(now * 1000),
};

/** jose's verdict on `jws`: its payload, or the error's code. */
async function jose(jws) {
  try {
    return { payload: (await jwtVerify(jws, joseKeys, joseOptions)).payload };
  } catch (error) {
    return { code: error.code ?? error.name };
  }
}

test('a pass kya-core signed verifies with ours and with jose, with the same claims', async () => {
  for (const name of ['valid', 'previousKey']) {
    const ours = kya.verifyPass(passes[name], trust);
    assert.equal(ours.outcome, 'verified', `${name}: ${JSON.stringify(ours)}`);
    assert.equal(ours.wallet, wallet);
    const theirs = await jose(passes[name]);
    assert.ok(theirs.payload, `${name}: jose refused it: ${theirs.code}`);
    assert.deepEqual(ours.claims, theirs.payload, name);
    assert.equal(ours.claims.sub, `eip155:${chainId}:${wallet}`);
    assert.equal(ours.claims.kya.isCompliant, true);
  }
});

test('every change to a pass is refused by both', async () => {
  const expected = {
    expired: 'expired', tamperedClaims: 'bad_signature', tamperedSignature: 'bad_signature',
    respelledHeader: 'bad_signature', unknownKey: 'unknown_key', otherIssuer: 'wrong_issuer',
    truncated: 'malformed',
  };
  for (const [name, reason] of Object.entries(expected)) {
    const ours = kya.verifyPass(passes[name], trust);
    assert.deepEqual([ours.outcome, ours.reason], ['refused', reason], `${name}: ${JSON.stringify(ours)}`);
    const theirs = await jose(passes[name]);
    assert.ok(theirs.code, `${name}: jose accepted it`);
  }
  // Our trust settings, each wrong in turn.
  assert.equal(kya.verifyPass(passes.valid, { ...trust, chainId: chainId + 1 }).reason, 'wrong_chain');
  assert.equal(kya.verifyPass(passes.valid, { ...trust, registry: wallet }).reason, 'wrong_registry');
});

test('a pass jose mints with the issuer key verifies with ours; a mistyped one does not', async () => {
  const key = await importJWK(privateJwk, 'EdDSA');
  const claims = kya.verifyPass(passes.valid, trust).claims;
  const mint = (header, body = claims) => new SignJWT(body).setProtectedHeader(header).sign(key);
  const header = { alg: 'EdDSA', typ: 'kya-pass+jwt', kid: privateJwk.kid };
  const minted = kya.verifyPass(await mint(header), trust);
  assert.equal(minted.outcome, 'verified', JSON.stringify(minted));
  assert.deepEqual(minted.claims, claims);
  // A claim this version does not know is ignored (a later issuer may add one).
  const extended = kya.verifyPass(await mint(header, { ...claims, note: 'later' }), trust);
  assert.equal(extended.outcome, 'verified', JSON.stringify(extended));
  // Another type, or a header member a verifier would act on (a `jku` pointing at someone
  // else's keys): refused.
  assert.equal(kya.verifyPass(await mint({ ...header, typ: 'JWT' }), trust).reason, 'wrong_type');
  const pointed = await mint({ ...header, jku: 'https://attacker.example/jwks.json' });
  assert.equal(kya.verifyPass(pointed, trust).reason, 'malformed');
  // A claim changed and signed by the issuer's key is a true pass: what matters is the key.
  const promoted = kya.verifyPass(await mint(header, { ...claims, exp: claims.exp + 10 }), trust);
  assert.equal(promoted.claims.exp, claims.exp + 10);
});

test('verifyAgentRequest admits the pass holder\'s own signed request and no other', () => {
  const url = 'https://api.provider.example/v1/infer?model=small';
  const request = (key, pass, nonce) => {
    const signed = kya.signRequest({
      method: 'POST', url, headers: { 'content-type': 'application/json' }, body: '{"prompt":"hi"}',
      privateKey: key, chainId, created: now, nonce, components: ['content-type'],
    });
    const headers = {
      'content-type': 'application/json', 'signature-input': signed.signatureInput, signature: signed.signature,
      'content-digest': signed.contentDigest,
    };
    if (pass) {
      headers['KYA-Pass'] = pass;
    }
    return { method: 'POST', url, headers, body: '{"prompt":"hi"}', authority: 'api.provider.example', now: now + 1, chainId };
  };
  const admitted = kya.verifyAgentRequest(request(walletKey, passes.valid, 'n-1'), trust);
  assert.equal(admitted.outcome, 'admitted', JSON.stringify(admitted));
  assert.equal(admitted.signature.signer, wallet);
  assert.equal(admitted.signature.nonceKey, `erc8128:${chainId}:${wallet.toLowerCase()}:n-1`);
  assert.equal(admitted.pass.wallet, wallet);
  const refused = (verdict) => [verdict.outcome, verdict.stage, verdict.reason];
  assert.deepEqual(refused(kya.verifyAgentRequest(request(strangerKey, passes.valid, 'n-2'), trust)),
    ['refused', 'pass', 'not_the_signer']);
  assert.deepEqual(refused(kya.verifyAgentRequest(request(walletKey, null, 'n-3'), trust)),
    ['refused', 'pass', 'no_pass']);
  assert.deepEqual(refused(kya.verifyAgentRequest(request(walletKey, passes.expired, 'n-4'), trust)),
    ['refused', 'pass', 'expired']);
  const tampered = request(walletKey, passes.valid, 'n-5');
  tampered.body = '{"prompt":"rm -rf"}';
  assert.deepEqual(refused(kya.verifyAgentRequest(tampered, trust)), ['refused', 'signature', 'digest_mismatch']);
  // Signed for this provider, presented to another: the pass does not make up for the host.
  const elsewhere = { ...request(walletKey, passes.valid, 'n-6'), authority: 'api.other.example' };
  assert.deepEqual(refused(kya.verifyAgentRequest(elsewhere, trust)), ['refused', 'signature', 'wrong_authority']);
  const { authority: _served, ...unbound } = request(walletKey, passes.valid, 'n-7');
  assert.throws(() => kya.verifyAgentRequest(unbound, trust), /authority is required/);
});

test('a JWKS changed in place is read again: a key taken out stops verifying at once', () => {
  // The package reads a JWKS once while its content stays the same; the same object, edited,
  // must not keep trusting the key it held before.
  const keys = structuredClone(jwks);
  const held = { ...trust, jwks: keys };
  assert.equal(kya.verifyPass(passes.valid, held).outcome, 'verified');
  assert.equal(kya.verifyPass(passes.valid, held).outcome, 'verified', 'read from the cache');
  const signer = keys.keys.shift();
  assert.equal(kya.verifyPass(passes.valid, held).reason, 'unknown_key');
  keys.keys.push(signer);
  assert.equal(kya.verifyPass(passes.valid, held).outcome, 'verified');
  keys.keys.at(-1).x = keys.keys[0].x;
  assert.equal(kya.verifyPass(passes.valid, held).reason, 'bad_signature', 'the kid kept, its key replaced');
  assert.throws(() => kya.verifyPass(passes.valid, { ...trust, jwks: 'not an object' }), /keys/);
});

test('KeyCache: one fetch at a time, attempts throttled whether they work or not, trust bounded', () => {
  const cache = new kya.KeyCache({ refetchIntervalMs: 10_000 });
  assert.equal(cache.jwks(0), null, 'nothing held yet');
  assert.equal(cache.beginFetch('stale', 1_000), true);
  // While it runs, and then within the interval, nothing else starts: 200 made-up kids, 0 fetches.
  for (let i = 0; i < 200; i++) assert.equal(cache.beginFetch('unknown_key', 1_001 + i), false);
  cache.fetched(jwks, 'public, max-age=60', 1_200);
  assert.deepEqual(cache.jwks(1_200), jwks);
  assert.equal(cache.beginFetch('unknown_key', 10_999), false);
  assert.equal(cache.beginFetch('unknown_key', 11_000), true);
  cache.failed();
  assert.equal(cache.beginFetch('unknown_key', 20_999), false, 'a failure counts as an attempt');
  assert.equal(cache.attempts, 2);
  // Fresh 60 s, trusted 60 s more, then not at all while no fetch works.
  assert.equal(cache.isStale(61_199), false);
  assert.equal(cache.isStale(61_200), true);
  assert.equal(cache.trustedUntilMs, 121_200);
  assert.deepEqual(cache.jwks(121_199), jwks);
  assert.equal(cache.jwks(121_200), null);
  // A document that is not a JWKS is a failed fetch, and says so.
  assert.equal(cache.beginFetch('stale', 130_000), true);
  assert.throws(() => cache.fetched({ keys: 5 }, null, 130_000), /keys/);
  assert.equal(cache.inFlight, false);
  assert.throws(() => cache.failed(), /no fetch was begun/);
  assert.throws(() => cache.beginFetch('whenever', 0), /'stale' or 'unknown_key'/);
});

test('KeyCache honours no-store and clamps a huge max-age to a day', () => {
  const cache = new kya.KeyCache();
  cache.beginFetch('stale', 0);
  cache.fetched(jwks, 'no-store', 0);
  assert.equal(cache.isStale(0), true, 'revalidated on every use');
  assert.deepEqual(cache.jwks(9_999), jwks, 'usable until the next attempt may start');
  assert.equal(cache.jwks(10_000), null);
  cache.beginFetch('stale', 10_000);
  cache.fetched(jwks, 'max-age=18446744073709551615', 10_000);
  assert.equal(cache.isStale(10_000 + 86_400_000 - 1), false);
  assert.equal(cache.isStale(10_000 + 86_400_000), true, 'a day at most');
});

test('NonceMemory claims a nonce once, until its signature can no longer pass', () => {
  const nonces = new kya.NonceMemory();
  assert.equal(nonces.claim('erc8128:1:0xab:n-1', 100, 50), true);
  assert.equal(nonces.claim('erc8128:1:0xab:n-1', 100, 100), false);
  assert.equal(nonces.claim('erc8128:1:0xab:n-2', 90, 60), true);
  assert.equal(nonces.size, 2);
  assert.equal(nonces.claim('erc8128:1:0xab:n-1', 200, 101), true, 'forgotten after its last second');
  assert.equal(nonces.size, 1, 'both expired ones forgotten, the new one kept');
  assert.throws(() => nonces.claim('k', -1, 0), /rememberUntil must be a non-negative whole number/);
});
