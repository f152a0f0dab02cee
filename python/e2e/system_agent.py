"""A Python agent against the whole system, driven by tests/it/edge_api/python_system.rs: the real
relayer, the Worker under ``wrangler dev`` with its index, and the example FastAPI provider
(python/examples/fastapi_provider.py) under uvicorn. Outside python/tests: the unit suite needs
no chain.

The test writes one JSON command a line on stdin and reads one JSON answer a line on stdout, so
it can act between the agent's steps (read the Worker's log, suspend the agent on chain). The keys
come in the environment (``KYA_AGENT_KEY``, ``KYA_HAFTUNGSPERSON_KEY``) and are never printed: an
answer carries addresses, statuses and bodies only.

Commands (``{"do": ...}``):

- ``register``: the agent (no ETH) registers itself through the relayer with its Haftungsperson's
  consent (an ``Account`` signing here); answers the relay, the agent id and the consents used.
- ``infer`` (``times``): that many signed requests to the provider, each with the pass
  (``PassSource``, fetched once) through ``KyaAuth``; answers each status and body, and how often
  the pass was fetched.
- ``until_refused``: requests as above until one is refused (60 s at most), then the chain's head
  read at once; answers the refusal, the head and how many requests were admitted before it.
- ``sign``: a request signed here with the pass, as the provider receives it, for the test to
  verify elsewhere (the Worker's ``POST /api/v1/kya/verify``, the npm verifier).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from typing import Any, Callable, Dict, Optional

import httpx

import kya
from kya.httpx_auth import KyaAuth
from kya.relayer import Account, RelayerClient, Registration

CONSTITUTION = "Answer what is asked; cite sources."
SCOPE = "answers questions for the system test"


class Agent:
    def __init__(self) -> None:
        env = os.environ
        self.api_url = env["KYA_API_URL"]
        self.rpc_url = env["KYA_RPC_URL"]
        self.relayer_url = env["KYA_RELAYER_URL"]
        self.provider_url = env["KYA_PROVIDER_URL"]
        self.chain_id = int(env["CHAIN_ID"])
        self.account = Account(env["KYA_AGENT_KEY"])
        self.person = Account(env["KYA_HAFTUNGSPERSON_KEY"])
        self.signer = kya.RequestSigner(private_key=env["KYA_AGENT_KEY"], chain_id=self.chain_id)
        self.passes = kya.PassSource(self.api_url, self.signer.address)
        self.http = httpx.Client(auth=KyaAuth(self.signer, self.passes), base_url=self.provider_url, timeout=30)

    def register(self, _: Dict[str, Any]) -> Dict[str, Any]:
        registration = Registration.of(constitution=CONSTITUTION, capabilities=["answer", "cite"],
                                       operational_scope=SCOPE, haftungsperson=self.person.address)
        with RelayerClient(self.relayer_url, rpc_url=self.rpc_url) as client:
            outcome = client.register(registration, account=self.account, liability_consent=self.person)
        used = [[event["signer"], event["nonce"]] for event in outcome.events if event["event"] == "ConsentUsed"]
        return {"agent": self.signer.address, "haftungsperson": self.person.address, "status": outcome.status,
                "relayId": outcome.relay_id, "agentId": outcome.agent_id, "consentsUsed": used}

    def _infer(self, n: int) -> httpx.Response:
        return self.http.post("/v1/infer", json={"n": n})

    def infer(self, command: Dict[str, Any]) -> Dict[str, Any]:
        answers = [self._infer(n) for n in range(int(command["times"]))]
        return {"answers": [[answer.status_code, answer.json()] for answer in answers],
                "passFetches": self.passes.fetches}

    def until_refused(self, _: Dict[str, Any]) -> Dict[str, Any]:
        deadline = time.monotonic() + 60
        admitted = 0
        while True:
            answer = self._infer(admitted)
            if answer.status_code != 200 or time.monotonic() > deadline:
                break
            admitted += 1
            time.sleep(0.05)
        head = httpx.post(self.rpc_url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []})
        return {"status": answer.status_code, "body": answer.json(), "head": int(head.json()["result"], 16),
                "admitted": admitted, "passFetches": self.passes.fetches}

    def sign(self, _: Dict[str, Any]) -> Dict[str, Any]:
        url = f"{self.provider_url}/v1/infer?model=small"
        body = json.dumps({"prompt": "hello"}).encode()
        headers = {"content-type": "application/json", kya.PASS_HEADER: self.passes.get()}
        headers.update(self.signer.headers("POST", url, headers, body))
        return {"method": "POST", "url": url, "headers": headers, "body": base64.b64encode(body).decode()}


def main() -> None:
    agent = Agent()
    commands: Dict[str, Callable[[Dict[str, Any]], Dict[str, Any]]] = {
        "register": agent.register, "infer": agent.infer, "until_refused": agent.until_refused, "sign": agent.sign,
    }
    for line in sys.stdin:
        command = json.loads(line)
        answer: Optional[Dict[str, Any]]
        try:
            answer = commands[command["do"]](command)
        except Exception as error:  # the test reads it as a failure, with its type and message
            answer = {"error": f"{type(error).__name__}: {error}"}
        print(json.dumps(answer), flush=True)
    agent.http.close()


if __name__ == "__main__":
    main()
