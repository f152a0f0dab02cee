"""A provider's gate: admits requests signed by compliant agents carrying their pass, offline
(``verify_agent_request``), with the issuer's keys kept by ``KeyCache`` (fetched at most once
per interval, one fetch at a time, trusted within bounds) and nonces claimed in ``NonceMemory``
or a store the caller gives (Redis, say). ``admit`` for threads, ``aadmit`` for asyncio tasks."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
import weakref
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, Mapping, Optional, Protocol, Tuple, Union

from kya._core import JWKS_PATH, Jwks, KeyCache, KyaError, NonceMemory, verify_agent_request

if TYPE_CHECKING:  # the verdicts' types are the stubs' (kya/_core.pyi) only
    from kya._core import AgentVerdict, VerifiedPassFacts

#: Fetches the JWKS: its body and its ``Cache-Control`` (``None`` when absent).
FetchJwks = Callable[[str], Tuple[bytes, Optional[str]]]
AsyncFetchJwks = Callable[[str], Awaitable[Tuple[bytes, Optional[str]]]]
FetchReason = Literal["stale", "unknown_key"]


class IssuerKeysUnavailable(KyaError):
    """No issuer key is trusted now: never fetched, or past its bound, and the issuer cannot be
    reached. Answer 503: the gate cannot tell a valid pass from a forged one."""


class NonceStore(Protocol):
    """Claims a nonce key once, atomically, until ``remember_until`` (Unix seconds):
    ``NonceMemory`` in one process; Redis ``SET key 1 NX EXAT remember_until`` across several."""

    def claim(self, nonce_key: str, remember_until: int, now: Optional[int] = None) -> bool: ...


def _fetch_jwks(url: str) -> Tuple[bytes, Optional[str]]:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (the issuer's URL)
        body: bytes = response.read()
        return body, response.headers.get("Cache-Control")


async def _afetch_jwks(url: str) -> Tuple[bytes, Optional[str]]:
    # Imported here: a provider with threads only needs no httpx.
    import httpx

    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(url)
        response.raise_for_status()
        cache_control = ", ".join(response.headers.get_list("cache-control"))
        return response.content, cache_control or None


class Admission:
    """The gate's answer: ``admitted``, else the ``status`` to answer (401: no valid signature
    or no pass, or a replayed nonce; 403: a pass that does not admit the signer), the stage,
    ``reason`` and ``message``. ``verdict`` is ``verify_agent_request``'s."""

    def __init__(self, verdict: Mapping[str, Any]) -> None:
        self.verdict = verdict
        self.admitted: bool = verdict["outcome"] == "admitted"
        self.stage: Optional[str] = verdict.get("stage")
        self.reason: Optional[str] = verdict.get("reason")
        self.message: Optional[str] = verdict.get("message")
        if self.admitted:
            self.status = 200
        elif self.stage == "pass" and self.reason != "no_pass":
            self.status = 403
        else:
            self.status = 401

    @property
    def signer(self) -> Optional[str]:
        """The account that signed the request (EIP-55), when admitted."""
        return self.verdict["signature"]["signer"] if self.admitted else None

    @property
    def pass_(self) -> Optional[VerifiedPassFacts]:
        """The pass that admitted the request (``wallet``, ``kid``, ``claims``), when admitted."""
        facts: Optional[VerifiedPassFacts] = self.verdict["pass"] if self.admitted else None
        return facts

    def __repr__(self) -> str:
        if self.admitted:
            return f"Admission(admitted, signer={self.signer!r})"
        return f"Admission({self.status}, {self.stage}, {self.reason!r})"


