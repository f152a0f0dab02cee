"""kya: agents sign their requests (ERC-8128) and carry their KYA pass; providers admit them
offline. The checks are kya-core's, the Rust library the registry's API, its command line and its
npm package run too, here through the extension module ``kya._core``; this package adds the
Python-facing parts: the ``httpx`` and ``requests`` auths (``kya.agent``), the pass an agent
carries (``PassSource``), and a provider's gate (``kya.provider``).
"""

from kya._core import (
    DEFAULT_WINDOW_SECS,
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
    SignError,
    __version__,
    address_of,
    erc1271_accepts,
    prepare_request,
    sign_request,
    verify_agent_request,
    verify_pass,
    verify_request,
)
from kya.passes import PassSource, PassUnavailable
from kya.provider import Admission, Gate, IssuerKeysUnavailable, NonceStore
from kya.signer import HashSigner, RequestSigner

__all__ = [
    "DEFAULT_WINDOW_SECS",
    "JWKS_PATH",
    "PASS_HEADER",
    "PASS_SKEW_SECS",
    "SIGNATURE_REASONS",
    "Admission",
    "Gate",
    "HashSigner",
    "InvalidInput",
    "IssuerKeysUnavailable",
    "Jwks",
    "KeyCache",
    "KyaError",
    "NonceMemory",
    "NonceStore",
    "PassSource",
    "PassUnavailable",
    "PreparedRequest",
    "RequestSigner",
    "SignError",
    "__version__",
    "address_of",
    "erc1271_accepts",
    "prepare_request",
    "sign_request",
    "verify_agent_request",
    "verify_pass",
    "verify_request",
]
