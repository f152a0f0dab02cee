"""Types of ``kya._core``, the extension module (python/src/*.rs): kya-core's ERC-8128 signing
and verifying, KYA passes, and what a provider's verifier keeps. Verdicts are ``dict``s, typed
here as ``TypedDict``s discriminated by ``outcome``."""

from typing import Any, Callable, Iterable, List, Literal, Mapping, Optional, Sequence, Tuple, TypedDict, Union

__version__: str
#: The header an agent sends its pass in: ``KYA-Pass``.
PASS_HEADER: str
#: Where the issuer serves its public keys: ``/.well-known/jwks.json``.
JWKS_PATH: str
#: How far a verifier's clock may be from the issuer's, for passes (60).
PASS_SKEW_SECS: int
#: How long a signature made by ``sign_request`` is valid when ``expires`` is not given (60).
DEFAULT_WINDOW_SECS: int
#: The eleven reasons a signature is refused, as the API names them.
SIGNATURE_REASONS: List[str]

class KyaError(Exception):
    """The base of every error the kya package raises."""

class InvalidInput(KyaError):
    """An argument kya-core refuses: a key, an address, a JWKS, a header, a time."""

class SignError(InvalidInput):
    """A request that cannot be signed as ERC-8128 requires."""

#: Header fields: a mapping (``dict``, ``httpx.Headers``, ``requests``' headers) or
#: ``(name, value)`` pairs (ASGI's, as ``bytes``); a list of values is one field sent twice.
Headers = Union[
    Mapping[str, Union[str, List[str]]],
    Iterable[Tuple[Union[str, bytes], Union[str, bytes]]],
]
Body = Union[bytes, bytearray, memoryview, str, None]
Reason = Literal[
    "malformed",
    "unsupported",
    "wrong_authority",
    "not_request_bound",
    "expired",
    "not_yet_valid",
    "window_too_long",
    "digest_mismatch",
    "bad_signature",
    "replayed",
    "wrong_chain",
]
PassReason = Literal[
    "malformed",
    "wrong_type",
    "unknown_key",
    "bad_signature",
    "not_yet_valid",
    "expired",
    "wrong_issuer",
    "wrong_chain",
    "wrong_registry",
    "bad_subject",
    "not_the_signer",
    "not_compliant",
    "revoked",
]

class SignedRequest(TypedDict):
    signature_input: str
    signature: str
    #: With a body: ``sha-256=:<base64>:``.
    content_digest: Optional[str]
    #: The headers to set: ``Signature-Input``, ``Signature``, and ``Content-Digest`` with a body.
    headers: dict[str, str]
    #: ``erc8128:<chain id>:<address in lowercase>``.
    keyid: str
    created: int
    expires: int
    nonce: str

class SignatureFacts(TypedDict):
    #: The account that signed (EIP-55).
    signer: str
    keyid: str
    chain_id: int
    created: int
    expires: int
    nonce: Optional[str]
    components: List[str]
    label: str
    #: ``<keyid>:<nonce>``: claim it once, until ``remember_until``; ``None`` for a Replayable
    #: signature.
    nonce_key: Optional[str]
    remember_until: Optional[int]

class VerifiedRequest(SignatureFacts):
    outcome: Literal["verified"]

class RefusedRequest(TypedDict):
    outcome: Literal["refused"]
    reason: Reason
    message: str

class Erc1271Call(TypedDict):
    chain_id: int
    #: The contract account (EIP-55).
    address: str
    #: The EIP-191 hash of the signature base, ``0x`` hex.
    hash: str
    signature: str
    #: ``isValidSignature(hash, signature)``, ABI-encoded: the ``eth_call``'s data.
    calldata: str

class PendingErc1271(TypedDict):
    outcome: Literal["erc1271"]
    #: The signature's fields, unverified until ``erc1271_accepts`` says so of the call's answer.
    unverified: SignatureFacts
    erc1271: Erc1271Call

RequestVerdict = Union[VerifiedRequest, RefusedRequest, PendingErc1271]

class PassBlock(TypedDict):
    number: int
    hash: str
    time: int

class PassStanding(TypedDict):
    isRegistered: bool
    isCompliant: bool
    agentId: Optional[int]
    status: Optional[str]
    haftungsperson: Optional[str]
    lastAttestation: Optional[int]
    validUntil: Optional[int]

#: A pass's claims as signed (INTERFACE.md section 7), the JWT's own names.
PassClaims = TypedDict(
    "PassClaims",
    {
        "iss": str,
        "sub": str,
        "iat": int,
        "nbf": int,
        "exp": int,
        "jti": str,
        "chainId": int,
        "registry": str,
        "block": PassBlock,
        "kya": PassStanding,
    },
)

class VerifiedPassFacts(TypedDict):
    #: The wallet ``sub`` names (EIP-55).
    wallet: str
    kid: str
    claims: PassClaims

class VerifiedPass(VerifiedPassFacts):
    outcome: Literal["verified"]

class RefusedPass(TypedDict):
    outcome: Literal["refused"]
    reason: PassReason
    message: str

PassVerdict = Union[VerifiedPass, RefusedPass]

#: ``pass`` is a keyword, hence the functional form: read it as ``verdict["pass"]``.
AgentAdmitted = TypedDict(
    "AgentAdmitted",
    {"outcome": Literal["admitted"], "signature": SignatureFacts, "pass": VerifiedPassFacts},
)

class AgentRefused(TypedDict):
    outcome: Literal["refused"]
    #: ``signature``: answer 401; ``pass``: answer 403 (401 for ``no_pass``).
    stage: Literal["signature", "pass"]
    #: A signature's reason, or a pass's, or ``no_pass``.
    reason: Union[Reason, PassReason, Literal["no_pass"]]
    message: str

