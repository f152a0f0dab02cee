"""A small typed client of the KYA read API, for scripts and notebooks: ``ReadClient`` (blocking)
and ``AsyncReadClient`` (asyncio), both over httpx. Answers are the API's JSON as ``TypedDict``s
(``kya.api_types``, SPEC.md's field names); an error status raises ``ApiError`` with the status
and the API's own message. ``kya.feed`` follows the change feed through these clients."""

from __future__ import annotations

import contextlib
import math
from typing import Any, AsyncIterator, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union, cast
from urllib.parse import quote

import httpx

from kya._core import KyaError
from kya.api_types import AgentDetails, ChangesPage, FilterValues, KyaBatch, KyaResult

#: Longest part of a body without an ``error`` field quoted in an ``ApiError``.
_QUOTED_CHARS = 200

#: A stream sends a heartbeat every 15 s: four missed means the connection is gone.
_STREAM_TIMEOUT = httpx.Timeout(10.0, read=60.0)

_Answer = TypeVar("_Answer")


class ApiError(KyaError):
    """The API answered an error status: ``status``, and ``message`` from its
    ``{"error": ...}`` body (the body itself when it has none). ``retry_after`` is the
    ``Retry-After`` header in seconds (a 429's), ``None`` without one."""

    def __init__(self, status: int, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(f"the KYA API answered HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


def _error_of(response: httpx.Response) -> ApiError:
    """The ``ApiError`` of an error answer whose body was read."""
    try:
        body = response.json()
        message = body["error"] if isinstance(body, dict) and isinstance(body.get("error"), str) else None
    except ValueError:
        message = None
    if message is None:
        text = response.text.strip()
        message = text[:_QUOTED_CHARS] + ("…" if len(text) > _QUOTED_CHARS else "") if text else "an empty body"
    return ApiError(response.status_code, message, _retry_after(response))


def _retry_after(response: httpx.Response) -> Optional[float]:
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _answer(response: httpx.Response, shape: type[_Answer]) -> _Answer:
    """The JSON of a successful answer, as ``shape`` (a ``TypedDict``: checked by type checkers,
    not at run time); ``ApiError`` for an error status."""
    if response.status_code >= 400:
        raise _error_of(response)
    try:
        return cast(_Answer, response.json())
    except ValueError as error:
        raise ApiError(response.status_code, f"an answer that is not JSON: {error}") from error


def _values(values: FilterValues) -> List[str]:
    if values is None:
        return []
    if isinstance(values, (str, int)):
        return [str(values)]
    return [str(value) for value in values]


def changes_params(
    *,
    after: Optional[str] = None,
    limit: Optional[int] = None,
    wallet: FilterValues = None,
    agent_id: FilterValues = None,
    type: FilterValues = None,
    final: bool = False,
) -> httpx.QueryParams:
    """The query of ``/api/v1/changes`` (and, without ``after`` and ``limit``, of its stream):
    each filter repeated for each of its values (values of one filter match any; filters must
    all match)."""
    params: List[Tuple[str, Union[str, int, float, bool, None]]] = []
    if after is not None:
        params.append(("after", after))
    if limit is not None:
        params.append(("limit", str(limit)))
    for name, values in (("wallet", wallet), ("agentId", agent_id), ("type", type)):
        params.extend((name, value) for value in _values(values))
    if final:
        params.append(("final", "true"))
    return httpx.QueryParams(params)


def _stream_headers(last_event_id: Optional[str]) -> dict[str, str]:
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    return headers


def _wallets(wallets: Sequence[str]) -> List[str]:
    if isinstance(wallets, str):
        raise TypeError("wallets is a list of addresses, not one address")
    return list(wallets)


class _Paths:
    """The API's URLs, from its base."""

    def __init__(self, api_url: str) -> None:
        self.base = api_url.rstrip("/")

    def kya(self, wallet: str) -> str:
        # Quoted whole: a wallet is one segment of the path, whatever the caller passes.
        return f"{self.base}/api/v1/kya/{quote(wallet.strip(), safe='')}"

    def batch(self) -> str:
        return f"{self.base}/api/v1/kya/batch"

    def agent(self, agent_id: int) -> str:
        return f"{self.base}/api/v1/agent/{int(agent_id)}"

    def changes(self) -> str:
        return f"{self.base}/api/v1/changes"

    def stream(self) -> str:
        return f"{self.base}/api/v1/changes/stream"


class ReadClient:
    """The read API at ``api_url`` (``https://kya.example``). ``http`` shares an existing
    ``httpx.Client`` (its pool, timeouts, proxies); otherwise the client makes one, closed by
    ``close()`` or ``with``."""

    def __init__(self, api_url: str, *, http: Optional[httpx.Client] = None, timeout: float = 10.0) -> None:
        self.api_url = api_url.rstrip("/")
        self._paths = _Paths(api_url)
        self._owned = http is None
        self._http = http if http is not None else httpx.Client(timeout=timeout)

    def kya(self, wallet: str) -> KyaResult:
        """``GET /api/v1/kya/:wallet``: the wallet's KYA standing (checksummed or lowercase)."""
        return _answer(self._http.get(self._paths.kya(wallet)), KyaResult)

    def kya_batch(self, wallets: Sequence[str]) -> KyaBatch:
        """``POST /api/v1/kya/batch``: up to 100 wallets' standings, in order, at one block."""
        return _answer(self._http.post(self._paths.batch(), json={"wallets": _wallets(wallets)}), KyaBatch)

    def agent(self, agent_id: int) -> AgentDetails:
        """``GET /api/v1/agent/:id``: the record, its children and its compliance (404: none)."""
        return _answer(self._http.get(self._paths.agent(agent_id)), AgentDetails)

    def changes(
        self,
        *,
        after: Optional[str] = None,
        limit: Optional[int] = None,
        wallet: FilterValues = None,
        agent_id: FilterValues = None,
        type: FilterValues = None,
        final: bool = False,
    ) -> ChangesPage:
        """One page of ``GET /api/v1/changes``, the change feed, after the event id ``after``
        (none: from the oldest kept). ``kya.ChangeFollower`` follows it."""
        params = changes_params(after=after, limit=limit, wallet=wallet, agent_id=agent_id, type=type, final=final)
        return _answer(self._http.get(self._paths.changes(), params=params), ChangesPage)

    @contextlib.contextmanager
    def stream_changes(
        self,
        *,
        last_event_id: Optional[str] = None,
        wallet: FilterValues = None,
        agent_id: FilterValues = None,
        type: FilterValues = None,
        final: bool = False,
    ) -> Iterator[httpx.Response]:
        """``GET /api/v1/changes/stream`` opened after ``last_event_id`` (none: from the next
        event): the response, to read as Server-Sent Events (``kya.sse``). A refusal (400, 404,
        410, 429, 503) raises ``ApiError`` before any event."""
        params = changes_params(wallet=wallet, agent_id=agent_id, type=type, final=final)
        request = self._http.build_request(
            "GET", self._paths.stream(), params=params, headers=_stream_headers(last_event_id), timeout=_STREAM_TIMEOUT
        )
        response = self._http.send(request, stream=True)
        try:
            if response.status_code >= 400:
                response.read()
                raise _error_of(response)
            yield response
        finally:
            response.close()

    def close(self) -> None:
        if self._owned:
            self._http.close()

    def __enter__(self) -> ReadClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncReadClient:
    """``ReadClient`` for asyncio: the same calls, awaited, over an ``httpx.AsyncClient``."""

    def __init__(
        self, api_url: str, *, http: Optional[httpx.AsyncClient] = None, timeout: float = 10.0
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._paths = _Paths(api_url)
        self._owned = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout)

    async def kya(self, wallet: str) -> KyaResult:
        """``GET /api/v1/kya/:wallet``."""
        return _answer(await self._http.get(self._paths.kya(wallet)), KyaResult)

    async def kya_batch(self, wallets: Sequence[str]) -> KyaBatch:
        """``POST /api/v1/kya/batch``."""
        response = await self._http.post(self._paths.batch(), json={"wallets": _wallets(wallets)})
        return _answer(response, KyaBatch)

    async def agent(self, agent_id: int) -> AgentDetails:
        """``GET /api/v1/agent/:id``."""
        return _answer(await self._http.get(self._paths.agent(agent_id)), AgentDetails)

    async def changes(
        self,
        *,
        after: Optional[str] = None,
        limit: Optional[int] = None,
        wallet: FilterValues = None,
        agent_id: FilterValues = None,
        type: FilterValues = None,
        final: bool = False,
    ) -> ChangesPage:
        """One page of ``GET /api/v1/changes``."""
        params = changes_params(after=after, limit=limit, wallet=wallet, agent_id=agent_id, type=type, final=final)
        return _answer(await self._http.get(self._paths.changes(), params=params), ChangesPage)

    @contextlib.asynccontextmanager
    async def stream_changes(
        self,
        *,
        last_event_id: Optional[str] = None,
        wallet: FilterValues = None,
        agent_id: FilterValues = None,
        type: FilterValues = None,
        final: bool = False,
    ) -> AsyncIterator[httpx.Response]:
        """``GET /api/v1/changes/stream``, as ``ReadClient.stream_changes``."""
        params = changes_params(wallet=wallet, agent_id=agent_id, type=type, final=final)
        request = self._http.build_request(
            "GET", self._paths.stream(), params=params, headers=_stream_headers(last_event_id), timeout=_STREAM_TIMEOUT
        )
        response = await self._http.send(request, stream=True)
        try:
            if response.status_code >= 400:
                await response.aread()
                raise _error_of(response)
            yield response
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        if self._owned:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncReadClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
