// viem's EIP-712 digest of a forwarder `ForwardRequest`, from viem's own encoding of the type:
// the independent reference the browser package's digests are compared with.
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
