// viem's EIP-712 digests of a forwarder `ForwardRequest` and of the registry's two consents,
// from viem's own encoding of the types written out here: the independent reference the browser
// package's digests are compared with.
import { hashTypedData } from 'viem';

/** viem's digest of `request` for the forwarder at `forwarder` on `chainId`. */
export function viemDigest(request, chainId, forwarder) {
  return hashTypedData({
    domain: { name: 'MinimalForwarder', version: '1', chainId, verifyingContract: forwarder },
    types: {
      ForwardRequest: [
        { name: 'from', type: 'address' },
        { name: 'to', type: 'address' },
        { name: 'value', type: 'uint256' },
        { name: 'gas', type: 'uint256' },
        { name: 'nonce', type: 'uint256' },
        { name: 'deadline', type: 'uint48' },
        { name: 'data', type: 'bytes' },
      ],
    },
    primaryType: 'ForwardRequest',
    message: {
      from: request.from,
      to: request.to,
      value: BigInt(request.value),
      gas: BigInt(request.gas),
      nonce: BigInt(request.nonce),
      deadline: BigInt(request.deadline ?? 0),
      data: request.data,
    },
  });
}

/** The registry's consent types, as AgentRegistry.sol hashes them (INTERFACE.md section 5). */
const CONSENT_TYPES = {
  AgentWalletConsent: [
    { name: 'agentWallet', type: 'address' },
    { name: 'creator', type: 'address' },
    { name: 'parentAgentId', type: 'uint256' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
  LiabilityConsent: [
    { name: 'haftungsperson', type: 'address' },
    { name: 'creator', type: 'address' },
    { name: 'agentWallet', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/** viem's digest of a consent (`primaryType` names which) for the registry at `registry` on `chainId`. */
export function viemConsentDigest(primaryType, consent, chainId, registry) {
  const fields = CONSENT_TYPES[primaryType];
  const message = Object.fromEntries(fields.map(({ name, type }) =>
    [name, type === 'uint256' ? BigInt(consent[name]) : consent[name]]));
  return hashTypedData({
    domain: { name: 'AgentRegistry', version: '1', chainId, verifyingContract: registry },
    types: { [primaryType]: fields },
    primaryType,
    message,
  });
}
