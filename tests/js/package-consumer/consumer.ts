// A TypeScript user of every export of kya-core, type-checked (tsc --noEmit, strict) against the
// installed package by tests/js/package-install.test.mjs. Annotations name the generated types;
// each @ts-expect-error must stay an error, so types that went loose (`any`) fail the check too.
import init, {
  type AgentStatus,
  type AgentWalletConsentInput,
  type AgentWalletConsentView,
  type ConsentInput,
  type ConsentKind,
  type ConsentTypedData,
  type ConsentsNeededView,
  type LiabilityConsentInput,
  type PartiesInput,
  type RegisterAgentWithConsentInput,
  type AgentView,
  type AttestedRecord,
  type ChildIds,
  type Compliance,
  type ComplianceBadge,
  type ComplianceVerdict,
  type ForwardRequestInput,
  type KyaDecision,
  type RegisterAgentInput,
  type RevenueView,
  type TypedData,
  type TypedDataField,
  type UintInput,
  type BodyInput,
  type HeadersInput,
  type Reason,
  type RequestVerdict,
  type SignRequestInput,
  type StandingClock,
  type SignedRequestHeaders,
  type VerifiedSignature,
  type VerifyRequestInput,
  agentWalletConsentDigest,
  attestComplianceCalldata,
  checksumAddress,
  consentDigest,
  consentTypedData,
  consentsNeeded,
  complianceBadge,
  decodeAgentRecord,
  decodeChildren,
  decodeComplianceStatus,
  decodeRevenueHistory,
  erc1271Accepts,
  evaluateCompliance,
  forwardRequestDigest,
  forwardRequestTypedData,
  getAgentByWalletCalldata,
  getAgentCalldata,
  getChildrenCalldata,
  getRevenueHistoryCalldata,
  initSync,
  isAddress,
  KeyCache,
  NonceMemory,
  kyaDecision,
  liabilityConsentDigest,
  registerAgentCalldata,
  registerAgentWithConsentCalldata,
  reportRevenueCalldata,
  signRequest,
  verifyRequest,
} from 'kya-core';
import { ChangeFeedError, followChanges, type ChangeEvent, type ChangesPage } from 'kya-core/changes';

await init();
initSync({ module: new Uint8Array() });

const record: AttestedRecord = { status: 'Active', lastAttestation: '2023-11-14T22:13:20.000Z' };
const clock: StandingClock = { time: 1700000000, gracePeriod: 604800 };
const verdict: ComplianceVerdict = evaluateCompliance(record, clock, 2);
const compliance: Compliance = verdict;
const seconds: number = compliance.secondsSinceAttestation;
const compliant: boolean = verdict.isCompliant;
const status: AgentStatus = verdict.status;
const badge: ComplianceBadge = complianceBadge({ status: 'Revoked', lastAttestation: null }, clock);
const decision: KyaDecision = kyaDecision(true, compliant);
// @ts-expect-error: a status is one of the four names
evaluateCompliance({ status: 'Paused', lastAttestation: null }, clock);
// @ts-expect-error: a badge is a word, not a number
const notABadge: number = complianceBadge(record, clock);
// @ts-expect-error: compliance is judged by the registry's grace period, never a bare time
evaluateCompliance(record, 1700000000);

const agent: AgentView = decodeAgentRecord('0x');
const wallet: string = agent.agentWallet;
const constitution: string = agent.constitutionHash;
// @ts-expect-error: an address is text (EIP-55), not a number
const walletNumber: number = agent.creator;
// @ts-expect-error: a hash is text (0x and hex), not bytes
const hashBytes: Uint8Array = agent.capabilityHash;
const registeredAt: string | null = agent.registeredAt;
const agentStatus: AgentStatus = agent.status;
// The API's agent record is an attested record: it goes straight back in.
const again: ComplianceVerdict = evaluateCompliance(agent, clock);
const children: ChildIds = decodeChildren('0x');
const firstChild: number | undefined = children[0];
const history: RevenueView[] = decodeRevenueHistory('0x');
const amount: number | undefined = history[0]?.amount;
const periodEnd: string | null | undefined = history[0]?.periodEnd;
const onChain: Compliance = decodeComplianceStatus('0x');

