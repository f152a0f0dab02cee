"""FastAPI: a dependency that admits the request through a provider's ``Gate``, for the routes
that serve agents. Importing this module imports FastAPI (``pip install 'kya[fastapi]'``); the
rest of the package does not.

    Agent = Annotated[kya.Admission, Depends(require_agent(gate))]

    @app.post("/v1/infer")
    async def infer(agent: Agent) -> dict: ...

A refusal is FastAPI's ``HTTPException``: 401 or 403 with ``{"detail": {"reason", "message"}}``,
503 with ``{"detail": {"error"}}`` while no issuer key is trusted. Behind ``KyaMiddleware`` the
dependency gives the middleware's admission, and admits nothing twice."""

from __future__ import annotations

from typing import Awaitable, Callable

from fastapi import HTTPException, Request

from kya.asgi import SCOPE_KEY, refusal_of, request_url
from kya.provider import Admission, Gate, IssuerKeysUnavailable


def require_agent(gate: Gate, *, scheme: str = "https") -> Callable[[Request], Awaitable[Admission]]:
    """The dependency admitting a route's requests through ``gate``; ``scheme`` is the one
    agents call the provider with."""

    async def admitted_agent(request: Request) -> Admission:
        held = request.scope.get(SCOPE_KEY)
        if isinstance(held, Admission):
            return held
        # FastAPI read the body already for a route that takes one: this is its copy.
        body = await request.body()
        url = request_url(gate.authority, request.scope, scheme)
        try:
            admission = await gate.aadmit(request.method, url, request.scope["headers"], body)
        except IssuerKeysUnavailable as error:
            raise HTTPException(503, detail={"error": str(error)}) from error
        if not admission.admitted:
            raise HTTPException(admission.status, detail=refusal_of(admission))
        # The nonce is spent: a second use of the dependency in this request must not admit again.
        request.scope[SCOPE_KEY] = admission
        return admission

    return admitted_agent
