"""An ``httpx.Auth`` that signs every request (ERC-8128) and sends the agent's ``KYA-Pass``,
for ``httpx.Client`` and ``httpx.AsyncClient`` alike."""

from __future__ import annotations

from typing import AsyncGenerator, Generator, Optional

import httpx

from kya._core import PASS_HEADER
from kya.passes import PassSource
from kya.signer import RequestSigner


class KyaAuth(httpx.Auth):
    """``httpx.Client(auth=KyaAuth(signer, passes))``: each request gets its pass (fetched once
    and renewed before it expires, one fetch shared by concurrent requests) and its signature,
    which covers the body (``Content-Digest``)."""

    requires_request_body = True

    def __init__(self, signer: RequestSigner, passes: Optional[PassSource] = None) -> None:
        self.signer = signer
        self.passes = passes

    def _sign(self, request: httpx.Request) -> None:
        signed = self.signer.headers(request.method, str(request.url), request.headers, request.content)
        request.headers.update(signed)

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self.passes is not None:
            request.headers[PASS_HEADER] = self.passes.get()
        self._sign(request)
        yield request

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if self.passes is not None:
            request.headers[PASS_HEADER] = await self.passes.aget()
        self._sign(request)
        yield request
