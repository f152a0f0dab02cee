"""An Ethereum account that signs 32-byte EIP-712 digests for the relayer's flows: a forward
request (the account is its ``from``) and a registration's consent (the account is its agent
wallet or Haftungsperson). A local private key, or a signer of hashes held elsewhere (a KMS, a
hardware key, a wallet's raw-hash signing) with the address it signs for. The digests and
signatures are kya-core's (``kya._core``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

from kya._core import (
    InvalidInput,
    PrivateKey,
    SignError,
    checksum_address,
    forward_request_digest,
    recover_signer,
    sign_consent,
    sign_forward_request,
)
from kya.signer import HashSigner, held_key

if TYPE_CHECKING:
    from kya._core import Consent, ForwardRequest


class Account:
    """Who signs: ``Account(private_key)`` or ``Account(signer=sign_hash, address=...)``. Its
    ``repr`` shows the address, never the key."""

    def __init__(
        self,
        private_key: Union[PrivateKey, str, bytes, None] = None,
        *,
        signer: Optional[HashSigner] = None,
        address: Optional[str] = None,
    ) -> None:
        if (private_key is None) == (signer is None):
            raise InvalidInput("give exactly one of private_key and signer")
        key = held_key(private_key)
        if key is not None:
            own = key.address
            if address is not None and address.lower() != own.lower():
                raise InvalidInput(f"the private key is {own}'s, not {address}'s")
            self.address: str = own
        elif address is None:
            raise InvalidInput("a signer needs the address it signs for: address=...")
        else:
            self.address = checksum_address(address)
        self._private_key = key
        self._signer = signer

    def __repr__(self) -> str:
        kind = "key" if self._private_key is not None else "signer"
        return f"Account(address={self.address!r}, {kind})"

    def sign_forward_request(self, request: ForwardRequest, *, chain_id: int, forwarder: str) -> bytes:
        """The request's signature; ``request["from"]`` must be this account. A signer's
        signature must recover to it: the forwarder takes no other (``ECDSA.recover``)."""
        if str(request.get("from", "")).lower() != self.address.lower():
            raise SignError(f"request.from is {request.get('from')}, not this account ({self.address})")
        signature = sign_forward_request(
            request, chain_id=chain_id, forwarder=forwarder, private_key=self._private_key, signer=self._signer
        )
        if self._signer is not None:
            digest = forward_request_digest(request, chain_id=chain_id, forwarder=forwarder)
            recovered = recover_signer(digest, signature)
            if recovered is None or recovered.lower() != self.address.lower():
                raise SignError(
                    f"the signer's signature recovers to {recovered or 'no address'}, not {self.address}: "
                    "the forwarder would refuse it"
                )
        return signature

    def sign_consent(self, consent: Consent, *, chain_id: int, registry: str) -> bytes:
        """The consent's signature; its signer must be this account. Not checked against the
        address: a contract wallet's signer signs for it (ERC-1271), which the registry asks."""
        if consent["signer"].lower() != self.address.lower():
            raise SignError(f"the {consent['kind']} is {consent['signer']}'s to sign, not {self.address}'s")
        return sign_consent(
            consent, chain_id=chain_id, registry=registry, private_key=self._private_key, signer=self._signer
        )

