"""The pass an agent carries: fetched from ``GET /api/v1/kya/<wallet>/pass``, kept, and fetched
again before it expires, one fetch shared by all the requests (threads or tasks) that want it at
once."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import urllib.request
from typing import Awaitable, Callable, Optional

from kya._core import KyaError

#: Fetches a URL and returns the response's body (raising on an error status).
Fetch = Callable[[str], bytes]
AsyncFetch = Callable[[str], Awaitable[bytes]]


class PassUnavailable(KyaError):
    """The agent's pass could not be fetched (the API unreachable, an error status)."""


def _fetch(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/jwt"})
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (the API's URL)
        body: bytes = response.read()
        return body


def _expiry(jws: str) -> int:
    """The pass's ``exp``: when to have the next one. Read, not verified: the agent schedules
    its own pass's renewal by it; providers verify it (``verify_pass``)."""
    try:
        payload = jws.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        exp = claims["exp"]
        if not isinstance(exp, int):
            raise TypeError("exp is not a number")
        return exp
    except (IndexError, ValueError, KeyError, TypeError) as error:
        raise PassUnavailable(f"the API answered something that is not a pass: {error}") from error


class PassSource:
    """An agent's pass, renewed ``renew_before_secs`` before it expires (or halfway through a
    shorter lifetime). ``get()`` from threads, ``aget()`` from tasks: concurrent callers share
    one fetch."""

    def __init__(
        self,
        api_url: str,
        wallet: str,
        *,
        renew_before_secs: int = 60,
        fetch: Optional[Fetch] = None,
        async_fetch: Optional[AsyncFetch] = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = f"{api_url.rstrip('/')}/api/v1/kya/{wallet}/pass"
        self.renew_before_secs = renew_before_secs
        self.fetches = 0
        self._fetch = fetch or _fetch
        self._async_fetch = async_fetch
        self._clock = clock
        self._pass: Optional[str] = None
        self._renew_at = 0.0
        self._lock = threading.Lock()
        self._task: Optional[asyncio.Future[str]] = None

    def _current(self) -> Optional[str]:
        return self._pass if self._pass is not None and self._clock() < self._renew_at else None

    def _keep(self, body: bytes) -> str:
        jws = body.decode("ascii", errors="replace").strip()
        exp = _expiry(jws)
        now = self._clock()
        lifetime = max(exp - now, 0.0)
        self._renew_at = exp - min(float(self.renew_before_secs), lifetime / 2)
        self._pass = jws
        return jws

    def get(self) -> str:
        """The pass to send now, fetched first when there is none or it is due for renewal."""
        held = self._current()
        if held is not None:
            return held
        with self._lock:
            held = self._current()
            if held is not None:
                return held
            self.fetches += 1
            try:
                body = self._fetch(self.url)
            except Exception as error:
                raise PassUnavailable(f"could not fetch the pass from {self.url}: {error}") from error
            return self._keep(body)

    async def aget(self) -> str:
        """``get()`` for asyncio: one fetch for every task that asks while it runs."""
        held = self._current()
        if held is not None:
            return held
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._afetch())
        return await asyncio.shield(self._task)

    async def _afetch(self) -> str:
        self.fetches += 1
        try:
            if self._async_fetch is not None:
                body = await self._async_fetch(self.url)
            else:
                body = await asyncio.get_running_loop().run_in_executor(None, self._fetch, self.url)
        except Exception as error:
            raise PassUnavailable(f"could not fetch the pass from {self.url}: {error}") from error
        return self._keep(body)
