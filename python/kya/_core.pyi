"""Types of ``kya._core``, the extension module (python/src/*.rs): kya-core's ERC-8128 signing
and verifying, KYA passes, and what a provider's verifier keeps. Verdicts are ``dict``s, typed
here as ``TypedDict``s discriminated by ``outcome``."""

from typing import Any, Callable, Dict, Iterable, List, Literal, Mapping, Optional, Sequence, Tuple, TypedDict, Union

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
#: How long a change feed follower waits before it reconnects a stream that broke, until the
#: stream names its own ``retry`` (3,000 ms).
FEED_RECONNECT_MS: int

class KyaError(Exception):
    """The base of every error the kya package raises."""

class InvalidInput(KyaError):
    """An argument kya-core refuses: a key, an address, a JWKS, a header, a time."""

class SignError(InvalidInput):
    """A request that cannot be signed as ERC-8128 requires."""

#: Header fields: a mapping (``dict``, ``httpx.Headers``, ``requests``' headers, whose values
#: may be ``bytes``, read as Latin-1) or ``(name, value)`` pairs (ASGI's, as ``bytes``); a list
#: of values is one field sent twice.
Headers = Union[
    Mapping[str, Union[str, bytes, List[str]]],
    Iterable[Tuple[Union[str, bytes], Union[str, bytes]]],
]
Body = Union[bytes, bytearray, memoryview, str, None]

class PrivateKey:
    """A private key read once (``0x`` and 64 hex digits, or its 32 bytes), with its account: a
    signer that holds it skips reading the key (a scalar multiplication) on every signature. Its
    ``repr`` names the address only; nothing reads the key back. Raises ``InvalidInput``."""

    def __init__(self, key: Union[str, bytes]) -> None: ...
    @property
    def address(self) -> str:
        """The key's account (EIP-55)."""

#: What a ``private_key=`` argument takes: a ``PrivateKey``, or a key's text or bytes (read
#: again on each call).
KeyLike = Union[PrivateKey, str, bytes]
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

def address_of(private_key: KeyLike) -> str:
    """The address (EIP-55) of a private key (a ``PrivateKey``, ``0x`` and 64 hex digits, or 32
    bytes)."""

