"""kya: agents sign their requests (ERC-8128) and carry their KYA pass; providers admit them
offline. The checks are kya-core's, the Rust library the registry's API, its command line and its
npm package run too, here through the extension module ``kya._core``; this package adds the
Python-facing parts: the ``httpx`` and ``requests`` auths (``kya.agent``), the pass an agent
carries (``PassSource``), and a provider's gate (``kya.provider``), its ASGI middleware
(``kya.asgi``; FastAPI: ``kya.fastapi``) and its follower of the change feed (``kya.feed``); and a
typed client of the read API (``kya.client``); an agent's writes through the gasless relayer
(``kya.relayer``). What needs httpx (the client, the feed, the relayer's clients) is imported
on first use, so ``import kya`` needs no httpx.
"""

from typing import TYPE_CHECKING, Any

from kya._core import (
    DEFAULT_WINDOW_SECS,
    FEED_RECONNECT_MS,
    JWKS_PATH,
    PASS_HEADER,
    PASS_SKEW_SECS,
    SIGNATURE_REASONS,
    InvalidInput,
    Jwks,
    KeyCache,
    KyaError,
    NonceMemory,
    PreparedRequest,
    PrivateKey,
    SignError,
    __version__,
    address_of,
    compliance_lost_at,
    cursor_key,
    erc1271_accepts,
    prepare_request,
    sign_request,
    verify_agent_request,
    verify_pass,
    verify_request,
)
from kya.asgi import KyaMiddleware
from kya.passes import PassSource, PassUnavailable
from kya.provider import Admission, Gate, IssuerKeysUnavailable, NonceStore
from kya.signer import HashSigner, RequestSigner

if TYPE_CHECKING:
    from kya.client import ApiError, AsyncReadClient, ReadClient
    from kya.feed import AsyncChangeFollower, ChangeFollower, RevocationFollower
    from kya.relayer import AsyncRelayerClient, RelayerClient

#: The names imported on first use, and their modules (which import httpx).
_ON_FIRST_USE = {
    "ApiError": "kya.client",
    "AsyncReadClient": "kya.client",
    "ReadClient": "kya.client",
    "AsyncChangeFollower": "kya.feed",
    "ChangeFollower": "kya.feed",
    "RevocationFollower": "kya.feed",
    "AsyncRelayerClient": "kya.relayer",
    "RelayerClient": "kya.relayer",
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'kya' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_WINDOW_SECS",
    "FEED_RECONNECT_MS",
    "JWKS_PATH",
    "PASS_HEADER",
    "PASS_SKEW_SECS",
    "SIGNATURE_REASONS",
    "Admission",
    "ApiError",
    "AsyncChangeFollower",
    "AsyncReadClient",
    "AsyncRelayerClient",
    "ChangeFollower",
    "Gate",
    "HashSigner",
    "InvalidInput",
    "IssuerKeysUnavailable",
    "Jwks",
    "KeyCache",
    "KyaError",
    "KyaMiddleware",
    "NonceMemory",
    "NonceStore",
    "PassSource",
    "PassUnavailable",
    "PreparedRequest",
    "PrivateKey",
    "ReadClient",
    "RelayerClient",
    "RequestSigner",
    "RevocationFollower",
    "SignError",
    "__version__",
    "address_of",
    "compliance_lost_at",
    "cursor_key",
    "erc1271_accepts",
    "prepare_request",
    "sign_request",
    "verify_agent_request",
    "verify_pass",
    "verify_request",
]
