// The browser package of kya-core (core/pkg/, built by scripts/build-core-wasm.sh) checked in Node
// against an independent EIP-712, ABI and EIP-191 implementation (viem, with the registry's
// compiled ABI) and against the live edge API.
//
// Run by the Rust end-to-end test `core_package` with:
//   KYA_API_URL   base URL of the Worker under wrangler dev, on a seeded chain
//   KYA_RPC_URL   the chain's JSON-RPC endpoint
//   KYA_REGISTRY  the registry's address
//   KYA_AGENTS    number of seeded agents
// Without KYA_API_URL only the offline checks (digests, typed data, calldata, addresses) run.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { decodeFunctionData, encodeFunctionData, getAddress, hashTypedData, keccak256, recoverMessageAddress, toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

import init, * as kya from '../../core/pkg/kya_core.js';
import { viemConsentDigest, viemDigest } from './viem-digest.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
await init({ module_or_path: fs.readFileSync(path.join(root, 'core/pkg/kya_core_bg.wasm')) });

const FORWARDER = '0x70c2fdD0CDada6b43195981928D76f5D32AE29e5';
const REGISTRY = '0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23';


const requests = [
  { from: '0x1111111111111111111111111111111111111111', to: REGISTRY, value: 0, gas: 300000, nonce: 0, deadline: 0, data: '0x' },
  { from: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', to: REGISTRY, value: '0', gas: '500000', nonce: '7', deadline: 1900000000, data: kya.attestComplianceCalldata(42) },
  { from: '0xa0ee7a142d267c1f36714e4a8f75612f20a79720', to: REGISTRY, value: '1', gas: '0x1e8480', nonce: '115792089237316195423570985008687907853269984665640564039457584007913129639935', deadline: '281474976710655', data: kya.reportRevenueCalldata(7, '123456789012345678901234567890', 'EUR', 'inference', 1700000000, 1702592000) },
  { from: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8', to: FORWARDER, value: 0, gas: 1, nonce: 3, data: kya.registerAgentCalldata({
    haftungsperson: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC', agentWallet: '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
    constitutionHash: keccak256(toHex('constitution')), capabilityHash: keccak256(toHex('capabilities')),
    operationalScope: 'summarises public filings — ünïcödé too', parentAgentId: 12, selfModifying: true }) },
];

test('forward-request digests equal viem for several requests, chains and forwarders', () => {
  for (const [chainId, forwarder] of [[84532, FORWARDER], [1, REGISTRY], [31337, '0x5FbDB2315678afecb367f032d93F642f64180aa3']]) {
    for (const request of requests) {
      assert.equal(kya.forwardRequestDigest(request, chainId, forwarder), viemDigest(request, chainId, forwarder));
    }
  }
});

test('the typed data for eth_signTypedData_v4 hashes, in viem, to the same digest', () => {
  for (const request of requests) {
    const typed = kya.forwardRequestTypedData(request, 84532, FORWARDER);
    assert.equal(typed.primaryType, 'ForwardRequest');
    assert.deepEqual(typed.domain, { name: 'MinimalForwarder', version: '1', chainId: 84532, verifyingContract: FORWARDER });
    assert.equal(typed.message.from, getAddress(request.from));
    const { EIP712Domain, ...types } = typed.types;
    assert.deepEqual(EIP712Domain.map((field) => field.name), ['name', 'version', 'chainId', 'verifyingContract']);
    const message = Object.fromEntries(Object.entries(typed.message).map(([name, value]) =>
      [name, ['value', 'gas', 'nonce', 'deadline'].includes(name) ? BigInt(value) : value]));
    assert.equal(hashTypedData({ domain: typed.domain, types, primaryType: typed.primaryType, message }),
      kya.forwardRequestDigest(request, 84532, FORWARDER));
  }
});

const registryAbi = JSON.parse(fs.readFileSync(path.join(root, 'contracts/artifacts/AgentRegistry.json'), 'utf8')).abi;

const CREATOR = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const WALLET = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const PERSON = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const UINT256_MAX = '115792089237316195423570985008687907853269984665640564039457584007913129639935';

