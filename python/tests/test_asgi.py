"""A provider in asyncio: ``Gate.aadmit`` (one JWKS fetch shared by the tasks of a loop, the
KeyCache's rules kept), the ASGI middleware (kya.asgi) and the FastAPI dependency (kya.fastapi)
driven through httpx's ASGITransport by an agent's httpx auth, and the example FastAPI provider
(python/examples/fastapi_provider.py) under uvicorn with the read API on loopback: no call to
the API per request, and a suspension through the feed refused."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import pathlib
import socket
import sys
import threading
import time
from typing import Any, Dict, List, MutableMapping, Optional, Tuple

import httpx
import uvicorn
from fastapi import Depends, FastAPI

import kya
from kya.asgi import KyaMiddleware, Receive, Scope, Send
from kya.fastapi import require_agent
from kya.httpx_auth import KyaAuth
from loopback_api import LoopbackApi, event

API = "https://kya.example"
PROVIDER = "https://api.provider.example"


class Keys:
    """The issuer's JWKS as the API serves it, each fetch counted; ``delay`` slows them."""

    def __init__(self, fixture: Dict[str, Any], delay: float = 0.0) -> None:
        self.fixture = fixture
        self.delay = delay
        self.fetches = 0
        self.now = float(fixture["now"])
        #: Runs inside a fetch, after its delay (a test moves the clock there).
        self.during_fetch: Optional[Any] = None

    async def fetch(self, url: str) -> Tuple[bytes, Optional[str]]:
        assert url == f"{API}/.well-known/jwks.json"
        self.fetches += 1
        await asyncio.sleep(self.delay)
        if self.during_fetch is not None:
            self.during_fetch()
        return json.dumps(self.fixture["jwks"]).encode(), "public, max-age=300"

    def gate(self) -> kya.Gate:
        return kya.Gate(api_url=API, issuer=self.fixture["issuer"], authority="api.provider.example",
                        chain_id=self.fixture["chainId"], registry=self.fixture["registry"],
                        async_fetch_jwks=self.fetch, clock=lambda: self.now)


def _signer(fixture: Dict[str, Any], key: str = "walletKey", covering: Tuple[str, ...] = ("content-type",)
            ) -> kya.RequestSigner:
    return kya.RequestSigner(chain_id=fixture["chainId"], private_key=fixture[key], components=list(covering))


def _signed(fixture: Dict[str, Any], pass_name: Optional[str] = "valid", key: str = "walletKey",
            url: str = f"{PROVIDER}/v1/infer") -> Dict[str, Any]:
    """The arguments of ``aadmit`` for a GET signed by ``key`` carrying the pass ``pass_name``."""
    headers = _signer(fixture, key, covering=()).headers("GET", url)
    if pass_name is not None:
        headers[kya.PASS_HEADER] = fixture["passes"][pass_name]
    return {"method": "GET", "url": url, "headers": headers}


def _agent(fixture: Dict[str, Any], app: Any) -> httpx.AsyncClient:
    """An agent's client: signed requests carrying the valid pass, sent to ``app`` in process."""

    async def pass_of(url: str) -> bytes:
        return str(fixture["passes"]["valid"]).encode()

    passes = kya.PassSource(API, fixture["wallet"], async_fetch=pass_of, clock=lambda: float(fixture["now"]))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROVIDER,
                             auth=KyaAuth(_signer(fixture), passes))


def test_aadmit_shares_one_jwks_fetch_among_tasks_and_admits_as_admit_does(fixture: Dict[str, Any]) -> None:
    keys = Keys(fixture, delay=0.05)
    gate = keys.gate()

    async def run() -> List[Optional[str]]:
        admissions = await asyncio.gather(*(gate.aadmit(**_signed(fixture)) for _ in range(20)))
        assert all(admission.signer == fixture["wallet"] for admission in admissions)
        refusals = [
            await gate.aadmit(**_signed(fixture, None)),
            await gate.aadmit(**_signed(fixture, key="strangerKey")),
            await gate.aadmit(**_signed(fixture, "notCompliant")),
        ]
        return [admission.reason for admission in refusals]

    assert asyncio.run(run()) == ["no_pass", "not_the_signer", "not_compliant"]
    assert keys.fetches == 1
    assert len(gate.nonces) == 20