AgentVerdict = Union[AgentAdmitted, AgentRefused]

def address_of(private_key: Union[str, bytes]) -> str:
    """The address (EIP-55) of a private key (``0x`` and 64 hex digits, or 32 bytes)."""

def sign_request(
    method: str,
    url: str,
    *,
    chain_id: int,
    private_key: Union[str, bytes, None] = None,
    signer: Optional[Callable[[bytes], bytes]] = None,
    address: Optional[str] = None,
    headers: Optional[Headers] = None,
    body: Body = None,
    created: Optional[int] = None,
    expires: Optional[int] = None,
    nonce: Optional[str] = None,
    components: Optional[Sequence[str]] = None,
) -> SignedRequest:
    """Signs a request with ERC-8128 with ``private_key``, or with ``signer`` (given the 32-byte
    EIP-191 hash of the signature base, it returns the 65-byte signature; ``address`` names its
    account). ``created`` defaults to now, ``expires`` to ``created + 60``, ``nonce`` to 16
    random bytes (base64url). Raises ``SignError``."""

class PreparedRequest:
    """A request ready for a signer that holds its key elsewhere."""

    @property
    def signature_base(self) -> str:
        """The RFC 9421 signature base: the message of an EIP-191 ``personal_sign``."""
    @property
    def message_hash(self) -> bytes:
        """The EIP-191 hash of ``signature_base``: what a signer of raw hashes signs."""
    @property
    def keyid(self) -> str: ...
    @property
    def created(self) -> int: ...
    @property
    def expires(self) -> int: ...
    @property
    def nonce(self) -> str: ...
    def finish(self, signature: Union[bytes, str]) -> SignedRequest:
        """The headers carrying ``signature`` (65 bytes ``r || s || v``, or a contract
        account's bytes; ``bytes`` or ``0x`` hex)."""

def prepare_request(
    method: str,
    url: str,
    *,
    chain_id: int,
    address: str,
    headers: Optional[Headers] = None,
    body: Body = None,
    created: Optional[int] = None,
    expires: Optional[int] = None,
    nonce: Optional[str] = None,
    components: Optional[Sequence[str]] = None,
) -> PreparedRequest: ...

def verify_request(
    method: str,
    url: str,
    headers: Headers,
    *,
    authority: str,
    chain_id: int,
    body: Body = None,
    label: Optional[str] = None,
    now: Optional[int] = None,
    clock_skew_secs: Optional[int] = None,
    max_window_secs: Optional[int] = None,
    require_nonce: bool = True,
    allow_erc1271: bool = True,
) -> RequestVerdict:
    """Checks a received request's ERC-8128 signature as kya-core does, offline. ``authority``
    (the ``host[:port]`` the provider serves) is required; blank, it raises ``InvalidInput``."""

def erc1271_accepts(return_data: Union[bytes, str]) -> bool:
    """Whether ``isValidSignature``'s return data says "valid" (the magic value ``0x1626ba7e``)."""

class Jwks:
    """The issuer's public keys, read once (a ``dict``, ``str`` or ``bytes`` JWKS document)."""

    def __init__(self, document: Union[Mapping[str, Any], str, bytes]) -> None: ...
    @property
    def kids(self) -> List[str]: ...
    def __contains__(self, kid: str) -> bool: ...
    def __len__(self) -> int: ...

JwksLike = Union[Jwks, Mapping[str, Any], str, bytes]

def verify_pass(
    jws: str,
    *,
    jwks: JwksLike,
    issuer: str,
    chain_id: int,
    registry: str,
    now: Optional[int] = None,
) -> PassVerdict:
    """Checks a pass offline: signature, lifetime (60 s of skew), issuer, chain, registry."""

def verify_agent_request(
    method: str,
    url: str,
    headers: Headers,
    *,
    authority: str,
    jwks: JwksLike,
    issuer: str,
    chain_id: int,
    registry: str,
    body: Body = None,
    label: Optional[str] = None,
    now: Optional[int] = None,
    clock_skew_secs: Optional[int] = None,
    max_window_secs: Optional[int] = None,
    lost_compliance_at: Optional[int] = None,
) -> AgentVerdict:
    """Admits a request offline: its ERC-8128 signature, then its ``KYA-Pass`` (verifies, the
    signer's, compliant; not from before ``lost_compliance_at``). Claim
    ``verdict["signature"]["nonce_key"]`` before serving."""

class KeyCache:
    """The issuer's JWKS as a provider holds it (times in Unix milliseconds, the clock's when
    not given): fetched at most once per ``refetch_interval_ms``, one fetch at a time, trusted
    one lifetime past its freshness."""

    def __init__(
        self,
        *,
        refetch_interval_ms: Optional[int] = None,
        default_lifetime_ms: Optional[int] = None,
        max_lifetime_ms: Optional[int] = None,
    ) -> None: ...
    def jwks(self, now_ms: Optional[int] = None) -> Optional[Jwks]: ...
    def is_stale(self, now_ms: Optional[int] = None) -> bool: ...
    def begin_fetch(self, reason: Literal["stale", "unknown_key"], now_ms: Optional[int] = None) -> bool: ...
    def fetched(
        self,
        jwks: JwksLike,
        cache_control: Optional[str] = None,
        now_ms: Optional[int] = None,
    ) -> None: ...
    def failed(self) -> None: ...
    @property
    def in_flight(self) -> bool: ...
    @property
    def attempts(self) -> int: ...
    @property
    def outcomes(self) -> int: ...
    @property
    def trusted_until_ms(self) -> int: ...

class NonceMemory:
    """Nonces seen, each until its signature could no longer pass (one process)."""

    def __init__(self) -> None: ...
    def claim(self, nonce_key: str, remember_until: int, now: Optional[int] = None) -> bool: ...
    def __len__(self) -> int: ...
