"""The relayer flows, written once for the sync and the async client, as ``kya`` runs them
(client/src/flow.rs, client/src/cli/register.rs): registry calldata → nonce → domain → EIP-712
signature → ``POST /relay`` → the relay followed until it settles; a registration's consents
planned at the parties' nonces, signed or attached, before it is sent.

Each flow is a generator that yields what it needs done (an HTTP ``Call``, a ``Pause``) and is
sent back what came of it (an ``Answer``), so its steps and rules live here once and the clients
(``kya.relayer``) only perform the I/O. Encodings, digests and signatures are kya-core's."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Generator, List, Optional, Tuple, TypeVar, Union

from kya._core import (
    FORWARDER_DOMAIN_NAME,
    FORWARDER_DOMAIN_VERSION,
    InvalidInput,
    consents_needed,
    consent_nonce_calldata,
    decode_consent_nonce,
    forward_gas,
    forward_request_typed_data,
    latest_consent_deadline,
    register_agent_calldata,
    register_agent_with_consent_calldata,
    registry_event,
)
from kya.accounts import Account
from kya.consents import ConsentKind, ConsentPlan, ConsentsMissing
from kya.registration import ConsentSource, Registration
from kya.relayer_answers import FINAL_STATUSES, SUCCEEDED_STATUSES, Domain, Outcome, Relayed, RelayView
from kya.relayer_errors import RelayFailed, RelayTimeout, RpcError, UnexpectedAnswer, relayer_error

if TYPE_CHECKING:
    from kya._core import ForwardRequest, RegistryEvent

T = TypeVar("T")

#: How long consents signed here stay valid when no deadline is given: an hour past the
#: chain's latest block (the CLI's default).
DEFAULT_CONSENT_LIFETIME_SECS = 3600
#: How long a receipt is waited for once the relayer says its transaction is mined.
RECEIPT_AFTER_MINED_SECS = 10.0


@dataclass(frozen=True)
class Call:
    """An HTTP request the flow needs: ``service`` (``relayer`` or ``RPC endpoint``) names it
    in errors, never its URL (an RPC URL may carry its provider's key)."""

    service: str
    method: str
    url: str
    body: Optional[Any] = None


@dataclass(frozen=True)
class Answer:
    status: int
    text: str
    retry_after: Optional[str] = None


@dataclass(frozen=True)
class Pause:
    seconds: float


Step = Union[Call, Pause]
Flow = Generator[Step, Optional[Answer], T]


@dataclass(frozen=True)
class Settings:
    """Where the flows go and how long they wait."""

    relayer_url: str
    rpc_url: Optional[str] = None
    #: The registry (``request.to``); ``None``: the relayer's ``/status`` ``contracts.registry``.
    registry: Optional[str] = None
    #: How long a write is followed before ``RelayTimeout``.
    timeout_secs: float = 120.0
    #: How often a relay's status is asked for while it settles.
    poll_secs: float = 0.25


def _answered(step: Step) -> Flow[Answer]:
    answer = yield step
    assert answer is not None, "the client answers every call"
    return answer


def _json(service: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise UnexpectedAnswer(f"{service} answered something that is not JSON: {text[:200]!r}") from error


def relayer_get(settings: Settings, path: str) -> Flow[Any]:
    """``GET path`` of the relayer: its JSON, or its refusal raised."""
    answer = yield from _answered(Call("relayer", "GET", settings.relayer_url + path))
    if not 200 <= answer.status < 300:
        raise relayer_error(answer.status, answer.text, answer.retry_after)
    return _json("the relayer", answer.text)


def relayer_post(settings: Settings, path: str, body: Any) -> Flow[Tuple[int, Any]]:
    """``POST path`` of the relayer: its status (200, or 202 while a relay waits) and JSON."""
    answer = yield from _answered(Call("relayer", "POST", settings.relayer_url + path, body))
    if not 200 <= answer.status < 300:
        raise relayer_error(answer.status, answer.text, answer.retry_after)
    return answer.status, _json("the relayer", answer.text)


def rpc(settings: Settings, method: str, params: List[Any]) -> Flow[Any]:
    """One JSON-RPC call to the chain: its ``result``, or ``RpcError``."""
    if settings.rpc_url is None:
        raise InvalidInput(f"{method}: this needs the chain's RPC URL (rpc_url=...)")
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = yield from _answered(Call("RPC endpoint", "POST", settings.rpc_url, body))
    if not 200 <= answer.status < 300:
        raise RpcError(f"{method}: the RPC endpoint answered HTTP {answer.status}")
    reply = _json("the RPC endpoint", answer.text)
    if not isinstance(reply, dict) or "error" in reply:
        error = reply.get("error") if isinstance(reply, dict) else reply
        raise RpcError(f"{method}: {error}")
    return reply.get("result")


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def registry_of(settings: Settings) -> Flow[str]:
    """The registry: the settings', else the relayer's ``/status`` ``contracts.registry``."""
    if settings.registry is not None:
        return settings.registry
    status = yield from relayer_get(settings, "/status")
    registry: str = status["contracts"]["registry"]
    return registry


def domain(settings: Settings) -> Flow[Domain]:
    """The relayer's ``/domain``, which must be the forwarder's as kya-core signs for it."""
    answer: Domain = yield from relayer_get(settings, "/domain")
    if (answer.get("name"), answer.get("version")) != (FORWARDER_DOMAIN_NAME, FORWARDER_DOMAIN_VERSION):
        raise UnexpectedAnswer(
            f"the relayer's forwarder domain is {answer.get('name')!r} version {answer.get('version')!r}, "
            f"not {FORWARDER_DOMAIN_NAME!r} version {FORWARDER_DOMAIN_VERSION!r}: signatures made here "
            "would not verify"
        )
    return answer


def relay(settings: Settings, relay_id: str) -> Flow[Optional[RelayView]]:
    """``GET /relay/:id``; ``None`` when the relayer does not know it."""
    if not relay_id or any(digit not in "0123456789abcdefABCDEF" for digit in relay_id):
        raise InvalidInput(f"invalid relay id {relay_id!r}: expected hex digits")
    answer = yield from _answered(Call("relayer", "GET", f"{settings.relayer_url}/relay/{relay_id}"))
    if answer.status == 404:
        return None
    if not 200 <= answer.status < 300:
        raise relayer_error(answer.status, answer.text, answer.retry_after)
    view: RelayView = _json("the relayer", answer.text)
    return view


def submit(
    settings: Settings, request: ForwardRequest, signature: bytes, *, chain_id: int, forwarder: str
) -> Flow[Relayed]:
    """``POST /relay`` of a signed request: the relayer's answer (a relay id, and the hash once
    sent), or its refusal raised."""
    # The request as the relayer reads it: the typed data's message (checksummed addresses,
    # decimal numbers, 0x data), kya-core's.
    message = forward_request_typed_data(request, chain_id=chain_id, forwarder=forwarder)["message"]
    _, relayed = yield from relayer_post(settings, "/relay", {"request": message, "signature": _hex(signature)})
    answer: Relayed = relayed
    return answer


def relay_write(
    settings: Settings, account: Account, data: bytes, *, registry: Optional[str] = None, deadline: int = 0
) -> Flow[Outcome]:
    """``data`` (one registry write) signed by ``account`` and relayed, followed until it
    settles; ``RelayFailed`` if its registry call did not succeed."""
    started = time.monotonic()
    gas = forward_gas(data)
    to = registry if registry is not None else (yield from registry_of(settings))
    forwarder_domain = yield from domain(settings)
    nonce_view = yield from relayer_get(settings, f"/nonce/{account.address}")
    request: ForwardRequest = {
        "from": account.address,
        "to": to,
        "value": 0,
        "gas": gas,
        "nonce": int(nonce_view["nonce"]),
        "deadline": deadline,
        "data": data,
    }
    chain_id, forwarder = forwarder_domain["chainId"], forwarder_domain["verifyingContract"]
    signature = account.sign_forward_request(request, chain_id=chain_id, forwarder=forwarder)
    answer = yield from submit(settings, request, signature, chain_id=chain_id, forwarder=forwarder)
    relay_id = answer.get("relayId")
    if not relay_id:
        raise UnexpectedAnswer("POST /relay answered no relayId: this relayer has no relay lookups")
    view = yield from _follow(settings, relay_id, started)
    if view["status"] not in SUCCEEDED_STATUSES:
        raise RelayFailed(view)
    events: List[RegistryEvent] = []
    if settings.rpc_url is not None and view.get("txHash"):
        events = yield from _events(settings, str(view["txHash"]), to)
    return Outcome(relay=view, events=events)


def _follow(settings: Settings, relay_id: str, started: float) -> Flow[RelayView]:
    while True:
        view = yield from relay(settings, relay_id)
        if view is None:
            raise UnexpectedAnswer(f"the relayer no longer knows relay {relay_id}")
        if view["status"] in FINAL_STATUSES:
            return view
        if time.monotonic() - started >= settings.timeout_secs:
            raise RelayTimeout(relay_id, settings.timeout_secs)
        yield Pause(settings.poll_secs)


def _events(settings: Settings, tx_hash: str, registry: str) -> Flow[List[RegistryEvent]]:
    """The registry's events in the transaction's receipt, in order."""
    waited = 0.0
    while True:
        receipt = yield from rpc(settings, "eth_getTransactionReceipt", [tx_hash])
        if receipt is not None:
            break
        if waited >= RECEIPT_AFTER_MINED_SECS:
            raise RpcError(f"no receipt of {tx_hash} {RECEIPT_AFTER_MINED_SECS:g} s after it was mined")
        yield Pause(settings.poll_secs)
        waited += settings.poll_secs
    events: List[RegistryEvent] = []
    for log in receipt.get("logs", []):
        if str(log.get("address", "")).lower() != registry.lower():
            continue
        event = registry_event(log.get("topics", []), log.get("data", "0x"))
        if event is not None:
            events.append(event)
    return events


def _latest_block_time(settings: Settings) -> Flow[int]:
    block = yield from rpc(settings, "eth_getBlockByNumber", ["latest", False])
    return int(block["timestamp"], 16)


def _consent_nonce(settings: Settings, registry: str, signer: str) -> Flow[int]:
    data = _hex(consent_nonce_calldata(signer))
    try:
        returned = yield from rpc(settings, "eth_call", [{"to": registry, "data": data}, "latest"])
        nonce: int = decode_consent_nonce(returned)
    except (RpcError, InvalidInput) as error:
        raise RpcError(
            f"the registry at {registry} has no consentNonce: it predates consents, so only its agent "
            f"wallets register themselves ({error})"
        ) from error
    return nonce


def _consent_deadline(given: Optional[int], now: int, signatures_given: bool) -> int:
    """The consents' deadline: ``given``, else an hour after the chain's ``now``. Required with a
    signature made elsewhere (it was signed for one deadline), not before ``now`` and at most 7
    days after it (the registry's ``MAX_CONSENT_LIFETIME``)."""
    if given is None:
        if signatures_given:
            raise InvalidInput(
                "a consent signature needs consent_deadline: the deadline it was signed for (its typed "
                "data's message.deadline)"
            )
        return now + DEFAULT_CONSENT_LIFETIME_SECS
    if given < now:
        raise InvalidInput(
            f"consent_deadline {given} is before the chain's latest block ({now}): the registry would "
            "refuse the consents (Consent expired)"
        )
    latest = latest_consent_deadline(now)
    if given > latest:
        raise InvalidInput(
            f"consent_deadline {given} is more than 7 days after the chain's latest block ({now}): the "
            f"registry would refuse the consents (Consent deadline too far); the latest it accepts now is {latest}"
        )
    return given


def consent_plan(
    settings: Settings,
    registration: Registration,
    creator: str,
    wallet_consent: ConsentSource = None,
    liability_consent: ConsentSource = None,
    consent_deadline: Optional[int] = None,
) -> Flow[Tuple[ConsentPlan, str]]:
    """The consents ``registration`` needs when ``creator`` sends it, read at the parties'
    current nonces, with the signatures given attached and the accounts given signing theirs;
    and the registry. Signatures given win over accounts, which sign only what is missing."""
    agent_wallet, haftungsperson = registration.parties(creator, wallet_consent, liability_consent)
    registry = yield from registry_of(settings)
    chain_id = int((yield from rpc(settings, "eth_chainId", [])), 16)
    now = yield from _latest_block_time(settings)
    wallet_nonce = yield from _consent_nonce(settings, registry, agent_wallet)
    haftungsperson_nonce = yield from _consent_nonce(settings, registry, haftungsperson)
    sources: Tuple[Tuple[ConsentKind, ConsentSource], ...] = (
        ("AgentWalletConsent", wallet_consent),
        ("LiabilityConsent", liability_consent),
    )
    signatures_given = any(isinstance(source, (bytes, str)) for _, source in sources)
    plan = ConsentPlan.new(
        chain_id=chain_id,
        registry=registry,
        creator=creator,
        agent_wallet=agent_wallet,
        haftungsperson=haftungsperson,
        parent_agent_id=registration.parent_agent_id,
        nonces=(wallet_nonce, haftungsperson_nonce),
        deadline=_consent_deadline(consent_deadline, now, signatures_given),
    )
    for kind, source in sources:
        if not isinstance(source, (bytes, str)):
            continue
        recovered = plan.attach(kind, source)
        planned = next(planned for planned in plan.consents() if planned.kind == kind)
        if recovered is not None and recovered.lower() == planned.signer.lower():
            continue
        # Not an ordinary key's signature of this consent: only a contract wallet may still
        # accept it (ERC-1271), which the registry asks when the call runs.
        code = yield from rpc(settings, "eth_getCode", [planned.signer, "latest"])
        if code in (None, "0x", "0x0"):
            raise InvalidInput(
                f"the {kind} signature is not {planned.signer}'s signature of this consent"
                f"{f' (it recovers to {recovered})' if recovered else ' (not a 65-byte signature)'}: it must "
                f"sign exactly the consent's typed data (creator {creator}, nonce {planned.nonce}, deadline "
                f"{plan.deadline}, chain {chain_id}, registry {registry})"
            )
    for _, source in sources:
        if isinstance(source, Account):
            plan.sign_with(source)
    return plan, registry


def register(
    settings: Settings,
    account: Account,
    registration: Registration,
    wallet_consent: ConsentSource = None,
    liability_consent: ConsentSource = None,
    consent_deadline: Optional[int] = None,
) -> Flow[Outcome]:
    """``kya register``: a self-registration is sent as ``registerAgent``; any other with the
    consents it needs (``registerAgentWithConsent``), or ``ConsentsMissing`` with nothing sent."""
    creator = account.address
    agent_wallet, haftungsperson = registration.parties(creator, wallet_consent, liability_consent)
    fields: Dict[str, Any] = {
        "haftungsperson": haftungsperson,
        "agent_wallet": agent_wallet,
        "constitution_hash": registration.constitution_hash,
        "capability_hash": registration.capability_hash,
        "operational_scope": registration.operational_scope,
        "parent_agent_id": registration.parent_agent_id,
        "self_modifying": registration.self_modifying,
    }
    if _is_self_registration(creator, agent_wallet, haftungsperson, registration.parent_agent_id):
        if wallet_consent is not None or liability_consent is not None:
            raise InvalidInput(
                "this registration needs no consent: its sender is the agent wallet and Haftungsperson"
            )
        # What the registry deployed on Base Sepolia knows: no consent read, no RPC needed.
        return (yield from relay_write(settings, account, register_agent_calldata(**fields)))
    plan, registry = yield from consent_plan(
        settings, registration, creator, wallet_consent, liability_consent, consent_deadline
    )
    if plan.missing():
        raise ConsentsMissing(plan)
    wallet_signature, liability_signature = plan.signatures()
    data = register_agent_with_consent_calldata(
        **fields, deadline=plan.deadline, wallet_consent=wallet_signature, liability_consent=liability_signature
    )
    return (yield from relay_write(settings, account, data, registry=registry))


def _is_self_registration(creator: str, agent_wallet: str, haftungsperson: str, parent_agent_id: int) -> bool:
    needed = consents_needed(
        creator=creator,
        agent_wallet=agent_wallet,
        haftungsperson=haftungsperson,
        parent_agent_id=parent_agent_id,
        wallet_nonce=0,
        haftungsperson_nonce=0,
        deadline=0,
    )
    return needed["agent_wallet"] is None and needed["liability"] is None
