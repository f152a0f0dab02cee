"""The read API on loopback, for the change feed's followers and the providers: the issuer's JWKS
and the agent's pass from the Rust side's fixture, and the change feed, paged (``/changes``) and
streamed (``/changes/stream``) as docs/change-feed.md describes them. Every request is counted,
and each stream connection's ``Last-Event-ID``. A stream connection ends after ``budget`` events
offered to it (sent, or passed over by its filter) with the feed's planned end naming the last one
(``: end budget last-event-id=<id>`` then ``id: <id>`` alone), or is cut without an end after
``cut_after`` events sent."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

from kya import cursor_key

Event = Dict[str, Any]


def event(
    id: str,
    wallet: str,
    block: int,
    *,
    compliant: bool,
    type: str = "agent.compliance_changed",
    agent_id: int = 3,
    finality: str = "provisional",
) -> Event:
    """One of the feed's events, as the API writes it."""
    status = "Active" if compliant else "Suspended"
    detail: Dict[str, Any] = {"from": not compliant, "to": compliant}
    if type == "agent.status_changed":
        detail = {"from": "Suspended" if compliant else "Active", "to": status}
    return {
        "id": id,
        "finality": finality,
        "type": type,
        "agentId": agent_id,
        "wallet": wallet,
        "block": {"number": block, "hash": "0x" + "ab" * 32, "time": "2023-11-14T22:13:20.000Z"},
        "log": {"transactionHash": "0x" + "01" * 32, "logIndex": 2},
        "standing": {"isRegistered": True, "isCompliant": compliant, "status": status},
        **detail,
    }


class LoopbackApi:
    def __init__(
        self,
        fixture: Optional[Dict[str, Any]] = None,
        *,
        budget: Optional[int] = None,
        cut_after: Optional[int] = None,
        retry_ms: int = 3000,
        heartbeat_secs: float = 0.05,
        oldest_kept: str = "1-0",
    ) -> None:
        self.fixture = fixture
        self.budget = budget
        self.cut_after = cut_after
        self.retry_ms = retry_ms
        self.heartbeat_secs = heartbeat_secs
        self.oldest_kept = cursor_key(oldest_kept)
        self.events: List[Event] = []
        #: Every request's path, in order (the stream's too).
        self.requests: List[str] = []
        #: Each stream connection's ``Last-Event-ID`` (``None`` without one) and when it came.
        self.resumes: List[Tuple[Optional[str], float]] = []
        #: Answers given before anything else to the next requests of a path: (status, error).
        self.refusals: Dict[str, List[Tuple[int, str]]] = {}
        self._changed = threading.Condition()
        self._closing = False
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api._serve(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # Polled every 50 ms, so that closing it (which waits for the poll) is quick.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def append(self, *events: Event) -> None:
        with self._changed:
            self.events.extend(events)
            self._changed.notify_all()

    def count(self, prefix: str) -> int:
        return sum(1 for path in list(self.requests) if path.startswith(prefix))

    def close(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackApi:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        try:
            self._answer(handler)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client left (a follower stopped, a test ended)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        query = parse_qs(url.query)
        self.requests.append(url.path)
        refusals = self.refusals.get(url.path)
        if refusals:
            status, message = refusals.pop(0)
            # Retry-After 0: a follower tries again at once, so the tests need not wait its backoff.
            _json(handler, status, {"error": message}, {"Retry-After": "0"})
            return
        if url.path == "/.well-known/jwks.json" and self.fixture is not None:
            _json(handler, 200, self.fixture["jwks"], {"Cache-Control": "public, max-age=300"})
        elif url.path == f"/api/v1/kya/{self.fixture['wallet'] if self.fixture else ''}/pass":
            assert self.fixture is not None
            _send(handler, 200, self.fixture["passes"]["valid"].encode(), "application/jwt")
        elif url.path == "/api/v1/changes":
            self._page(handler, query)
        elif url.path == "/api/v1/changes/stream":
            self._stream(handler, query)
        else:
            _json(handler, 404, {"error": f"Agent not found: no resource at {url.path}"})

    def _gone(self, after: Optional[str]) -> bool:
        return after is not None and cursor_key(after) < self.oldest_kept

    def _page(self, handler: BaseHTTPRequestHandler, query: Dict[str, List[str]]) -> None:
        after = query.get("after", [None])[0]
        if self._gone(after):
            _json(handler, 410, {"error": f"the cursor {after} is older than the feed keeps"})
            return
        limit = int(query.get("limit", ["100"])[0])
        types = query.get("type")
        with self._changed:
            later = [event for event in self.events if after is None or cursor_key(event["id"]) > cursor_key(after)]
        events: List[Event] = []
        looked = 0
        for looked, candidate in enumerate(later, start=1):
            if types is None or candidate["type"] in types:
                events.append(candidate)
            if len(events) == limit:
                break
        next_id = later[looked - 1]["id"] if looked else after
        _json(handler, 200, {"events": events, "next": next_id, "more": looked < len(later)})

    def _stream(self, handler: BaseHTTPRequestHandler, query: Dict[str, List[str]]) -> None:
        last = handler.headers.get("Last-Event-ID")
        self.resumes.append((last, time.monotonic()))
        types = query.get("type")
        with self._changed:
            position = last if last is not None else (self.events[-1]["id"] if self.events else None)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-store")
        handler.end_headers()
        write = handler.wfile.write
        write(f"retry: {self.retry_ms}\n: after {position}\n\n".encode())
        handler.wfile.flush()
        offered = sent = 0
        quiet_since = time.monotonic()
        while True:
            with self._changed:
                pending = [e for e in self.events if position is None or cursor_key(e["id"]) > cursor_key(position)]
                if not pending:
                    self._changed.wait(0.05)
                    if self._closing:
                        return
            if not pending:
                if time.monotonic() - quiet_since >= self.heartbeat_secs:
                    write(b": keep-alive\n\n")
                    handler.wfile.flush()
                    quiet_since = time.monotonic()
                continue
            candidate = pending[0]
            position = candidate["id"]
            offered += 1
            if types is None or candidate["type"] in types:
                data = json.dumps(candidate, separators=(",", ":"))
                write(f"id: {position}\nevent: {candidate['type']}\ndata: {data}\n\n".encode())
                sent += 1
            handler.wfile.flush()
            if self.cut_after is not None and sent == self.cut_after:
                return  # cut: no end frame
            if self.budget is not None and offered == self.budget:
                write(f": end budget last-event-id={position}\nid: {position}\n\n".encode())
                handler.wfile.flush()
                return


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str,
          headers: Optional[Dict[str, str]] = None) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def _json(handler: BaseHTTPRequestHandler, status: int, document: Any,
          headers: Optional[Dict[str, str]] = None) -> None:
    _send(handler, status, json.dumps(document).encode(), "application/json", headers)
