// The browser package of kya-core (core/pkg/, built by scripts/build-core-wasm.sh) checked in Node
// against an independent EIP-712 and ABI implementation (viem, with the registry's compiled ABI)
// and against the live edge API.
//
// Run by the Rust end-to-end test `core_package` with:
//   KYA_API_URL   base URL of the Worker under wrangler dev, on a seeded chain
//   KYA_RPC_URL   the chain's JSON-RPC endpoint
//   KYA_REGISTRY  the registry's address
//   KYA_AGENTS    number of seeded agents
// Without KYA_API_URL only the offline checks (digests, typed data, calldata, addresses) run.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { decodeFunctionData, getAddress, hashTypedData, keccak256, toHex } from 'viem';

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

const api = process.env.KYA_API_URL;

/** GET from the API as a client IP of its own, so the 60-per-minute limit never interferes. */
async function get(route, ip) {
  const response = await fetch(`${api}${route}`, { headers: { 'CF-Connecting-IP': ip } });
  assert.equal(response.status, 200, `${route}: ${response.status}`);
  const blockTimestamp = Number(response.headers.get('x-block-timestamp'));
  assert.ok(Number.isInteger(blockTimestamp) && blockTimestamp > 0, `${route} carries X-Block-Timestamp`);
  return { body: await response.json(), blockTimestamp };
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
    const { body, blockTimestamp } = await get(`/api/v1/agent/${id}`, ip);
    const ours = kya.evaluateCompliance(body.agent, blockTimestamp, body.children.length);
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
      ? kya.evaluateCompliance(check.body.agent, check.blockTimestamp).isCompliant
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