const walletConsents = [
  { agentWallet: WALLET, creator: CREATOR, parentAgentId: 0, nonce: 0, deadline: 1900000000 },
  { agentWallet: WALLET.toLowerCase(), creator: PERSON, parentAgentId: '12', nonce: '7', deadline: UINT256_MAX },
];
const liabilityConsents = [
  { haftungsperson: PERSON, creator: CREATOR, agentWallet: WALLET, nonce: 0, deadline: 1900000000 },
  { haftungsperson: PERSON.toLowerCase(), creator: WALLET, agentWallet: CREATOR, nonce: UINT256_MAX, deadline: '1' },
];
const registries = [[84532, REGISTRY], [31337, '0x5FbDB2315678afecb367f032d93F642f64180aa3'], [1, FORWARDER]];

/** A typed data's message with its uint256 fields as BigInt, for viem. */
function forViem(typed) {
  const { EIP712Domain, ...types } = typed.types;
  const fields = types[typed.primaryType];
  const message = Object.fromEntries(fields.map(({ name, type }) =>
    [name, type === 'uint256' ? BigInt(typed.message[name]) : typed.message[name]]));
  return { domain: typed.domain, types, primaryType: typed.primaryType, message, EIP712Domain };
}

test('consent digests equal viem, and their typed data hashes to them in viem', () => {
  for (const [chainId, registry] of registries) {
    for (const [primaryType, consents, digestOf] of [
      ['AgentWalletConsent', walletConsents, kya.agentWalletConsentDigest],
      ['LiabilityConsent', liabilityConsents, kya.liabilityConsentDigest],
    ]) {
      for (const consent of consents) {
        const digest = digestOf(consent, chainId, registry);
        assert.equal(digest, viemConsentDigest(primaryType, consent, chainId, registry), `${primaryType} on ${chainId}`);
        assert.equal(kya.consentDigest({ primaryType, ...consent }, chainId, registry), digest);
        const typed = kya.consentTypedData({ primaryType, ...consent }, chainId, registry);
        assert.equal(typed.primaryType, primaryType);
        assert.deepEqual(typed.domain, { name: 'AgentRegistry', version: '1', chainId, verifyingContract: getAddress(registry) });
        const { EIP712Domain, ...viemTyped } = forViem(typed);
        assert.deepEqual(EIP712Domain.map((field) => field.name), ['name', 'version', 'chainId', 'verifyingContract']);
        assert.deepEqual(Object.keys(viemTyped.types), [primaryType], 'only the consent signed');
        assert.equal(hashTypedData(viemTyped), digest);
        assert.ok(Object.values(typed.message).every((value) => typeof value === 'string'), 'numbers as decimal strings');
      }
    }
  }
  assert.throws(() => kya.agentWalletConsentDigest({ ...walletConsents[0], nonce: -1 }, 84532, REGISTRY), /nonce must be a non-negative integer/);
  assert.throws(() => kya.liabilityConsentDigest({ ...liabilityConsents[0], haftungsperson: '0x12' }, 84532, REGISTRY), /haftungsperson/);
  assert.throws(() => kya.consentTypedData({ primaryType: 'ForwardRequest', ...walletConsents[0] }, 84532, REGISTRY), /invalid consent/);
  assert.throws(() => kya.consentDigest({ primaryType: 'AgentWalletConsent', ...walletConsents[0] }, 84532, '0xnothex'), /registry/);
});

