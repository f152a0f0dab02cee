"""ASGI middleware that admits every HTTP request through a provider's ``Gate`` before the app
sees it, with no framework of its own (Starlette, FastAPI, Quart, Django's ASGI handler...).

It reads the request's body (the signature covers it: ``Content-Digest``), admits the request
with ``Gate.aadmit``, and either answers the refusal itself (401 or 403, the reason as JSON:
``{"reason": ..., "message": ...}``; 503 ``{"error": ...}`` while no issuer key is trusted) or
calls the app with the admission in ``scope["kya"]`` and the body replayed to it."""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional, Union
from urllib.parse import quote

from kya.provider import Admission, Gate, IssuerKeysUnavailable

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Where the admission of a request is in its scope: ``scope["kya"]``, an ``Admission``.
SCOPE_KEY = "kya"

#: The largest body read by default: a request with a larger one is answered 413 unread.
DEFAULT_MAX_BODY_BYTES = 1 << 20


def request_url(authority: str, scope: Scope, scheme: str = "https") -> str:
    """The absolute URL of a request as the agent signed it, rebuilt from the provider's own
    ``authority``: never from the request's ``Host`` header, which its sender chooses (a
    request signed for another host would pass). The path as received (``raw_path``), else
    ``path`` encoded again."""
    raw_path = scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else quote(scope.get("path") or "/")
    query = scope.get("query_string") or b""
    return f"{scheme}://{authority}{path}" + (f"?{query.decode('latin-1')}" if query else "")


def refusal_of(admission: Admission) -> Dict[str, Optional[str]]:
    """A refused admission's JSON answer: its reason and message."""
    return {"reason": admission.reason, "message": admission.message}


class KyaMiddleware:
    """``app = KyaMiddleware(app, gate=gate)`` (Starlette and FastAPI:
    ``app.add_middleware(KyaMiddleware, gate=gate)``): every HTTP request is admitted by
    ``gate`` or answered with its refusal; other scopes (websockets, lifespan) pass through.
    ``scheme`` is the scheme agents call the provider with; ``max_body_bytes`` bounds the body
    read into memory (413 above it)."""

    def __init__(
        self,
        app: ASGIApp,
        gate: Gate,
        *,
        scheme: str = "https",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.gate = gate
        self.scheme = scheme
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive, self.max_body_bytes)
        if body is None:
            return  # the client left
        if isinstance(body, _TooLarge):
            await answer_json(send, 413, {"error": f"the body is larger than {self.max_body_bytes} bytes"})
            return
        url = request_url(self.gate.authority, scope, self.scheme)
        try:
            admission = await self.gate.aadmit(scope["method"], url, scope["headers"], body)
        except IssuerKeysUnavailable as error:
            await answer_json(send, 503, {"error": str(error)})
            return
        if not admission.admitted:
            await answer_json(send, admission.status, refusal_of(admission))
            return
        await self.app({**scope, SCOPE_KEY: admission}, _replay(body, receive), send)


class _TooLarge:
    """A body past the bound, not read further."""


async def _read_body(receive: Receive, limit: int) -> Union[bytes, _TooLarge, None]:
    """The whole body; ``None`` when the client disconnected first."""
    parts: List[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        part = message.get("body", b"")
        size += len(part)
        if size > limit:
            return _TooLarge()
        parts.append(part)
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the app the body read already, then what the server sends next
    (the disconnect)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def answer_json(send: Send, status: int, document: Dict[str, Any]) -> None:
    """Answers ``status`` with ``document`` as JSON."""
    payload = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