const calls: string[] = [
  getAgentCalldata(1),
  getAgentByWalletCalldata(wallet),
  getChildrenCalldata(1),
  getRevenueHistoryCalldata(1),
  attestComplianceCalldata(1),
  reportRevenueCalldata(1, '123456789012345678901234567890', 'EUR', 'inference', 1700000000, 1702592000),
  reportRevenueCalldata(1, 1250, 'EUR', 'inference', 1700000000, 1702592000),
];
const registration: RegisterAgentInput = {
  haftungsperson: wallet, agentWallet: wallet, constitutionHash: `0x${'11'.repeat(32)}`,
  capabilityHash: `0x${'22'.repeat(32)}`, operationalScope: 'scope', parentAgentId: 0, selfModifying: false,
};
calls.push(registerAgentCalldata(registration));
// @ts-expect-error: selfModifying is required
registerAgentCalldata({ ...registration, selfModifying: undefined });

const nonce: UintInput = '7';
const request: ForwardRequestInput = { from: wallet, to: wallet, value: 0, gas: 300000, nonce, data: calls[0] ?? '0x' };
const digest: string = forwardRequestDigest(request, 84532, wallet);
const typed: TypedData = forwardRequestTypedData({ ...request, deadline: 1900000000 }, 84532, wallet);
const fields: TypedDataField[] = typed.types.ForwardRequest;
const chainId: number = typed.domain.chainId;
const messageNonce: string = typed.message.nonce;
// @ts-expect-error: a request's gas is a number or a string
forwardRequestDigest({ ...request, gas: true }, 84532, wallet);
const valid: boolean = isAddress(wallet) && checksumAddress(wallet) === wallet;

// Consents: which a registration needs, their digests and typed data, and the call carrying them.
const parties: PartiesInput = { creator: wallet, agentWallet: wallet, haftungsperson: wallet, parentAgentId: 0 };
const needed: ConsentsNeededView = consentsNeeded(parties, 0, '1', 1900000000);
const walletView: AgentWalletConsentView | null = needed.agentWallet;
// What consentsNeeded gives goes straight into consentTypedData and consentDigest.
const consentTyped: ConsentTypedData | undefined = walletView ? consentTypedData(walletView, 84532, wallet) : undefined;
const consentKind: ConsentKind | undefined = consentTyped?.primaryType;
const consentFields = consentTyped?.types.AgentWalletConsent;
const liabilityDigest: string | undefined = needed.liability ? consentDigest(needed.liability, 84532, wallet) : undefined;
const walletConsent: AgentWalletConsentInput = { agentWallet: wallet, creator: wallet, parentAgentId: 0, nonce: '3', deadline: 1 };
const liabilityConsent: LiabilityConsentInput = { haftungsperson: wallet, creator: wallet, agentWallet: wallet, nonce: 0, deadline: '1' };
const tagged: ConsentInput = { primaryType: 'LiabilityConsent', ...liabilityConsent };
const consentDigests: string[] = [
  agentWalletConsentDigest(walletConsent, 84532, wallet),
  liabilityConsentDigest(liabilityConsent, 84532, wallet),
  consentDigest(tagged, 84532, wallet),
];
// @ts-expect-error: a consent names its primaryType
consentDigest(walletConsent, 84532, wallet);
// @ts-expect-error: an AgentWalletConsent has no haftungsperson, a LiabilityConsent no parentAgentId
consentTypedData({ primaryType: 'AgentWalletConsent', ...liabilityConsent }, 84532, wallet);
const consented: RegisterAgentWithConsentInput = { ...registration, deadline: 1900000000, walletConsent: `0x${'ab'.repeat(65)}` };
calls.push(registerAgentWithConsentCalldata(consented));
// @ts-expect-error: the consents' deadline is required
registerAgentWithConsentCalldata({ ...registration, walletConsent: '0x' });