test('consentsNeeded asks for what the registry checks, ready for consentTypedData', () => {
  const root = { creator: CREATOR, agentWallet: WALLET, haftungsperson: PERSON, parentAgentId: 0 };
  const both = kya.consentsNeeded(root, 3, '5', 1900000000);
  assert.deepEqual(both, {
    agentWallet: { primaryType: 'AgentWalletConsent', agentWallet: WALLET, creator: CREATOR, parentAgentId: '0', nonce: '3', deadline: '1900000000' },
    liability: { primaryType: 'LiabilityConsent', haftungsperson: PERSON, creator: CREATOR, agentWallet: WALLET, nonce: '5', deadline: '1900000000' },
  });
  for (const consent of [both.agentWallet, both.liability]) {
    const typed = kya.consentTypedData(consent, 84532, REGISTRY);
    assert.equal(hashTypedData(forViem(typed)), viemConsentDigest(consent.primaryType, consent, 84532, REGISTRY));
  }
  // The sender is the wallet: only the Haftungsperson consents; is both: nobody.
  assert.deepEqual(kya.consentsNeeded({ ...root, creator: WALLET }, 0, 0, 1), {
    agentWallet: null,
    liability: { primaryType: 'LiabilityConsent', haftungsperson: PERSON, creator: WALLET, agentWallet: WALLET, nonce: '0', deadline: '1' },
  });
  assert.deepEqual(kya.consentsNeeded({ ...root, creator: PERSON, agentWallet: PERSON }, 0, 0, 1), { agentWallet: null, liability: null });
  // A child inherits its parent's Haftungsperson: only the wallet consents, naming the parent.
  const child = kya.consentsNeeded({ ...root, parentAgentId: '9' }, 1, 1, 1);
  assert.equal(child.liability, null);
  assert.equal(child.agentWallet.parentAgentId, '9');
  // One signer for both: the liability consent at the nonce after the wallet's.
  const same = kya.consentsNeeded({ ...root, haftungsperson: WALLET }, 4, 4, 1);
  assert.deepEqual([same.agentWallet.nonce, same.liability.nonce], ['4', '5']);
  assert.throws(() => kya.consentsNeeded({ ...root, creator: 'nobody' }, 0, 0, 1), /creator/);
});

test('registration calldata decodes, with viem, against the registry ABI', () => {
  const registration = {
    haftungsperson: PERSON, agentWallet: WALLET.toLowerCase(),
    constitutionHash: keccak256(toHex('constitution')), capabilityHash: keccak256(toHex('capabilities')),
    operationalScope: 'summarises public filings — ünïcödé too', parentAgentId: 0, selfModifying: true,
  };
  const walletConsent = `0x${'ab'.repeat(65)}`;
  const liabilityConsent = `0x${'cd'.repeat(65)}`;
  const consented = decodeFunctionData({
    abi: registryAbi,
    data: kya.registerAgentWithConsentCalldata({ ...registration, deadline: '1900000000', walletConsent, liabilityConsent }),
  });
  assert.equal(consented.functionName, 'registerAgentWithConsent');
  assert.deepEqual(consented.args, [
    PERSON, WALLET, registration.constitutionHash, registration.capabilityHash, registration.operationalScope,
    0n, true, 1900000000n, walletConsent, liabilityConsent,
  ]);
  // A party who sends the registration gives no signature: absent, '' or '0x' are all empty bytes.
  const child = decodeFunctionData({
    abi: registryAbi,
    data: kya.registerAgentWithConsentCalldata({ ...registration, parentAgentId: 12, deadline: 5, walletConsent, liabilityConsent: '0x' }),
  });
  assert.deepEqual(child.args.slice(5), [12n, true, 5n, walletConsent, '0x']);
  const none = decodeFunctionData({ abi: registryAbi, data: kya.registerAgentWithConsentCalldata({ ...registration, deadline: 0, walletConsent: '' }) });
  assert.deepEqual(none.args.slice(8), ['0x', '0x']);
  const plain = decodeFunctionData({ abi: registryAbi, data: kya.registerAgentCalldata(registration) });
  assert.equal(plain.functionName, 'registerAgent');
  assert.deepEqual(plain.args, consented.args.slice(0, 7));
  assert.throws(() => kya.registerAgentWithConsentCalldata({ ...registration, deadline: 1, operationalScope: 's'.repeat(1025) }),
    /operationalScope is 1025 bytes; the registry stores at most 1024/);
  assert.throws(() => kya.registerAgentWithConsentCalldata({ ...registration, deadline: 1, walletConsent: 'abc' }), /walletConsent must be a 0x hex string/);
  assert.throws(() => kya.registerAgentWithConsentCalldata({ ...registration, walletConsent }), /deadline/);
});