class Gate:
    """Admits requests for the provider serving ``authority`` (``host[:port]``), trusting the
    passes the API at ``api_url`` issues for ``chain_id`` and ``registry``. Thread-safe, and
    ``aadmit`` shares one JWKS fetch among the tasks of a loop. The keys are fetched with
    ``fetch_jwks`` (default: the standard library's) for ``admit``, and with ``async_fetch_jwks``
    for ``aadmit`` (default: httpx's, or ``fetch_jwks`` in a worker thread when only it is given).
    A fetch under way for one form is not waited for by the other: a provider uses one."""

    def __init__(
        self,
        *,
        api_url: str,
        authority: str,
        chain_id: int,
        registry: str,
        issuer: Optional[str] = None,
        nonces: Optional[NonceStore] = None,
        keys: Optional[KeyCache] = None,
        fetch_jwks: Optional[FetchJwks] = None,
        async_fetch_jwks: Optional[AsyncFetchJwks] = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.issuer = issuer or self.api_url
        self.authority = authority
        self.chain_id = chain_id
        self.registry = registry
        self.nonces: NonceStore = nonces if nonces is not None else NonceMemory()
        self.keys = keys if keys is not None else KeyCache()
        self._fetch_jwks = fetch_jwks or _fetch_jwks
        if async_fetch_jwks is not None:
            self._afetch_jwks: AsyncFetchJwks = async_fetch_jwks
        elif fetch_jwks is not None:
            self._afetch_jwks = self._fetch_jwks_in_thread
        else:
            self._afetch_jwks = _afetch_jwks
        self._clock = clock
        self._lock = threading.Lock()
        self._fetching = threading.Lock()
        # One per event loop: an asyncio lock belongs to the loop it was first used in.
        self._afetching: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        #: The latest block at which each wallet (lowercase) was reported losing compliance.
        self._lost_at: dict[str, int] = {}

    def compliance_lost(self, wallet: str, block: int) -> None:
        """The change feed says ``wallet`` lost compliance at ``block``: its passes from that
        block or before are refused (``revoked``)."""
        with self._lock:
            key = wallet.lower()
            self._lost_at[key] = max(block, self._lost_at.get(key, 0))

    def _begin_fetch(self, reason: FetchReason, seen: int) -> bool:
        """Whether this caller fetches: none starts if a fetch finished since the caller read
        ``seen`` outcomes (it uses that one's), nor when the cache allows none now."""
        now_ms = int(self._clock() * 1000)
        with self._lock:
            return self.keys.outcomes == seen and self.keys.begin_fetch(reason, now_ms)

    def _refresh(self, reason: FetchReason, seen: int) -> None:
        """One fetch at a time: a caller that finds one under way waits for it, and uses its
        outcome: none starts if a fetch finished since the caller read ``seen`` outcomes."""
        with self._fetching:
            if not self._begin_fetch(reason, seen):
                return
            try:
                body, cache_control = self._fetch_jwks(self.api_url + JWKS_PATH)
                jwks = Jwks(body)
            except Exception:
                with self._lock:
                    self.keys.failed()
                return
            with self._lock:
                self.keys.fetched(jwks, cache_control, int(self._clock() * 1000))

    async def _arefresh(self, reason: FetchReason, seen: int) -> None:
        """``_refresh`` for tasks: those of one loop wait for the fetch under way and use its
        outcome. A fetch cancelled mid-way (its request's task cancelled) counts as failed, so
        the cache never waits for an outcome that will not come."""
        loop = asyncio.get_running_loop()
        with self._lock:
            fetching = self._afetching.setdefault(loop, asyncio.Lock())
        async with fetching:
            if not self._begin_fetch(reason, seen):
                return
            try:
                body, cache_control = await self._afetch_jwks(self.api_url + JWKS_PATH)
                jwks = Jwks(body)
            except BaseException as error:
                with self._lock:
                    self.keys.failed()
                if isinstance(error, Exception):
                    return
                raise
            with self._lock:
                self.keys.fetched(jwks, cache_control, int(self._clock() * 1000))

    async def _fetch_jwks_in_thread(self, url: str) -> Tuple[bytes, Optional[str]]:
        return await asyncio.get_running_loop().run_in_executor(None, self._fetch_jwks, url)

    def _held_keys(self) -> Tuple[Jwks, int]:
        """The keys to check with, and how many fetches had finished when they were read."""
        with self._lock:
            seen = self.keys.outcomes
            jwks = self.keys.jwks(int(self._clock() * 1000))
        if jwks is None:
            raise IssuerKeysUnavailable(f"no trusted key of {self.issuer}: {self.api_url + JWKS_PATH} cannot be had")
        return jwks, seen

    def _stale(self) -> bool:
        return self.keys.is_stale(int(self._clock() * 1000))

    def admit(
        self, method: str, url: str, headers: Any, body: Union[bytes, str, None] = None
    ) -> Admission:
        """Admits a request (its method, absolute URL, headers and body) or says why not.
        Raises ``IssuerKeysUnavailable`` when no issuer key is trusted now."""
        if self._stale():
            self._refresh("stale", self.keys.outcomes)
        jwks, seen = self._held_keys()
        verdict = self._verify(jwks, method, url, headers, body)
        if _unknown_key(verdict):
            # A rotation, or a made-up kid: the cache allows one attempt per interval.
            self._refresh("unknown_key", seen)
            verdict = self._verify_again(jwks, verdict, method, url, headers, body)
        return self._conclude(jwks, verdict, method, url, headers, body)

    async def aadmit(
        self, method: str, url: str, headers: Any, body: Union[bytes, str, None] = None
    ) -> Admission:
        """``admit`` for asyncio: the keys fetched without blocking the loop, one fetch shared
        by the tasks that need it at once."""
        if self._stale():
            await self._arefresh("stale", self.keys.outcomes)
        jwks, seen = self._held_keys()
        verdict = self._verify(jwks, method, url, headers, body)
        if _unknown_key(verdict):
            await self._arefresh("unknown_key", seen)
            verdict = self._verify_again(jwks, verdict, method, url, headers, body)
        return self._conclude(jwks, verdict, method, url, headers, body)

    def _verify_again(
        self,
        checked_with: Jwks,
        verdict: AgentVerdict,
        method: str,
        url: str,
        headers: Any,
        body: Union[bytes, str, None],
    ) -> AgentVerdict:
        """The verdict with the keys held after a refresh, if they changed."""
        refreshed = self.keys.jwks(int(self._clock() * 1000))
        if refreshed is not None and refreshed is not checked_with:
            return self._verify(refreshed, method, url, headers, body)
        return verdict

    def _conclude(
        self,
        jwks: Jwks,
        verdict: AgentVerdict,
        method: str,
        url: str,
        headers: Any,
        body: Union[bytes, str, None],
    ) -> Admission:
        """The revocations the feed reported, then the nonce, for a verdict that admits."""
        if verdict["outcome"] != "admitted":
            return Admission(verdict)
        signature = verdict["signature"]
        lost_at = self._lost_at.get(signature["signer"].lower())
        if lost_at is not None:
            # kya-core decides whether the pass's block is before the loss (`revoked`).
            verdict = self._verify(jwks, method, url, headers, body, lost_at)
            if verdict["outcome"] != "admitted":
                return Admission(verdict)
        # Claimed last: a request turned away for its pass can be sent again with a new one.
        # (The gate requires a nonce: a signature without one was refused already.)
        nonce_key, remember_until = signature["nonce_key"], signature["remember_until"]
        if nonce_key is None or remember_until is None or not self.nonces.claim(
            nonce_key, remember_until, int(self._clock())
        ):
            message = f"the nonce {signature['nonce']!r} of {signature['keyid']} was used already"
            return Admission({"outcome": "refused", "stage": "signature", "reason": "replayed", "message": message})
        return Admission(verdict)

    def _verify(
        self,
        jwks: Jwks,
        method: str,
        url: str,
        headers: Any,
        body: Union[bytes, str, None],
        lost_at: Optional[int] = None,
    ) -> AgentVerdict:
        return verify_agent_request(
            method,
            url,
            headers,
            authority=self.authority,
            jwks=jwks,
            issuer=self.issuer,
            chain_id=self.chain_id,
            registry=self.registry,
            body=body,
            now=int(self._clock()),
            lost_compliance_at=lost_at,
        )


def _unknown_key(verdict: AgentVerdict) -> bool:
    return verdict["outcome"] == "refused" and verdict["stage"] == "pass" and verdict["reason"] == "unknown_key"
