"""Following the change feed (docs/change-feed.md), as the Rust ``ChangeFollower`` and the npm
``followChanges`` do: pages of ``GET /api/v1/changes`` from a cursor until caught up, then the
stream (``GET /api/v1/changes/stream``), reconnected with ``Last-Event-ID`` so that each event is
handed out once, in feed order. A stream the server ends on purpose (``: end <reason>
last-event-id=<id>``, then that id alone) is reopened at once from the id it names, which is past
the events the filters passed over; one that broke, after the stream's ``retry``, from the last
event handed out.

``ChangeFollower`` (an iterator, for threads) and ``AsyncChangeFollower`` (an async iterator, for
tasks) yield the events; ``RevocationFollower`` keeps a provider's ``Gate`` told of every loss of
compliance (kya-core's rule, ``compliance_lost_at``), in a thread or an asyncio task."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from typing import AsyncIterator, Iterable, Iterator, List, Optional, TypedDict, Union

import httpx

from kya._core import FEED_RECONNECT_MS, compliance_lost_at, cursor_key
from kya.api_types import ChangeEvent, FilterValues
from kya.client import ApiError, AsyncReadClient, ReadClient
from kya.provider import Gate
from kya.sse import MessageReader

_log = logging.getLogger("kya.feed")

#: The type a revocation follower reads: every loss of compliance is one (a suspension, a lapsed
#: attestation, a correction), and so is the retraction of a change that made an agent compliant.
COMPLIANCE_CHANGED = "agent.compliance_changed"

#: Longest wait between attempts of a revocation follower whose API keeps failing.
_LONGEST_BACKOFF_SECS = 60.0


class _Place:
    """Where a follower is: the last event handed out, or passed over by its filters (a page's
    ``next``, a planned end's id). Resuming after it misses nothing and repeats nothing."""

    def __init__(self, after: Optional[str]) -> None:
        self.position = after
        self._key = cursor_key(after) if after is not None else None

    def reached(self, event_id: str) -> bool:
        return self._key is not None and cursor_key(event_id) <= self._key

    def advance(self, event_id: str) -> None:
        key = cursor_key(event_id)
        if self._key is None or key > self._key:
            self.position, self._key = event_id, key

    def hand_out(self, events: Iterable[ChangeEvent]) -> Iterator[ChangeEvent]:
        """The events past this place, each moving it on as it is handed out."""
        for event in events:
            if not self.reached(event["id"]):
                self.advance(event["id"])
                yield event


class _Connection:
    """One stream connection read into events: ``named`` is the id its planned end named, if it
    ended so; ``retry`` the reconnection delay it set (seconds)."""

    def __init__(self) -> None:
        self._reader = MessageReader()
        self.named: Optional[str] = None
        self.retry: Optional[float] = None

    def events(self, chunk: bytes) -> List[ChangeEvent]:
        events: List[ChangeEvent] = []
        for message in self._reader.feed(chunk):
            if message.retry is not None:
                self.retry = message.retry / 1000
            if message.data is None:
                # An id alone: the server ends this connection and names where to resume.
                if message.id is not None:
                    self.named = message.id
                continue
            events.append(json.loads(message.data))
        return events


class _Filters(TypedDict):
    wallet: FilterValues
    agent_id: FilterValues
    type: FilterValues
    final: bool


class _Following:
    """What both followers hold: the filters, the place, and the delay before a reconnect."""

    def __init__(
        self,
        after: Optional[str],
        wallet: FilterValues,
        agent_id: FilterValues,
        type: FilterValues,
        final: bool,
        page_size: int,
    ) -> None:
        self._filters = _Filters(wallet=wallet, agent_id=agent_id, type=type, final=final)
        self._place = _Place(after)
        self.page_size = page_size
        #: The wait before reconnecting a stream that broke: the stream's ``retry`` once it sent one.
        self.retry_secs = FEED_RECONNECT_MS / 1000
        #: Set once the pages reached the newest event and the stream is being followed.
        self.caught_up = threading.Event()
        self._stopping = threading.Event()

    @property
    def position(self) -> Optional[str]:
        """Where to start again (``after=``) to miss nothing and repeat nothing."""
        return self._place.position

    def _ended(self, connection: _Connection) -> bool:
        """Takes in how a connection ended: ``True`` when the server named where to resume (the
        follower reconnects at once), ``False`` when it broke (after ``retry_secs``)."""
        if connection.retry is not None:
            self.retry_secs = connection.retry
        if connection.named is None:
            return False
        self._place.advance(connection.named)
        return True


class ChangeFollower(_Following):
    """The events of the feed that the filters select (``wallet``, ``agent_id``, ``type``: a value
    or several; ``final``: only final events), after the event id ``after`` (none: from the
    oldest event kept), for as long as it is iterated: ``for event in ChangeFollower(api): ...``.
    Iterating again resumes from ``position``. A refusal raises ``ApiError`` (400 malformed,
    404 a cursor this feed never gave, 410 one past the retention, 429, 503); a page that
    cannot be fetched raises httpx's error; a stream that cannot be reached is tried again after
    ``retry_secs``. ``stop()``, from another thread, ends the iteration."""

    def __init__(
        self,
        api: Union[str, ReadClient],
        *,
        after: Optional[str] = None,
        wallet: FilterValues = None,
        agent_id: FilterValues = None,
        type: FilterValues = None,
        final: bool = False,
        page_size: int = 1000,
    ) -> None:
        super().__init__(after, wallet, agent_id, type, final, page_size)
        self.api = ReadClient(api) if isinstance(api, str) else api
        self._open: Optional[httpx.Response] = None

    def __iter__(self) -> Iterator[ChangeEvent]:
        yield from self._pages()
        if self._stopping.is_set():
            return
        self.caught_up.set()
        while not self._stopping.is_set():
            connection = _Connection()
            try:
                with self.api.stream_changes(last_event_id=self.position, **self._filters) as response:
                    self._open = response
                    for chunk in response.iter_bytes():
                        # A stop() that came while the stream opened found nothing to interrupt.
                        if self._stopping.is_set():
                            return
                        yield from self._place.hand_out(connection.events(chunk))
            except httpx.TransportError:
                pass  # a connection refused or cut: resumed below, from the last event handed out
            finally:
                self._open = None
            if not self._ended(connection):
                self._stopping.wait(self.retry_secs)

    def _pages(self) -> Iterator[ChangeEvent]:
        while not self._stopping.is_set():
            page = self.api.changes(after=self.position, limit=self.page_size, **self._filters)
            yield from self._place.hand_out(page["events"])
            # Past the events the filters skipped too: `next` is the last event the page looked at.
            if page["next"] is not None:
                self._place.advance(page["next"])
            if not page["more"]:
                return

    def stop(self) -> None:
        """Ends the iteration: at once while it waits to reconnect or reads the stream, else
        after the page being read."""
        self._stopping.set()
        response = self._open
        if response is not None:
            _interrupt(response)


def _interrupt(response: httpx.Response) -> None:
    """Wakes a thread blocked reading ``response``. Closing the response from another thread
    does not: on Linux a socket closed under a blocked ``recv`` leaves it blocked until the
    server sends (a heartbeat, 15 s on). Shutting the socket down ends the read at once."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed already


class AsyncChangeFollower(_Following):
    """``ChangeFollower`` for asyncio: ``async for event in AsyncChangeFollower(api): ...``.
    Cancel the task that iterates it to stop."""

    def __init__(
        self,
        api: Union[str, AsyncReadClient],
        *,
        after: Optional[str] = None,
        wallet: FilterValues = None,
        agent_id: FilterValues = None,
        type: FilterValues = None,
        final: bool = False,
        page_size: int = 1000,
    ) -> None:
        super().__init__(after, wallet, agent_id, type, final, page_size)
        self.api = AsyncReadClient(api) if isinstance(api, str) else api

    def __aiter__(self) -> AsyncIterator[ChangeEvent]:
        return self._follow()

    async def _follow(self) -> AsyncIterator[ChangeEvent]:
        while True:
            page = await self.api.changes(after=self.position, limit=self.page_size, **self._filters)
            for event in self._place.hand_out(page["events"]):
                yield event
            if page["next"] is not None:
                self._place.advance(page["next"])
            if not page["more"]:
                break
        self.caught_up.set()
        while True:
            connection = _Connection()
            try:
                async with self.api.stream_changes(last_event_id=self.position, **self._filters) as response:
                    async for chunk in response.aiter_bytes():
                        for event in self._place.hand_out(connection.events(chunk)):
                            yield event
            except httpx.TransportError:
                pass  # resumed below, from the last event handed out
            if not self._ended(connection):
                await asyncio.sleep(self.retry_secs)


class RevocationFollower:
    """Keeps ``gate`` told of every loss of compliance the change feed reports: each event by
    which an agent is no longer compliant (kya-core's rule: ``compliance_lost_at``) calls
    ``gate.compliance_lost(wallet, block)``, so the gate refuses that wallet's passes of that
    block or before (``revoked``), with no call to the API per request.

    It reads ``agent.compliance_changed`` events of the API at ``api_url`` (the gate's by default)
    after ``after`` (none: from the oldest event kept, so passes issued before the provider
    started are covered). ``start()`` follows in a daemon thread, ``start_task()`` in an asyncio
    task; ``stop()`` ends either. A refusal that may pass (429, 5xx) or a connection that fails
    is tried again from ``position``, waiting longer each time up to a minute; any other refusal
    (a cursor past the retention, 410) stops it, kept in ``error`` and logged."""

    def __init__(self, gate: Gate, *, api_url: Optional[str] = None, after: Optional[str] = None) -> None:
        self.gate = gate
        self.api_url = (api_url or gate.api_url).rstrip("/")
        self._after = after
        self._follower: Optional[_Following] = None
        self._task: Optional[asyncio.Future[None]] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        #: How many events revoked passes.
        self.revocations = 0
        #: What stopped the follower, if it stopped on its own.
        self.error: Optional[BaseException] = None
        #: Set once the feed was read up to its newest event.
        self.caught_up = threading.Event()
        self._stopping = threading.Event()

    @property
    def position(self) -> Optional[str]:
        """The last event taken into account: where to start again (``after=``)."""
        return self._follower.position if self._follower is not None else self._after

    def note(self, event: ChangeEvent) -> bool:
        """Takes one event into account; ``True`` when it revoked passes."""
        lost = compliance_lost_at(event)
        if lost is None:
            return False
        self.gate.compliance_lost(*lost)
        self.revocations += 1
        return True

    def start(self) -> threading.Thread:
        """Follows the feed in a daemon thread, until ``stop()``."""
        thread = threading.Thread(target=self.run, name="kya-revocations", daemon=True)
        thread.start()
        return thread

    def start_task(self) -> asyncio.Future[None]:
        """Follows the feed in a task of the running loop, until ``stop()`` or its cancellation."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.ensure_future(self.arun())
        return self._task

    def stop(self) -> None:
        """Ends the following, from any thread."""
        self._stopping.set()
        if isinstance(self._follower, ChangeFollower):
            self._follower.stop()
        if self._task is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)

    def run(self) -> None:
        """Follows the feed in this thread, until ``stop()``."""
        follower = ChangeFollower(ReadClient(self.api_url), after=self._after, type=COMPLIANCE_CHANGED)
        follower.caught_up = self.caught_up
        self._follower = follower
        failures = 0
        try:
            while not self._stopping.is_set():
                try:
                    for event in follower:
                        self.note(event)
                        failures = 0
                except (ApiError, httpx.TransportError) as error:
                    wait = self._backoff(error, failures, follower.retry_secs)
                    if wait is None:
                        return
                    failures += 1
                    self._stopping.wait(wait)
        except Exception as error:
            self._failed(error)
        finally:
            follower.api.close()

    async def arun(self) -> None:
        """Follows the feed in this task, until its cancellation (``stop()`` cancels the task
        ``start_task()`` made)."""
        follower = AsyncChangeFollower(AsyncReadClient(self.api_url), after=self._after, type=COMPLIANCE_CHANGED)
        follower.caught_up = self.caught_up
        self._follower = follower
        failures = 0
        try:
            while not self._stopping.is_set():
                try:
                    async for event in follower:
                        self.note(event)
                        failures = 0
                except (ApiError, httpx.TransportError) as error:
                    wait = self._backoff(error, failures, follower.retry_secs)
                    if wait is None:
                        return
                    failures += 1
                    await asyncio.sleep(wait)
        except Exception as error:
            self._failed(error)
        finally:
            await follower.api.aclose()

    def _failed(self, error: Exception) -> None:
        """A fault no retry mends (an event that does not decode): kept, logged, and the end."""
        self.error = error
        _log.error("the change feed stopped at %s (%s): no more revocations", self.position, error)

    def _backoff(self, error: BaseException, failures: int, retry_secs: float) -> Optional[float]:
        """How long to wait before trying again after ``error``; ``None``: give up (kept in
        ``error``)."""
        if isinstance(error, ApiError) and not (error.status == 429 or error.status >= 500):
            self._failed(error)
            return None
        wait = error.retry_after if isinstance(error, ApiError) and error.retry_after is not None else None
        if wait is None:
            wait = min(retry_secs * 2**failures, _LONGEST_BACKOFF_SECS)
        _log.warning("the change feed failed (%s): trying again in %.1f s from %s", error, wait, self.position)
        return wait