test('consents are taken back with invalidateConsents or invalidateConsentsThrough, and live at most 7 days', () => {
  const call = decodeFunctionData({ abi: registryAbi, data: kya.invalidateConsentsCalldata() });
  assert.equal(call.functionName, 'invalidateConsents');
  assert.equal(call.args, undefined);
  // Through a nonce, as a number, a decimal string past 2^53 or hex: encoded as viem encodes it.
  for (const [nonce, expected] of [[7, 7n], ['18446744073709551617', 2n ** 64n + 1n], ['0x10', 16n]]) {
    const data = kya.invalidateConsentsThroughCalldata(nonce);
    assert.equal(data, encodeFunctionData({ abi: registryAbi, functionName: 'invalidateConsentsThrough', args: [expected] }));
    const through = decodeFunctionData({ abi: registryAbi, data });
    assert.equal(through.functionName, 'invalidateConsentsThrough');
    assert.deepEqual(through.args, [expected]);
  }
  assert.throws(() => kya.invalidateConsentsThroughCalldata(-1), /nonce must be a non-negative integer/);
  assert.throws(() => kya.invalidateConsentsThroughCalldata('seven'), /nonce must be a non-negative integer/);
  assert.equal(kya.latestConsentDeadline(1700000000), 1700000000 + 7 * 86400);
  assert.throws(() => kya.latestConsentDeadline(1.5), /blockTimestamp/);
});

test('malformed requests and addresses are refused with the field named', () => {
  const bad = { ...requests[1], nonce: -1 };
  assert.throws(() => kya.forwardRequestDigest(bad, 84532, FORWARDER), /request\.nonce must be a non-negative integer/);
  assert.throws(() => kya.forwardRequestDigest({ ...requests[1], from: '0x12' }, 84532, FORWARDER), /request\.from must be a 20-byte hex address/);
  assert.throws(() => kya.forwardRequestDigest(requests[1], 84532, '0xnothex'), /forwarder/);
  assert.equal(kya.isAddress('0x2efab5b3bef49e56a6ce1dcb1a39ef63c312ea23'), true);
  assert.equal(kya.isAddress('0x2EFAB5B3BEF49E56A6CE1DCB1A39EF63C312EA23'), true);
  assert.equal(kya.isAddress('0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312Ea23'), false, 'a broken checksum');
  assert.equal(kya.isAddress('2efab5b3bef49e56a6ce1dcb1a39ef63c312ea23'), false);
  for (const address of [REGISTRY.toLowerCase(), FORWARDER.toUpperCase().replace('0X', '0x')]) {
    assert.equal(kya.checksumAddress(address), getAddress(address));
  }
  assert.throws(() => kya.checksumAddress('0x12'), /must be 0x followed by 40 hex digits/);
});

test('the KYA decision follows the intended use of SPEC.md', () => {
  assert.equal(kya.kyaDecision(true, true), 'provision');
  assert.equal(kya.kyaDecision(true, false), 'renew attestation');
  assert.equal(kya.kyaDecision(false, false), 'deny or register');
});

// ERC-8128 signed requests (signRequest, verifyRequest), anvil's first development key.
const AGENT_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const AGENT = privateKeyToAccount(AGENT_KEY).address;
const KEYID = `erc8128:84532:${AGENT.toLowerCase()}`;
const INFER = 'https://api.provider.example/v1/infer?model=small';
const PROMPT = JSON.stringify({ prompt: 'hello' });

/** A signed POST of PROMPT to INFER at 1700000000, and the headers it is received with. */
function signedPrompt(overrides = {}) {
  const signed = kya.signRequest({
    method: 'POST', url: INFER, headers: { 'content-type': 'application/json' }, body: PROMPT,
    privateKey: AGENT_KEY, chainId: 84532, created: 1700000000, nonce: 'n-1', components: ['content-type'], ...overrides,
  });
  const headers = {
    'Content-Type': 'application/json', 'Signature-Input': signed.signatureInput, Signature: signed.signature,
    'Content-Digest': signed.contentDigest,
  };
  return { signed, received: { method: 'POST', url: INFER, headers, body: PROMPT, authority: 'api.provider.example', now: 1700000030, chainId: 84532 } };
}

