"""An agent's signer: its key (or a signer of hashes held elsewhere), its chain, its window and
the header fields it covers, signing each request with the clock's time and a fresh nonce
(``kya._core.sign_request``: kya-core's rules)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

from kya._core import DEFAULT_WINDOW_SECS, InvalidInput, PrivateKey, sign_request

if TYPE_CHECKING:
    from kya._core import Headers

#: Signs a 32-byte hash (the EIP-191 hash of a request's signature base) and returns the 65-byte
#: signature ``r || s || v``: a KMS, a hardware key, a wallet's raw-hash signing.
HashSigner = Callable[[bytes], bytes]

#: The longest window a verifier accepts by default (kya-core's policy).
MAX_WINDOW_SECS = 300

Body = Union[bytes, str, None]


def held_key(private_key: Union[PrivateKey, str, bytes, None]) -> Optional[PrivateKey]:
    """``private_key`` as a ``PrivateKey``, read once (``None`` stays ``None``)."""
    if private_key is None or isinstance(private_key, PrivateKey):
        return private_key
    return PrivateKey(private_key)


class RequestSigner:
    """Signs HTTP requests for one account with ERC-8128: Request-Bound, Non-Replayable."""

    def __init__(
        self,
        *,
        chain_id: int,
        private_key: Union[PrivateKey, str, bytes, None] = None,
        signer: Optional[HashSigner] = None,
        address: Optional[str] = None,
        window_secs: int = DEFAULT_WINDOW_SECS,
        components: Sequence[str] = (),
    ) -> None:
        if (private_key is None) == (signer is None):
            raise InvalidInput("give exactly one of private_key and signer")
        if not 1 <= window_secs <= MAX_WINDOW_SECS:
            raise InvalidInput(f"a signature's window must be 1 to {MAX_WINDOW_SECS} seconds, not {window_secs}")
        # Read once: reading a key derives its public key, as costly as a signature.
        key = held_key(private_key)
        account = address if address is not None else key.address if key is not None else None
        if account is None:
            raise InvalidInput("a signer needs the address it signs for: address=...")
        #: The account the keyids name (and whose pass the agent carries): the key's own, or
        #: ``address`` (a contract account the key signs for, ERC-1271; a signer's account).
        self.address: str = account
        self._account = address
        self.chain_id = chain_id
        self.window_secs = window_secs
        self.components = [name.strip().lower() for name in components]
        self._private_key = key
        self._signer = signer

    def __repr__(self) -> str:
        return f"RequestSigner(address={self.address!r}, chain_id={self.chain_id})"

    def headers(
        self, method: str, url: str, headers: Optional[Headers] = None, body: Body = None
    ) -> dict[str, str]:
        """The headers to add to the request: ``Signature-Input``, ``Signature`` and, with a
        body, ``Content-Digest``."""
        created = int(time.time())
        signed = sign_request(
            method,
            url,
            chain_id=self.chain_id,
            private_key=self._private_key,
            signer=self._signer,
            address=self._account,
            headers=headers,
            body=body,
            created=created,
            expires=created + self.window_secs,
            components=self.components,
        )
        return dict(signed["headers"])
