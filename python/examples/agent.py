"""An agent calling a provider with httpx: each request signed (ERC-8128) and carrying the
agent's KYA pass, fetched from the API and renewed before it expires.

    AGENT_PRIVATE_KEY=0x... KYA_API_URL=https://kya.example python agent.py https://api.provider.example/v1/infer
"""

from __future__ import annotations

import asyncio
import os
import sys

import httpx

import kya
from kya.httpx_auth import KyaAuth

CHAIN_ID = 84532  # Base Sepolia: where the agent is registered


def auth() -> KyaAuth:
    signer = kya.RequestSigner(chain_id=CHAIN_ID, private_key=os.environ["AGENT_PRIVATE_KEY"],
                               components=["content-type"])
    passes = kya.PassSource(os.environ.get("KYA_API_URL", "https://kya.example"), signer.address)
    return KyaAuth(signer, passes)


def call(url: str) -> str:
    with httpx.Client(auth=auth()) as client:
        response = client.post(url, json={"prompt": "hello"})
        response.raise_for_status()
        return response.text


async def call_many(url: str, count: int) -> list[int]:
    """``count`` requests at once: one pass fetch for all of them."""
    async with httpx.AsyncClient(auth=auth()) as client:
        responses = await asyncio.gather(*(client.post(url, json={"n": n}) for n in range(count)))
        return [response.status_code for response in responses]


if __name__ == "__main__":
    print(call(sys.argv[1]))