def test_aadmit_callers_that_checked_during_a_fetch_use_its_outcome(fixture: Dict[str, Any]) -> None:
    """The async form of test_agent_and_gate's crowd: made-up kids that checked while one fetch
    ran ask for none of their own, though that fetch outlasted the refetch interval."""
    keys = Keys(fixture)
    gate = keys.gate()

    async def run() -> List[Optional[str]]:
        assert (await gate.aadmit(**_signed(fixture))).admitted
        keys.now += 10  # an unknown kid may now cause a fetch
        keys.delay = 0.1

        def slow_fetch_ends_11_s_on() -> None:
            keys.now += 11

        keys.during_fetch = slow_fetch_ends_11_s_on
        crowd = await asyncio.gather(*(gate.aadmit(**_signed(fixture, "unknownKey")) for _ in range(20)))
        return [admission.reason for admission in crowd]

    assert asyncio.run(run()) == ["unknown_key"] * 20
    assert keys.fetches == 2, "one fetch for the crowd, however long it took"


def test_a_cancelled_jwks_fetch_leaves_the_keys_to_fetch_again(fixture: Dict[str, Any]) -> None:
    keys = Keys(fixture, delay=30)
    gate = keys.gate()

    async def run() -> Optional[str]:
        first = asyncio.ensure_future(gate.aadmit(**_signed(fixture)))
        await asyncio.sleep(0.05)
        assert gate.keys.in_flight
        first.cancel()
        try:
            await first
        except asyncio.CancelledError:
            pass
        assert not gate.keys.in_flight, "a fetch nobody waits for is over"
        assert gate.keys.attempts == 1 and gate.keys.jwks() is None
        keys.delay = 0
        keys.now += 10  # the cache's refetch interval, which the cancelled attempt started
        return (await gate.aadmit(**_signed(fixture))).signer

    assert asyncio.run(run()) == fixture["wallet"]
    assert keys.fetches == 2


class App:
    """An ASGI app that reads its body and answers who was admitted, recording each call."""

    def __init__(self) -> None:
        self.calls: List[Tuple[kya.Admission, bytes]] = []
        self.lifespans = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            self.lifespans += 1
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        admission: kya.Admission = scope["kya"]
        self.calls.append((admission, body))
        held = admission.pass_
        payload = json.dumps({"signer": admission.signer, "agentId": held["claims"]["kya"]["agentId"] if held else None,
                              "body": body.decode()}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})


def test_middleware_admits_and_hands_the_admission_and_the_body_to_the_app(fixture: Dict[str, Any]) -> None:
    keys = Keys(fixture)
    app = App()
    middleware = KyaMiddleware(app, keys.gate())

    async def run() -> List[Any]:
        async with _agent(fixture, middleware) as client:
            answers = await asyncio.gather(*(client.post(f"/v1/infer?n={n}", json={"n": n}) for n in range(5)))
        # A body in parts, straight through ASGI: the app gets it whole, once, then the disconnect.
        url = f"{PROVIDER}/v1/chunked"
        body = b'{"prompt": "in parts"}'
        headers = _signer(fixture).headers("POST", url, {"content-type": "application/json"}, body)
        parts: List[MutableMapping[str, Any]] = [
            {"type": "http.request", "body": body[:5], "more_body": True},
            {"type": "http.request", "body": body[5:], "more_body": False},
            {"type": "http.disconnect"},
        ]
        sent: List[MutableMapping[str, Any]] = []

        async def receive() -> MutableMapping[str, Any]:
            return parts.pop(0)

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
        raw += [(b"content-type", b"application/json"), (kya.PASS_HEADER.lower().encode(),
                                                         fixture["passes"]["valid"].encode())]
        await middleware({"type": "http", "method": "POST", "path": "/v1/chunked", "raw_path": b"/v1/chunked",
                          "query_string": b"", "headers": raw}, receive, send)
        await middleware({"type": "lifespan"}, receive, send)
        return [[(answer.status_code, answer.json()) for answer in answers], sent[0]["status"]]

    answers, chunked_status = asyncio.run(run())
    for n, (status, document) in enumerate(answers):
        assert (status, document["signer"], document["agentId"]) == (200, fixture["wallet"], 3)
        assert json.loads(document["body"]) == {"n": n}, "the body the agent signed, replayed to the app"
    assert chunked_status == 200 and app.calls[-1][1] == b'{"prompt": "in parts"}'
    assert app.lifespans == 1, "other scopes pass through"
    assert keys.fetches == 1