test('signRequest signs what verifyRequest accepts, and viem recovers the agent from the signature base', async () => {
  const { signed, received } = signedPrompt();
  const params = `("@method" "@authority" "@path" "@query" "content-digest" "content-type");created=1700000000;expires=1700000060;nonce="n-1";keyid="${KEYID}"`;
  const digest = `sha-256=:${createHash('sha256').update(PROMPT).digest('base64')}:`;
  assert.deepEqual({ ...signed, signature: undefined }, {
    signatureInput: `eth=${params}`, signature: undefined, contentDigest: digest,
    keyid: KEYID, created: 1700000000, expires: 1700000060, nonce: 'n-1',
  });
  // RFC 9421's signature base written out here; the signature is its EIP-191 personal_sign.
  const base = ['"@method": POST', '"@authority": api.provider.example', '"@path": /v1/infer', '"@query": ?model=small',
    `"content-digest": ${digest}`, '"content-type": application/json', `"@signature-params": ${params}`].join('\n');
  const bytes = Buffer.from(/^eth=:(.*):$/.exec(signed.signature)[1], 'base64');
  assert.equal(bytes.length, 65);
  assert.equal(await recoverMessageAddress({ message: base, signature: toHex(bytes) }), AGENT);

  const verified = { outcome: 'verified', signer: AGENT, keyid: KEYID, chainId: 84532, created: 1700000000,
    expires: 1700000060, nonce: 'n-1', components: ['@method', '@authority', '@path', '@query', 'content-digest', 'content-type'],
    label: 'eth', nonceKey: `${KEYID}:n-1`, rememberUntil: 1700000120 };
  assert.deepEqual(kya.verifyRequest(received), verified);
  // The body as bytes, header names in any case, a list value, the authority served: the same.
  const { 'Content-Type': type, ...rest } = received.headers;
  assert.deepEqual(kya.verifyRequest({ ...received, headers: { ...rest, 'CONTENT-TYPE': [type] },
    body: new TextEncoder().encode(PROMPT), authority: 'API.provider.example:443' }), verified);

  // Defaults: created now (the page's clock), 60 s, a fresh 128-bit nonce from crypto.getRandomValues.
  const before = Math.floor(Date.now() / 1000);
  const [a, b] = [0, 1].map(() => kya.signRequest({ method: 'GET', url: INFER, privateKey: AGENT_KEY, chainId: 84532 }));
  assert.ok(a.created >= before && a.created <= Math.floor(Date.now() / 1000) && a.expires === a.created + 60, JSON.stringify(a));
  assert.match(a.nonce, /^[A-Za-z0-9_-]{22}$/);
  assert.notEqual(a.nonce, b.nonce);
  assert.equal('contentDigest' in a, false, 'no body, no digest');
  const get = kya.verifyRequest({ method: 'GET', url: INFER, headers: { 'signature-input': a.signatureInput, signature: a.signature },
    authority: 'api.provider.example', now: a.created, chainId: 84532 });
  assert.deepEqual([get.outcome, get.signer, get.nonce, get.components], ['verified', AGENT, a.nonce, ['@method', '@authority', '@path', '@query']]);
});

