"""A ``requests`` auth that signs every request (ERC-8128) and sends the agent's ``KYA-Pass``."""

from __future__ import annotations

from typing import Optional

import requests

from kya._core import PASS_HEADER, SignError
from kya.passes import PassSource
from kya.signer import RequestSigner


class KyaRequestsAuth(requests.auth.AuthBase):
    """``requests.post(url, json=..., auth=KyaRequestsAuth(signer, passes))``. A streamed body
    (a generator, a file) cannot be signed: its digest needs all of it first."""

    def __init__(self, signer: RequestSigner, passes: Optional[PassSource] = None) -> None:
        self.signer = signer
        self.passes = passes

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        body = request.body
        if body is not None and not isinstance(body, (bytes, str)):
            raise SignError("a streamed body cannot be signed: pass bytes or str")
        if self.passes is not None:
            request.headers[PASS_HEADER] = self.passes.get()
        request.headers.update(self.signer.headers(request.method or "GET", request.url or "", request.headers, body))
        return request