def test_middleware_answers_each_refusal_with_its_status_and_reason(fixture: Dict[str, Any]) -> None:
    keys = Keys(fixture)
    gate = keys.gate()
    app = App()

    async def send_to(middleware: Any, method: str, url: str, headers: Dict[str, str],
                      body: bytes = b"") -> Tuple[int, Any]:
        transport = httpx.ASGITransport(app=middleware)
        async with httpx.AsyncClient(transport=transport) as client:
            answer = await client.request(method, url, headers=headers, content=body)
            return answer.status_code, answer.json()

    async def run() -> List[Tuple[int, Any]]:
        middleware = KyaMiddleware(app, gate)
        replayed = _signed(fixture)
        answers = [
            await send_to(middleware, **_signed(fixture, None)),
            await send_to(middleware, **_signed(fixture, key="strangerKey")),
            await send_to(middleware, **_signed(fixture, "expired")),
            await send_to(middleware, **replayed),
            await send_to(middleware, **replayed),
        ]
        gate.compliance_lost(fixture["wallet"], 42)
        answers.append(await send_to(middleware, **_signed(fixture)))
        small = KyaMiddleware(app, gate, max_body_bytes=8)
        answers.append(await send_to(small, "POST", f"{PROVIDER}/v1/infer", {}, b"0123456789"))

        async def unreachable(url: str) -> Tuple[bytes, Optional[str]]:
            raise OSError("connection refused")

        keyless = kya.Gate(api_url=API, authority="api.provider.example", chain_id=fixture["chainId"],
                           registry=fixture["registry"], async_fetch_jwks=unreachable)
        answers.append(await send_to(KyaMiddleware(app, keyless), **_signed(fixture)))
        return answers

    answers = asyncio.run(run())
    summary = [(status, body.get("reason")) for status, body in answers]
    assert summary == [
        (401, "no_pass"),
        (403, "not_the_signer"),
        (403, "expired"),
        (200, None),
        (401, "replayed"),
        (403, "revoked"),
        (413, None),
        (503, None),
    ]
    assert set(answers[0][1]) == {"reason", "message"} and "KYA-Pass" in answers[0][1]["message"]
    assert answers[6][1] == {"error": "the body is larger than 8 bytes"}
    assert "jwks.json" in answers[7][1]["error"]
    assert len(app.calls) == 1, "the app saw the one admitted request only"


def _fastapi_provider(gate: kya.Gate) -> FastAPI:
    app = FastAPI()
    admitted_agent = require_agent(gate)

    @app.post("/v1/infer")
    async def infer(payload: Dict[str, Any], agent: kya.Admission = Depends(admitted_agent)) -> Dict[str, Any]:
        return {"hello": agent.signer, "payload": payload}

    @app.get("/open")
    async def open_route() -> Dict[str, str]:
        return {"open": "yes"}

    return app


def test_fastapi_dependency_admits_a_route_and_answers_refusals(fixture: Dict[str, Any]) -> None:
    gate = Keys(fixture).gate()
    app = _fastapi_provider(gate)

    async def run() -> List[Tuple[int, Any]]:
        answers: List[Tuple[int, Any]] = []
        async with _agent(fixture, app) as client:
            for _ in range(2):
                answer = await client.post("/v1/infer", json={"prompt": "hi"})
                answers.append((answer.status_code, answer.json()))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROVIDER) as unsigned:
            answer = await unsigned.post("/v1/infer", json={"prompt": "hi"})
            answers.append((answer.status_code, answer.json()))
            answer = await unsigned.get("/open")
            answers.append((answer.status_code, answer.json()))
        gate.compliance_lost(fixture["wallet"], 42)
        async with _agent(fixture, app) as client:
            answer = await client.post("/v1/infer", json={"prompt": "hi"})
            answers.append((answer.status_code, answer.json()))
        return answers

    answers = asyncio.run(run())
    hello = {"hello": fixture["wallet"], "payload": {"prompt": "hi"}}
    assert answers[:2] == [(200, hello)] * 2
    assert answers[2][0] == 401 and answers[2][1]["detail"]["reason"] in kya.SIGNATURE_REASONS
    assert set(answers[2][1]["detail"]) == {"reason", "message"}
    assert answers[3] == (200, {"open": "yes"}), "a route without the dependency is open"
    assert answers[4][0] == 403 and answers[4][1]["detail"]["reason"] == "revoked"