def sign_request(
    method: str,
    url: str,
    *,
    chain_id: int,
    private_key: Optional[KeyLike] = None,
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

def compliance_lost_at(event: Union[Mapping[str, Any], str, bytes]) -> Optional[Tuple[str, int]]:
    """``(wallet, block)`` when the change feed's ``event`` (its JSON, or parsed) shows its agent
    not compliant: the wallet (EIP-55) lost compliance at that block (``Gate.compliance_lost``).
    ``None`` when the agent stays compliant. Raises ``InvalidInput`` for what is no feed event."""

def cursor_key(id: str) -> Tuple[int, int]:
    """An event id (``<batch>-<index>``) as a pair ordered as the feed is. Raises
    ``InvalidInput`` for a malformed id."""

# --- An agent's relayer flows (issue 64): forward requests, consents, registry calls, events ---

#: The forwarder's EIP-712 domain name and version (``MinimalForwarder``, ``1``): what a
#: relayer's ``GET /domain`` must say for the signatures made here to verify.
FORWARDER_DOMAIN_NAME: str
FORWARDER_DOMAIN_VERSION: str
#: The furthest a consent's ``deadline`` may lie past the block that uses it (7 days).
MAX_CONSENT_LIFETIME_SECS: int

#: Bytes as ``bytes`` or a ``0x`` hex string.
HexBytes = Union[bytes, bytearray, memoryview, str]
#: A ``uint256``: an ``int``, or a decimal or ``0x`` string.
Uint = Union[int, str]

#: A forward request as the relayer's ``POST /relay`` carries it; ``deadline`` absent or 0:
#: no expiry. ``from`` is a keyword, hence the functional form.
ForwardRequest = TypedDict(
    "ForwardRequest",
    {"from": str, "to": str, "value": Uint, "gas": Uint, "nonce": Uint, "deadline": Uint, "data": HexBytes},
    total=False,
)

class AgentWalletConsent(TypedDict):
    kind: Literal["AgentWalletConsent"]
    #: Who signs it: the agent wallet (EIP-55).
    signer: str
    agent_wallet: str
    #: The registering sender: a relayed registration's ``from``.
    creator: str
    parent_agent_id: int
    #: The agent wallet's ``consentNonce`` on the registry.
    nonce: int
    #: Unix seconds.
    deadline: int

class LiabilityConsent(TypedDict):
    kind: Literal["LiabilityConsent"]
    #: Who signs it: the root's Haftungsperson (EIP-55).
    signer: str
    haftungsperson: str
    creator: str
    agent_wallet: str
    nonce: int
    deadline: int

Consent = Union[AgentWalletConsent, LiabilityConsent]

class ConsentsNeeded(TypedDict):
    #: ``None`` when the creator is the agent wallet.
    agent_wallet: Optional[AgentWalletConsent]
    #: ``None`` for a child, or when the creator is the root's Haftungsperson.
    liability: Optional[LiabilityConsent]

def forward_request_typed_data(request: ForwardRequest, *, chain_id: int, forwarder: str) -> Dict[str, Any]:
    """The EIP-712 typed data of a forward request for ``eth_signTypedData_v4``; its
    ``message`` is the request as ``POST /relay`` takes it. Raises ``InvalidInput`` with the
    relayer's own words for a malformed request."""

def forward_request_digest(request: ForwardRequest, *, chain_id: int, forwarder: str) -> bytes:
    """The 32-byte EIP-712 digest ``request["from"]`` signs."""

def sign_forward_request(
    request: ForwardRequest,
    *,
    chain_id: int,
    forwarder: str,
    private_key: Optional[KeyLike] = None,
    signer: Optional[Callable[[bytes], Union[bytes, str]]] = None,
) -> bytes:
    """The request's 65-byte signature (``v`` 27/28) by ``private_key``, or by ``signer``
    (given the 32-byte digest; ``v`` 0/1 is written as 27/28)."""

def latest_consent_deadline(block_timestamp: int) -> int:
    """The latest consent ``deadline`` the registry accepts in a block at ``block_timestamp``."""

def consents_needed(
    *,
    creator: str,
    agent_wallet: str,
    haftungsperson: str,
    parent_agent_id: Uint,
    wallet_nonce: Uint,
    haftungsperson_nonce: Uint,
    deadline: Uint,
) -> ConsentsNeeded:
    """The consents a registration by ``creator`` needs at its signers' ``consentNonce``s."""

def consent_typed_data(consent: Consent, *, chain_id: int, registry: str) -> Dict[str, Any]:
    """The EIP-712 typed data of a consent for ``eth_signTypedData_v4``."""

def consent_digest(consent: Consent, *, chain_id: int, registry: str) -> bytes:
    """The 32-byte EIP-712 digest a consent's signer signs."""

def sign_consent(
    consent: Consent,
    *,
    chain_id: int,
    registry: str,
    private_key: Optional[KeyLike] = None,
    signer: Optional[Callable[[bytes], Union[bytes, str]]] = None,
) -> bytes:
    """The consent's 65-byte signature (``v`` 27/28) by ``private_key`` or ``signer``."""

def checksum_address(address: str) -> str:
    """``address`` written EIP-55. Raises ``InvalidInput`` for what is no 20-byte hex address."""

def recover_signer(digest: HexBytes, signature: HexBytes) -> Optional[str]:
    """The address (EIP-55) a 65-byte signature of ``digest`` recovers to; ``None`` when it is
    no ordinary key's signature (a contract account's, which only the chain can check)."""

def register_agent_calldata(
    *,
    haftungsperson: str,
    agent_wallet: str,
    constitution_hash: HexBytes,
    capability_hash: HexBytes,
    operational_scope: str,
    parent_agent_id: int = 0,
    self_modifying: bool = False,
) -> bytes:
    """Call data of ``registerAgent(...)``. Raises ``InvalidInput`` for a scope past 1,024 bytes."""

def register_agent_with_consent_calldata(
    *,
    haftungsperson: str,
    agent_wallet: str,
    constitution_hash: HexBytes,
    capability_hash: HexBytes,
    operational_scope: str,
    deadline: Uint,
    parent_agent_id: int = 0,
    self_modifying: bool = False,
    wallet_consent: Optional[HexBytes] = None,
    liability_consent: Optional[HexBytes] = None,
) -> bytes:
    """Call data of ``registerAgentWithConsent(...)``: each signature ``None`` when its party
    is the sender."""

def attest_compliance_calldata(agent_id: Uint) -> bytes: ...
def report_revenue_calldata(
    *,
    agent_id: Uint,
    amount_cents: Uint,
    currency: str,
    category: str,
    period_start: int,
    period_end: int,
) -> bytes:
    """Call data of ``reportRevenue(...)``. Raises ``InvalidInput`` for a currency past 16 bytes
    or a category past 64."""

def terminate_self_calldata(agent_id: Uint) -> bytes: ...
def invalidate_consents_calldata() -> bytes: ...
def invalidate_consents_through_calldata(nonce: Uint) -> bytes: ...
def consent_nonce_calldata(signer: str) -> bytes:
    """Call data of the view ``consentNonce(signer)``, for an ``eth_call``."""

def decode_consent_nonce(return_data: HexBytes) -> int: ...
def forward_gas(data: HexBytes) -> int:
    """The gas a forward request gives the registry write ``data`` encodes. Raises
    ``InvalidInput`` with the relayer's words when ``data`` is not exactly one write."""

def constitution_hash(text: str) -> bytes:
    """``keccak256`` of the constitution's UTF-8 text, as given."""

def capability_hash(names: Sequence[str]) -> bytes:
    """``keccak256`` of the names trimmed, sorted, deduplicated and joined with ``,``."""

class AgentRegistered(TypedDict):
    event: Literal["AgentRegistered"]
    agent_id: int
    creator: str
    agent_wallet: str
    haftungsperson: str
    parent_agent_id: int
    generation: int

class ComplianceAttested(TypedDict):
    event: Literal["ComplianceAttested"]
    agent_id: int
    attester: str
    attested_at: int

class RevenueReported(TypedDict):
    event: Literal["RevenueReported"]
    agent_id: int
    amount_cents: int
    currency: str
    category: str
    period_start: int
    period_end: int

class AgentTerminated(TypedDict):
    event: Literal["AgentTerminated"]
    agent_id: int
    caller: str

class ConsentUsed(TypedDict):
    event: Literal["ConsentUsed"]
    signer: str
    nonce: int

class ConsentsInvalidated(TypedDict):
    event: Literal["ConsentsInvalidated"]
    signer: str
    next_nonce: int

RegistryEvent = Union[
    AgentRegistered, ComplianceAttested, RevenueReported, AgentTerminated, ConsentUsed, ConsentsInvalidated
]

def registry_event(topics: Sequence[HexBytes], data: HexBytes) -> Optional[RegistryEvent]:
    """The registry event one receipt log holds, or ``None`` for any other log."""