// ERC-8128: a request signed for an agent, and a provider's local verdict on it.
const body: BodyInput = new TextEncoder().encode('{}');
const toSign: SignRequestInput = { method: 'POST', url: 'https://api.provider.example/v1', body, privateKey: `0x${'11'.repeat(32)}`, chainId: 84532 };
const signedHeaders: SignedRequestHeaders = signRequest({ ...toSign, body: '{}', created: 1700000000, nonce: 'n', components: ['content-type'] });
const digestHeader: string | undefined = signedHeaders.contentDigest;
const received: HeadersInput = { 'signature-input': signedHeaders.signatureInput, signature: [signedHeaders.signature] };
const toVerify: VerifyRequestInput = { method: 'POST', url: toSign.url, headers: received, body, authority: 'api.provider.example', now: 1700000000, chainId: 84532, requireNonce: true };
const requestVerdict: RequestVerdict = verifyRequest({ ...toVerify, maxWindowSecs: 300 });
// @ts-expect-error: the host the provider serves is required, never taken from the URL
verifyRequest({ method: 'GET', url: toSign.url, headers: received, now: 1700000000, chainId: 84532 });
let verdictSigner: string | undefined;
let refusal: Reason | undefined;
if (requestVerdict.outcome === 'verified') {
  const verifiedSignature: VerifiedSignature = requestVerdict;
  const claim: string | null = verifiedSignature.nonceKey;
  verdictSigner = claim === null ? undefined : verifiedSignature.signer;
} else if (requestVerdict.outcome === 'erc1271') {
  verdictSigner = erc1271Accepts('0x') ? requestVerdict.erc1271.address : undefined;
} else {
  refusal = requestVerdict.reason;
}
// @ts-expect-error: a chain id is a number
signRequest({ ...toSign, chainId: '84532' });
// @ts-expect-error: verifying needs the time: core reads no clock
verifyRequest({ method: 'GET', url: toSign.url, headers: received, authority: 'api.provider.example', chainId: 84532 });

// What an offline verifier keeps: the issuer's keys, and the nonces seen.
const keyCache = new KeyCache({ refetchIntervalMs: 10_000 });
const mayFetch: boolean = keyCache.beginFetch('unknown_key', Date.now());
if (mayFetch) keyCache.fetched({ keys: [] }, 'max-age=300', Date.now());
const heldKeys: unknown = keyCache.jwks(Date.now());
const keyCacheState: [boolean, number, number] = [keyCache.inFlight, keyCache.attempts, keyCache.trustedUntilMs];
// @ts-expect-error: the options are numbers of milliseconds
new KeyCache({ refetchIntervalMs: '10s' });
const nonceMemory = new NonceMemory();
const firstUse: boolean = nonceMemory.claim('erc8128:1:0xab:n', 1700000060, 1700000000);
const remembered: number = nonceMemory.size;
// @ts-expect-error: a reason is one of the API's eleven names
const notAReason: Reason = 'tired';

// The change feed's iterator (kya-core/changes): events narrow on `type`.
async function lastFlip(): Promise<boolean | undefined> {
  const controller = new AbortController();
  try {
    for await (const event of followChanges({ base: 'https://api.example', agentId: [7], type: 'agent.compliance_changed', signal: controller.signal })) {
      const seen: ChangeEvent = event;
      if (seen.type === 'agent.compliance_changed') return seen.to;
    }
  } catch (error) {
    if (error instanceof ChangeFeedError) return error.status === 410 ? undefined : false;
  }
  return undefined;
}
const emptyPage: ChangesPage = { events: [], next: null, more: false };
// @ts-expect-error: a status change goes from a status, not a boolean
const notAStatusChange: ChangeEvent = { ...({} as ChangeEvent), type: 'agent.status_changed', from: true, to: false };

export const used = [
  lastFlip, emptyPage, notAStatusChange,
  seconds, status, badge, decision, notABadge, constitution, walletNumber, hashBytes, registeredAt, agentStatus,
  again, firstChild, amount, periodEnd, onChain, digest, fields, chainId, messageNonce, valid,
  consentKind, consentFields, liabilityDigest, consentDigests,
  digestHeader, verdictSigner, refusal, notAReason,
  heldKeys, keyCacheState, firstUse, remembered,
];
