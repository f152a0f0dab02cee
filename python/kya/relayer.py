"""An agent's writes through the gasless relayer, as ``kya`` makes them: register (with the
consents its parties sign), attest, report revenue, terminate, take consents back. Each call
builds the registry call, signs the forward request at the relayer's nonce, posts it, and
follows the relay until it settles; the registry's events come back when an RPC URL is given
(a registration needing consents requires one: their nonces and the chain's time are read from
the chain).

``RelayerClient`` (threads) and ``AsyncRelayerClient`` (asyncio) over httpx run the same flows
(``kya.relayer_flow``); they differ only in how they send and wait. Failures are
``kya.relayer_errors``' exceptions: the relayer's refusals with its HTTP status, message and a
stable code."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Optional, TypeVar

import httpx

from kya import relayer_flow as flows
from kya._core import (
    InvalidInput,
    attest_compliance_calldata,
    invalidate_consents_calldata,
    invalidate_consents_through_calldata,
    report_revenue_calldata,
    terminate_self_calldata,
)
from kya.accounts import Account
from kya.consents import ConsentPlan, ConsentsMissing, PlannedConsent
from kya.registration import ConsentSource, Registration
from kya.relayer_answers import Domain, Outcome, Relayed, RelayerStatus, RelayView
from kya.relayer_errors import (
    CallReverted,
    InvalidSignature,
    RateLimited,
    RelayerError,
    RelayerUnavailable,
    RelayFailed,
    RelayTimeout,
    RequestRefused,
    RpcError,
    UnexpectedAnswer,
    Unreachable,
)
from kya.relayer_flow import Answer, Call, Flow, Pause, Settings

if TYPE_CHECKING:
    from kya._core import ForwardRequest

__all__ = [
    "Account",
    "AsyncRelayerClient",
    "CallReverted",
    "ConsentPlan",
    "ConsentsMissing",
    "Domain",
    "InvalidSignature",
    "Outcome",
    "PlannedConsent",
    "RateLimited",
    "Registration",
    "RelayFailed",
    "RelayTimeout",
    "RelayView",
    "Relayed",
    "RelayerClient",
    "RelayerError",
    "RelayerStatus",
    "RelayerUnavailable",
    "RequestRefused",
    "RpcError",
    "UnexpectedAnswer",
    "Unreachable",
]

T = TypeVar("T")

#: How long one HTTP exchange may take (connect, then each read), as the Rust client bounds them.
DEFAULT_HTTP_TIMEOUT = httpx.Timeout(60.0, connect=10.0)


def _settings(
    relayer_url: str, rpc_url: Optional[str], registry: Optional[str], timeout_secs: float, poll_secs: float
) -> Settings:
    url = httpx.URL(relayer_url.strip().rstrip("/"))
    if url.scheme not in ("http", "https"):
        raise InvalidInput("the relayer URL must start with http:// or https://")
    return Settings(str(url), rpc_url, registry, timeout_secs, poll_secs)


def _request(call: Call) -> httpx.Request:
    return httpx.Request(call.method, call.url, json=call.body)


def _answer(response: httpx.Response) -> Answer:
    return Answer(response.status_code, response.text, response.headers.get("retry-after"))


def _unreachable(call: Call, error: httpx.HTTPError) -> Unreachable:
    # The exception's words, not its request's URL: an RPC URL may carry its provider's key.
    return Unreachable(f"the {call.service} could not be reached: {type(error).__name__}: {error}")


class RelayerClient:
    """The relayer at ``relayer_url`` (``http://127.0.0.1:3001``), and the chain at ``rpc_url``
    for what only the chain says (consent nonces, events). Give ``http`` to share an
    ``httpx.Client``; else the client owns one (``close()``, or use it in ``with``)."""

    def __init__(
        self,
        relayer_url: str,
        *,
        rpc_url: Optional[str] = None,
        registry: Optional[str] = None,
        http: Optional[httpx.Client] = None,
        timeout_secs: float = 120.0,
        poll_secs: float = 0.25,
    ) -> None:
        self.settings = _settings(relayer_url, rpc_url, registry, timeout_secs, poll_secs)
        self._own_http = http is None
        self._http = http if http is not None else httpx.Client(timeout=DEFAULT_HTTP_TIMEOUT)

    def __repr__(self) -> str:
        return f"RelayerClient({self.settings.relayer_url!r})"

    def __enter__(self) -> "RelayerClient":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def _run(self, flow: Flow[T]) -> T:
        answer: Optional[Answer] = None
        try:
            while True:
                step = flow.send(answer)
                if isinstance(step, Pause):
                    time.sleep(step.seconds)
                    answer = None
                    continue
                try:
                    answer = _answer(self._http.send(_request(step)))
                except httpx.HTTPError as error:
                    raise _unreachable(step, error) from error
        except StopIteration as done:
            result: T = done.value
            return result

    def status(self) -> RelayerStatus:
        """``GET /status``."""
        answer: RelayerStatus = self._run(flows.relayer_get(self.settings, "/status"))
        return answer

    def domain(self) -> Domain:
        """``GET /domain``: the forwarder's EIP-712 domain (checked to be the one kya-core signs)."""
        return self._run(flows.domain(self.settings))

    def nonce(self, address: str) -> int:
        """The forwarder nonce the next request of ``address`` must carry."""
        return int(self._run(flows.relayer_get(self.settings, f"/nonce/{address}"))["nonce"])

    def relay(self, relay_id: str) -> Optional[RelayView]:
        """``GET /relay/:id``; ``None`` when the relayer does not know it."""
        return self._run(flows.relay(self.settings, relay_id))

    def submit(self, request: ForwardRequest, signature: bytes, *, chain_id: int, forwarder: str) -> Relayed:
        """``POST /relay`` of a request signed elsewhere (its typed data by a wallet); not
        followed: ``relay(answer["relayId"])`` says how it settles."""
        return self._run(flows.submit(self.settings, request, signature, chain_id=chain_id, forwarder=forwarder))

    def write(self, data: bytes, *, account: Account, deadline: int = 0) -> Outcome:
        """Any registry write ``data`` (call data from ``kya._core``) signed by ``account``."""
        return self._run(flows.relay_write(self.settings, account, data, deadline=deadline))

    def register(
        self,
        registration: Registration,
        *,
        account: Account,
        wallet_consent: ConsentSource = None,
        liability_consent: ConsentSource = None,
        consent_deadline: Optional[int] = None,
    ) -> Outcome:
        """Registers an agent, sent by ``account`` (its creator). When ``account`` is not the
        agent wallet (and, for a root, the Haftungsperson), each party's consent comes as an
        ``Account`` that signs it here or as its signature made elsewhere (with the
        ``consent_deadline`` it was signed for); while any is missing, ``ConsentsMissing``
        carries what to sign and nothing is sent. ``Outcome.agent_id`` is the new agent's."""
        return self._run(
            flows.register(
                self.settings, account, registration, wallet_consent, liability_consent, consent_deadline
            )
        )

    def consent_plan(
        self, registration: Registration, *, creator: str, consent_deadline: Optional[int] = None
    ) -> ConsentPlan:
        """The consents ``registration`` needs when ``creator`` sends it, unsigned: their typed
        data for wallets to sign before ``register`` (with ``consent_deadline=plan.deadline``)."""
        plan, _ = self._run(flows.consent_plan(self.settings, registration, creator, None, None, consent_deadline))
        return plan

    def attest(self, agent_id: int, *, account: Account) -> Outcome:
        """``attestCompliance``: by the agent wallet, creator or Haftungsperson."""
        return self.write(attest_compliance_calldata(agent_id), account=account)

    def report_revenue(
        self,
        agent_id: int,
        *,
        account: Account,
        amount_cents: int,
        currency: str,
        category: str,
        period_start: int,
        period_end: int,
    ) -> Outcome:
        """``reportRevenue``: ``amount_cents`` in cents, the period in Unix seconds."""
        data = report_revenue_calldata(
            agent_id=agent_id,
            amount_cents=amount_cents,
            currency=currency,
            category=category,
            period_start=period_start,
            period_end=period_end,
        )
        return self.write(data, account=account)

    def terminate(self, agent_id: int, *, account: Account) -> Outcome:
        """``terminateSelf``: permanent; the wallet is freed."""
        return self.write(terminate_self_calldata(agent_id), account=account)

    def invalidate_consents(self, *, account: Account, through: Optional[int] = None) -> Outcome:
        """Takes back ``account``'s consents: those signed for its current consent nonce
        (``invalidateConsents``), or with ``through`` every one signed for a nonce up to it
        (``invalidateConsentsThrough``). ``Outcome.next_consent_nonce`` is its nonce after."""
        data = invalidate_consents_calldata() if through is None else invalidate_consents_through_calldata(through)
        return self.write(data, account=account)


class AsyncRelayerClient:
    """``RelayerClient`` for asyncio: the same flows, sent with ``httpx.AsyncClient``."""

    def __init__(
        self,
        relayer_url: str,
        *,
        rpc_url: Optional[str] = None,
        registry: Optional[str] = None,
        http: Optional[httpx.AsyncClient] = None,
        timeout_secs: float = 120.0,
        poll_secs: float = 0.25,
    ) -> None:
        self.settings = _settings(relayer_url, rpc_url, registry, timeout_secs, poll_secs)
        self._own_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=DEFAULT_HTTP_TIMEOUT)

    def __repr__(self) -> str:
        return f"AsyncRelayerClient({self.settings.relayer_url!r})"

    async def __aenter__(self) -> "AsyncRelayerClient":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def _run(self, flow: Flow[T]) -> T:
        answer: Optional[Answer] = None
        try:
            while True:
                step = flow.send(answer)
                if isinstance(step, Pause):
                    await asyncio.sleep(step.seconds)
                    answer = None
                    continue
                try:
                    answer = _answer(await self._http.send(_request(step)))
                except httpx.HTTPError as error:
                    raise _unreachable(step, error) from error
        except StopIteration as done:
            result: T = done.value
            return result

    async def status(self) -> RelayerStatus:
        answer: RelayerStatus = await self._run(flows.relayer_get(self.settings, "/status"))
        return answer

    async def domain(self) -> Domain:
        return await self._run(flows.domain(self.settings))

    async def nonce(self, address: str) -> int:
        return int((await self._run(flows.relayer_get(self.settings, f"/nonce/{address}")))["nonce"])

    async def relay(self, relay_id: str) -> Optional[RelayView]:
        return await self._run(flows.relay(self.settings, relay_id))

    async def submit(self, request: ForwardRequest, signature: bytes, *, chain_id: int, forwarder: str) -> Relayed:
        return await self._run(
            flows.submit(self.settings, request, signature, chain_id=chain_id, forwarder=forwarder)
        )

    async def write(self, data: bytes, *, account: Account, deadline: int = 0) -> Outcome:
        return await self._run(flows.relay_write(self.settings, account, data, deadline=deadline))

    async def register(
        self,
        registration: Registration,
        *,
        account: Account,
        wallet_consent: ConsentSource = None,
        liability_consent: ConsentSource = None,
        consent_deadline: Optional[int] = None,
    ) -> Outcome:
        return await self._run(
            flows.register(
                self.settings, account, registration, wallet_consent, liability_consent, consent_deadline
            )
        )

    async def consent_plan(
        self, registration: Registration, *, creator: str, consent_deadline: Optional[int] = None
    ) -> ConsentPlan:
        plan, _ = await self._run(
            flows.consent_plan(self.settings, registration, creator, None, None, consent_deadline)
        )
        return plan

    async def attest(self, agent_id: int, *, account: Account) -> Outcome:
        return await self.write(attest_compliance_calldata(agent_id), account=account)

    async def report_revenue(
        self,
        agent_id: int,
        *,
        account: Account,
        amount_cents: int,
        currency: str,
        category: str,
        period_start: int,
        period_end: int,
    ) -> Outcome:
        data = report_revenue_calldata(
            agent_id=agent_id,
            amount_cents=amount_cents,
            currency=currency,
            category=category,
            period_start=period_start,
            period_end=period_end,
        )
        return await self.write(data, account=account)

    async def terminate(self, agent_id: int, *, account: Account) -> Outcome:
        return await self.write(terminate_self_calldata(agent_id), account=account)

    async def invalidate_consents(self, *, account: Account, through: Optional[int] = None) -> Outcome:
        data = invalidate_consents_calldata() if through is None else invalidate_consents_through_calldata(through)
        return await self.write(data, account=account)