def test_fastapi_dependency_behind_the_middleware_takes_its_admission(fixture: Dict[str, Any]) -> None:
    gate = Keys(fixture).gate()
    app = _fastapi_provider(gate)
    app.add_middleware(KyaMiddleware, gate=gate)

    async def run() -> List[Tuple[int, Any]]:
        async with _agent(fixture, app) as client:
            answers = [await client.post("/v1/infer", json={"prompt": "hi"}) for _ in range(3)]
            return [(answer.status_code, answer.json()) for answer in answers]

    assert asyncio.run(run()) == [(200, {"hello": fixture["wallet"], "payload": {"prompt": "hi"}})] * 3
    assert len(gate.nonces) == 3, "each request admitted once: a second admission would be a replay"


def _example_module(path: pathlib.Path) -> Any:
    spec = importlib.util.spec_from_file_location("fastapi_provider_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_example_fastapi_provider_admits_with_no_api_call_per_request_and_follows_the_feed(
    fixture: Dict[str, Any], monkeypatch: Any
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    with LoopbackApi(fixture) as api:
        api.append(event("1-0", fixture["wallet"], 30, compliant=True))
        for name, value in {"KYA_API_URL": api.url, "KYA_ISSUER": fixture["issuer"], "CHAIN_ID": str(fixture["chainId"]),
                            "REGISTRY": fixture["registry"], "PROVIDER_AUTHORITY": f"127.0.0.1:{port}"}.items():
            monkeypatch.setenv(name, value)
        example = _example_module(pathlib.Path(__file__).parents[1] / "examples" / "fastapi_provider.py")
        server = uvicorn.Server(uvicorn.Config(example.app, log_level="warning"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
        thread.start()
        try:
            assert example.REVOCATIONS.caught_up.wait(10), "the provider follows the feed"
            passes = kya.PassSource(api.url, fixture["wallet"])
            agent = httpx.Client(auth=KyaAuth(_signer(fixture), passes), base_url=f"http://127.0.0.1:{port}")
            first = agent.post("/v1/infer", json={"prompt": "hi"})
            assert (first.status_code, first.json()) == (
                200, {"hello": fixture["wallet"], "agentId": 3, "prompt": {"prompt": "hi"}})
            before = list(api.requests)
            for n in range(10):
                answer = agent.post("/v1/infer", json={"n": n})
                assert answer.status_code == 200, answer.text
            assert api.requests == before, "no call to the API for these ten requests"
            assert (api.count("/.well-known/jwks.json"), api.count(f"/api/v1/kya/{fixture['wallet']}/pass")) == (1, 1)

            # A suspension at the pass's block, through the feed: refused from then on.
            suspended_at = time.monotonic()
            api.append(event("1-1", fixture["wallet"], 42, compliant=False, type="agent.status_changed"),
                       event("1-2", fixture["wallet"], 42, compliant=False))
            while True:
                answer = agent.post("/v1/infer", json={"prompt": "again"})
                if answer.status_code != 200 or time.monotonic() - suspended_at > 5:
                    break
                time.sleep(0.02)
            assert answer.status_code == 403, answer.text
            assert answer.json()["detail"]["reason"] == "revoked"
            agent.close()
        finally:
            server.should_exit = True
            thread.join(10)
            sys.modules.pop("fastapi_provider_example", None)
    assert not thread.is_alive()
    assert example.REVOCATIONS.error is None and example.REVOCATIONS.position == "1-2"