test('verifyRequest refuses tampering with the API\'s reasons, and hands contract accounts an ERC-1271 call', () => {
  const { received } = signedPrompt();
  const refused = (request) => {
    const verdict = kya.verifyRequest(request);
    assert.equal(verdict.outcome, 'refused', JSON.stringify(verdict));
    assert.deepEqual(Object.keys(verdict).sort(), ['message', 'outcome', 'reason']);
    return verdict.reason;
  };
  assert.equal(refused({ ...received, body: JSON.stringify({ prompt: 'rm -rf' }) }), 'digest_mismatch');
  // A changed path or method no longer recovers to the keyid: refused when contract accounts are
  // not accepted; otherwise the keyid's account is asked, and an EOA (no code) answers nothing.
  const eoaOnly = { ...received, allowErc1271: false };
  assert.equal(refused({ ...eoaOnly, url: INFER.replace('/v1/infer', '/v1/admin') }), 'bad_signature');
  assert.equal(refused({ ...eoaOnly, method: 'PUT' }), 'bad_signature');
  const asked = kya.verifyRequest({ ...received, method: 'PUT' });
  assert.deepEqual([asked.outcome, asked.erc1271.address], ['erc1271', AGENT]);
  assert.equal(kya.erc1271Accepts('0x'), false, 'what an eth_call to an EOA returns');
  assert.equal(refused({ ...received, authority: 'api.other.example' }), 'wrong_authority');
  assert.equal(refused({ ...received, now: 1700000060 + 61 }), 'expired');
  assert.equal(refused({ ...received, now: 1700000000 - 61 }), 'not_yet_valid');
  assert.equal(refused({ ...received, chainId: 1 }), 'wrong_chain');
  const { Signature: _, ...unsigned } = received.headers;
  assert.equal(refused({ ...received, headers: unsigned }), 'malformed');
  assert.equal(refused(signedPrompt({ expires: 1700000000 + 301 }).received), 'window_too_long');
  assert.equal(kya.verifyRequest({ ...signedPrompt({ expires: 1700000000 + 301 }).received, maxWindowSecs: 600 }).outcome, 'verified');

  // Signed by the agent's key for another account (a contract wallet it owns): the account decides.
  const account = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
  const headers = { ...received.headers, 'Signature-Input': received.headers['Signature-Input'].replace(AGENT.toLowerCase(), account.toLowerCase()) };
  const pending = kya.verifyRequest({ ...received, headers });
  assert.equal(pending.outcome, 'erc1271');
  // Nothing a caller could take for a verified signer before the account has answered.
  assert.deepEqual(Object.keys(pending).sort(), ['erc1271', 'outcome', 'unverified']);
  assert.equal(pending.signer, undefined);
  assert.equal(pending.nonceKey, undefined);
  assert.equal(pending.unverified.signer, account);
  assert.equal(pending.unverified.nonceKey, `erc8128:84532:${account.toLowerCase()}:n-1`);
  assert.equal(pending.erc1271.address, account);
  assert.equal(pending.erc1271.chainId, 84532);
  const call = decodeFunctionData({
    abi: [{ type: 'function', name: 'isValidSignature', stateMutability: 'view', inputs: [{ name: 'hash', type: 'bytes32' }, { name: 'signature', type: 'bytes' }], outputs: [{ type: 'bytes4' }] }],
    data: pending.erc1271.calldata,
  });
  assert.deepEqual(call.args, [pending.erc1271.hash, pending.erc1271.signature]);
  assert.equal(kya.erc1271Accepts(`0x1626ba7e${'0'.repeat(56)}`), true);
  assert.equal(kya.erc1271Accepts('0x'), false);
  assert.equal(kya.erc1271Accepts(`0xffffffff${'0'.repeat(56)}`), false);
  assert.equal(refused({ ...received, headers, allowErc1271: false }), 'bad_signature');

  assert.throws(() => kya.signRequest({ method: 'GET', url: INFER, privateKey: '0x12', chainId: 1 }), /privateKey must be 0x and 64 hex digits/);
  assert.throws(() => kya.signRequest({ method: 'GET', url: 'not a url', privateKey: AGENT_KEY, chainId: 1 }), /does not parse/);
  assert.throws(() => kya.verifyRequest({ ...received, now: -1 }), /now must be a non-negative whole number/);
  assert.throws(() => kya.verifyRequest({ ...received, body: 5 }), /a string or a Uint8Array/);
  // The host the provider serves is required, as at the API: never taken from the URL, which a
  // provider may have rebuilt from the request's own Host header.
  const { authority: _served, ...unbound } = received;
  assert.throws(() => kya.verifyRequest(unbound), /authority is required: the host\[:port\] the provider serves/);
  assert.throws(() => kya.verifyRequest({ ...received, authority: ' ' }), /authority is required/);
});

