"""A FastAPI provider admitting agents offline: each request's ERC-8128 signature and KYA pass
are checked by the Gate with the issuer's keys (fetched once, kept as their Cache-Control allows)
and the change feed is followed for revocations, so serving a request calls the API not at all.

    KYA_API_URL=https://kya.example REGISTRY=0x... python fastapi_provider.py 8080

``KYA_ISSUER`` is the passes' ``iss`` when it is not the API's URL; ``PROVIDER_AUTHORITY`` the
``host[:port]`` agents call (and sign).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Annotated, Any, AsyncIterator, Dict, Optional

import uvicorn
from fastapi import Depends, FastAPI

import kya
from kya.fastapi import require_agent
from kya.feed import RevocationFollower

GATE = kya.Gate(
    api_url=os.environ.get("KYA_API_URL", "https://kya.example"),
    issuer=os.environ.get("KYA_ISSUER") or None,
    authority=os.environ.get("PROVIDER_AUTHORITY", "api.provider.example"),
    chain_id=int(os.environ.get("CHAIN_ID", "84532")),
    registry=os.environ.get("REGISTRY", "0x0000000000000000000000000000000000000000"),
)
#: Tells the gate of every agent that loses compliance, as the feed reports it.
REVOCATIONS = RevocationFollower(GATE)


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    following = REVOCATIONS.start_task()
    yield
    REVOCATIONS.stop()
    with contextlib.suppress(asyncio.CancelledError):
        await following


app = FastAPI(lifespan=lifespan)

#: A route's admitted agent: its signer and its pass (a refusal answers 401 or 403 first).
Agent = Annotated[kya.Admission, Depends(require_agent(GATE))]


@app.post("/v1/infer")
async def infer(prompt: Dict[str, Any], agent: Agent) -> Dict[str, Optional[object]]:
    held = agent.pass_
    return {"hello": agent.signer, "agentId": held["claims"]["kya"]["agentId"] if held else None, "prompt": prompt}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]))
