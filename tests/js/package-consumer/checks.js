// What the consumer project (a copy of this folder with kya-core installed from its tarball)
// computes with the package, the same in Node (node.mjs) and in the bundled page (page.js).
// The test (tests/js/package-install.test.mjs) compares the results with viem and with
// compliance values it works out itself from these fixtures.

export const CHAIN_ID = 84532;
export const FORWARDER = '0x70c2fdD0CDada6b43195981928D76f5D32AE29e5';
export const REGISTRY = '0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23';

export const requests = [
  { from: '0x1111111111111111111111111111111111111111', to: REGISTRY, value: 0, gas: 300000, nonce: 0, deadline: 0, data: '0x' },
  { from: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', to: REGISTRY, value: '0', gas: '500000', nonce: '7', deadline: 1900000000, data: '0xdeadbeef' },
  { from: '0xa0ee7a142d267c1f36714e4a8f75612f20a79720', to: FORWARDER, value: '1', gas: '0x1e8480', nonce: '115792089237316195423570985008687907853269984665640564039457584007913129639935', data: '0x00' },
];

const ATTESTED = '2023-11-14T22:13:20.000Z'; // 1700000000
const WEEK = 7 * 86400;

/**
 * [record, clock, childCount], the clock the block's time and the registry's grace period there:
 * each badge once, the initial week's boundary both ways, and a grace the owner shortened to 120 s
 * (lapsed at 300 s) and lengthened to two weeks (current at eight days).
 */
export const records = [
  [{ status: 'Active', lastAttestation: ATTESTED }, { time: 1700000000 + WEEK, gracePeriod: WEEK }, 3],
  [{ status: 'Active', lastAttestation: ATTESTED }, { time: 1700000000 + WEEK + 1, gracePeriod: WEEK }, 0],
  [{ status: 'Suspended', lastAttestation: ATTESTED }, { time: 1700000100, gracePeriod: WEEK }, 1],
  [{ status: 'Revoked', lastAttestation: null }, { time: 1700000000, gracePeriod: WEEK }, 0],
  [{ status: 'Terminated', lastAttestation: ATTESTED }, { time: 1700000000, gracePeriod: WEEK }, 2],
  [{ status: 'Active', lastAttestation: ATTESTED }, { time: 1700000300, gracePeriod: 120 }, 0],
  [{ status: 'Active', lastAttestation: ATTESTED }, { time: 1700000000 + 8 * 86400, gracePeriod: 2 * WEEK }, 0],
];

/** A registration by one key for another wallet, naming a third person Haftungsperson. */
export const parties = {
  creator: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
  agentWallet: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  haftungsperson: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
  parentAgentId: 0,
};
export const CONSENT_NONCES = [2, '7'];
export const CONSENT_DEADLINE = 1900000000;

/** An agent's key (anvil's first development key), signing an ERC-8128 request. */
export const AGENT_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const SIGNED_URL = 'https://api.provider.example/v1/infer?model=small';

/** Signs a POST with the defaults (the page's clock, a nonce from crypto.getRandomValues) and verifies it. */
function signedRequest(kya) {
  const body = '{"prompt":"hi"}';
  const signed = kya.signRequest({ method: 'POST', url: SIGNED_URL, body, privateKey: AGENT_KEY, chainId: CHAIN_ID });
  const headers = { 'signature-input': signed.signatureInput, signature: signed.signature, 'content-digest': signed.contentDigest };
  const verdict = kya.verifyRequest({ method: 'POST', url: SIGNED_URL, headers, body, authority: new URL(SIGNED_URL).host, now: signed.created, chainId: CHAIN_ID });
  const tampered = kya.verifyRequest({ method: 'POST', url: SIGNED_URL, headers, body: '{"prompt":"ho"}', authority: new URL(SIGNED_URL).host, now: signed.created, chainId: CHAIN_ID });
  return {
    outcome: verdict.outcome, signer: verdict.signer, window: signed.expires - signed.created,
    randomNonce: /^[A-Za-z0-9_-]{22}$/.test(signed.nonce), tampered: tampered.reason,
  };
}

/** Runs the checks with an initialised kya-core module. */
export function run(kya) {
  const needed = kya.consentsNeeded(parties, ...CONSENT_NONCES, CONSENT_DEADLINE);
  return {
    signedRequest: signedRequest(kya),
    digests: requests.map((request) => kya.forwardRequestDigest(request, CHAIN_ID, FORWARDER)),
    consents: [needed.agentWallet, needed.liability].map((consent) => ({
      consent,
      digest: kya.consentDigest(consent, CHAIN_ID, REGISTRY),
    })),
    compliance: records.map(([record, clock, children]) => kya.evaluateCompliance(record, clock, children)),
    badges: records.map(([record, clock]) => kya.complianceBadge(record, clock)),
  };
}