const api = process.env.KYA_API_URL;

/** GET from the API as a client IP of its own, so the 60-per-minute limit never interferes. */
async function get(route, ip) {
  const response = await fetch(`${api}${route}`, { headers: { 'CF-Connecting-IP': ip } });
  assert.equal(response.status, 200, `${route}: ${response.status}`);
  const blockTimestamp = Number(response.headers.get('x-block-timestamp'));
  assert.ok(Number.isInteger(blockTimestamp) && blockTimestamp > 0, `${route} carries X-Block-Timestamp`);
  const grace = response.headers.get('x-attestation-grace-period');
  const clock = grace === null ? null : { time: blockTimestamp, gracePeriod: Number(grace) };
  return { body: await response.json(), blockTimestamp, clock };
}

async function ethCall(data) {
  const response = await fetch(process.env.KYA_RPC_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_call', params: [{ to: process.env.KYA_REGISTRY, data }, 'latest'] }),
  });
  const answer = await response.json();
  assert.ok(answer.result, JSON.stringify(answer));
  return answer.result;
}

test('compliance, KYA decisions and decoded records agree with the API for every seeded agent', { skip: !api }, async () => {
  const agents = Number(process.env.KYA_AGENTS);
  assert.ok(agents > 0);
  const decisions = new Set();
  let revenueRecords = 0;
  for (let id = 1; id <= agents; id += 1) {
    // Three requests per agent: 15 agents per client IP stay under the 60-per-minute limit.
    const ip = `198.51.100.${1 + Math.floor(id / 15)}`;
    const { body, clock } = await get(`/api/v1/agent/${id}`, ip);
    assert.ok(clock, `agent ${id}: the answer names the registry's grace period`);
    const ours = kya.evaluateCompliance(body.agent, clock, body.children.length);
    const { isCompliant, ...compliance } = ours;
    assert.deepEqual(compliance, body.compliance, `agent ${id}: compliance`);
    assert.equal(isCompliant, body.compliance.isActive && body.compliance.attestationCurrent);

    // The record decoded in the package from a raw eth_call equals the API's record.
    assert.deepEqual(kya.decodeAgentRecord(await ethCall(kya.getAgentCalldata(id))), body.agent, `agent ${id}: record`);
    assert.deepEqual(kya.decodeChildren(await ethCall(kya.getChildrenCalldata(id))), body.children, `agent ${id}: children`);
    const revenue = await get(`/api/v1/agent/${id}/revenue?limit=500`, ip);
    const history = kya.decodeRevenueHistory(await ethCall(kya.getRevenueHistoryCalldata(id)));
    assert.deepEqual(history, revenue.body.data, `agent ${id}: revenue history`);
    revenueRecords += history.length;

    // KYA by wallet: the package's verdict at the check's block equals the API's.
    const check = await get(`/api/v1/kya/${body.agent.agentWallet.toLowerCase()}`, ip);
    assert.equal(check.body.checkedAt, new Date(check.blockTimestamp * 1000).toISOString());
    const verdict = check.body.agent
      ? kya.evaluateCompliance(check.body.agent, check.clock).isCompliant
      : false;
    assert.equal(verdict, check.body.isCompliant, `agent ${id}: KYA isCompliant`);
    const decision = kya.kyaDecision(check.body.isRegistered, verdict);
    decisions.add(decision);
    assert.equal(decision, check.body.isRegistered ? (verdict ? 'provision' : 'renew attestation') : 'deny or register');
  }
  assert.ok(revenueRecords > 0, 'the seed reports revenue, so the decoded histories were compared');
  // The seed covers every branch: compliant; lapsed, suspended or revoked (a revoked agent keeps
  // its wallet); and terminated (its wallet is free).
  assert.deepEqual([...decisions].sort(), ['deny or register', 'provision', 'renew attestation']);
});
