"""The agent's auths (httpx sync and async, requests) and the provider's Gate, end to end in one
process: httpx's MockTransport plays the API (the pass, the JWKS: each fetch counted) and the
provider (the Gate admitting what it receives)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Dict, List, Optional, Tuple

import httpx
import requests

import kya
from kya.httpx_auth import KyaAuth
from kya.requests_auth import KyaRequestsAuth

API = "https://kya.example"
PROVIDER = "https://api.provider.example"


class World:
    """The API and a provider, counting what the API serves."""

    def __init__(self, fixture: Dict[str, Any], passes: Optional[List[str]] = None) -> None:
        self.fixture = fixture
        self.passes = passes or [fixture["passes"]["valid"]]
        self.pass_fetches = 0
        self.jwks_fetches = 0
        self.now = float(fixture["now"])
        self.lock = threading.Lock()
        self.gate = kya.Gate(api_url=API, issuer=fixture["issuer"], authority="api.provider.example",
                             chain_id=fixture["chainId"], registry=fixture["registry"],
                             fetch_jwks=self.fetch_jwks, clock=lambda: self.now)
        self.admissions: List[kya.Admission] = []

    def fetch_pass(self, url: str) -> bytes:
        assert url == f"{API}/api/v1/kya/{self.fixture['wallet']}/pass"
        with self.lock:
            self.pass_fetches += 1
            return self.passes[min(self.pass_fetches, len(self.passes)) - 1].encode()

    async def afetch_pass(self, url: str) -> bytes:
        await asyncio.sleep(0.01)
        return self.fetch_pass(url)

    def fetch_jwks(self, url: str) -> Tuple[bytes, Optional[str]]:
        assert url == f"{API}/.well-known/jwks.json"
        self.jwks_fetches += 1
        return json.dumps(self.fixture["jwks"]).encode(), "public, max-age=300"

    def provider(self, request: httpx.Request) -> httpx.Response:
        admission = self.gate.admit(request.method, str(request.url), request.headers.multi_items(),
                                    request.content)
        self.admissions.append(admission)
        if not admission.admitted:
            return httpx.Response(admission.status, json={"reason": admission.reason})
        return httpx.Response(200, json={"hello": admission.signer})


def _signer(fixture: Dict[str, Any]) -> kya.RequestSigner:
    return kya.RequestSigner(chain_id=fixture["chainId"], private_key=fixture["walletKey"],
                             components=["content-type"])


def test_httpx_agent_is_admitted_with_one_pass_and_one_jwks_fetch(fixture: Dict[str, Any]) -> None:
    world = World(fixture)
    passes = kya.PassSource(API, fixture["wallet"], fetch=world.fetch_pass, clock=lambda: world.now)
    client = httpx.Client(transport=httpx.MockTransport(world.provider), auth=KyaAuth(_signer(fixture), passes))
    for i in range(5):
        response = client.post(f"{PROVIDER}/v1/infer?n={i}", json={"prompt": "hi"})
        assert response.status_code == 200, response.text
        assert response.json() == {"hello": fixture["wallet"]}
    assert (world.pass_fetches, world.jwks_fetches) == (1, 1)
    # The same signed request again: its nonce is spent.
    request = client.build_request("POST", f"{PROVIDER}/v1/infer", json={"prompt": "again"})
    signed = next(KyaAuth(_signer(fixture), passes).sync_auth_flow(request))
    first = world.provider(signed)
    second = world.provider(signed)
    assert first.status_code == 200 and (second.status_code, second.json()) == (401, {"reason": "replayed"})


def test_the_pass_is_renewed_before_it_expires(fixture: Dict[str, Any]) -> None:
    world = World(fixture)
    passes = kya.PassSource(API, fixture["wallet"], fetch=world.fetch_pass, clock=lambda: world.now)
    assert passes.get() == fixture["passes"]["valid"]
    world.now += 239  # exp is now + 300: renewed 60 s before it
    passes.get()
    assert world.pass_fetches == 1
    world.now += 1
    passes.get()
    assert world.pass_fetches == 2


def test_async_requests_at_once_share_one_pass_fetch(fixture: Dict[str, Any]) -> None:
    world = World(fixture)
    passes = kya.PassSource(API, fixture["wallet"], async_fetch=world.afetch_pass, clock=lambda: world.now)

    async def run() -> List[int]:
        auth = KyaAuth(_signer(fixture), passes)
        async with httpx.AsyncClient(transport=httpx.MockTransport(world.provider), auth=auth) as client:
            responses = await asyncio.gather(
                *(client.post(f"{PROVIDER}/v1/infer", json={"i": i}) for i in range(20)))
            return [response.status_code for response in responses]

    assert asyncio.run(run()) == [200] * 20
    assert (world.pass_fetches, world.jwks_fetches) == (1, 1)


def test_requests_auth_signs_and_carries_the_pass(fixture: Dict[str, Any]) -> None:
    world = World(fixture)
    passes = kya.PassSource(API, fixture["wallet"], fetch=world.fetch_pass, clock=lambda: world.now)
    prepared = requests.Request("POST", f"{PROVIDER}/v1/infer?model=small", json={"prompt": "hi"},
                                auth=KyaRequestsAuth(_signer(fixture), passes)).prepare()
    assert prepared.headers[kya.PASS_HEADER] == fixture["passes"]["valid"]
    admission = world.gate.admit(prepared.method or "", prepared.url or "", dict(prepared.headers), prepared.body)
    assert admission.admitted, admission
    assert admission.verdict["signature"]["components"] == [
        "@method", "@authority", "@path", "@query", "content-digest", "content-type"]


def test_gate_answers_each_refusal_with_its_status(fixture: Dict[str, Any]) -> None:
    world = World(fixture)
    signer = kya.RequestSigner(chain_id=fixture["chainId"], private_key=fixture["walletKey"])
    stranger = kya.RequestSigner(chain_id=fixture["chainId"], private_key=fixture["strangerKey"])

    def admit(by: kya.RequestSigner, pass_: Optional[str], authority: str = "api.provider.example") -> Any:
        url = f"https://{authority}/v1/infer"
        headers = by.headers("GET", url)
        if pass_ is not None:
            headers[kya.PASS_HEADER] = pass_
        return world.gate.admit("GET", url, headers)

    valid = fixture["passes"]["valid"]
    assert admit(signer, valid).status == 200
    for admission, expected in [
        (admit(signer, None), (401, "pass", "no_pass")),
        (admit(stranger, valid), (403, "pass", "not_the_signer")),
        (admit(signer, fixture["passes"]["notCompliant"]), (403, "pass", "not_compliant")),
        (admit(signer, valid, authority="api.other.example"), (401, "signature", "wrong_authority")),
    ]:
        assert (admission.status, admission.stage, admission.reason) == expected, admission
    # The feed reports a loss of compliance at the pass's block: its passes stop admitting.
    world.gate.compliance_lost(fixture["wallet"], 42)
    revoked = admit(signer, valid)
    assert (revoked.status, revoked.reason) == (403, "revoked")
    # 200 passes naming made-up keys cost at most one JWKS fetch a refetch interval (10 s).
    for _ in range(200):
        assert admit(signer, fixture["passes"]["unknownKey"]).reason == "unknown_key"
    assert world.jwks_fetches == 1, "within 10 s of the first fetch: none"
    world.now += 10
    for _ in range(200):
        assert admit(signer, fixture["passes"]["unknownKey"]).reason == "unknown_key"
    assert world.jwks_fetches == 2, "one for the unknown kids, then none"


def test_callers_that_checked_during_a_fetch_use_its_outcome(fixture: Dict[str, Any]) -> None:
    """A crowd of made-up kids that checked while one fetch ran asks for none of its own, even
    when that fetch outlasts the refetch interval (it made one more as soon as the clock allowed)."""
    world = World(fixture)
    signer = kya.RequestSigner(chain_id=fixture["chainId"], private_key=fixture["walletKey"])
    url = f"{PROVIDER}/v1/infer"
    assert world.gate.admit("GET", url, {**signer.headers("GET", url),
                                         kya.PASS_HEADER: fixture["passes"]["valid"]}).admitted
    assert world.jwks_fetches == 1
    world.now += 10  # an unknown kid may now cause a fetch

    crowd = 20
    entered = threading.Semaphore(0)
    refresh = world.gate._refresh

    def counted_refresh(reason: Any, seen: int) -> None:
        entered.release()
        refresh(reason, seen)

    def slow_fetch(url: str) -> Tuple[bytes, Optional[str]]:
        if world.jwks_fetches == 1:
            # Every caller has checked against the old keys and waits: the fetch ends 11 s on.
            for _ in range(crowd):
                assert entered.acquire(timeout=10), "a caller never asked for a fetch"
            world.now += 11
        return world.fetch_jwks(url)

    world.gate._refresh = counted_refresh  # type: ignore[method-assign]
    world.gate._fetch_jwks = slow_fetch
    reasons: List[Optional[str]] = []

    def admit() -> None:
        headers = {**signer.headers("GET", url), kya.PASS_HEADER: fixture["passes"]["unknownKey"]}
        reasons.append(world.gate.admit("GET", url, headers).reason)

    threads = [threading.Thread(target=admit) for _ in range(crowd)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert reasons == ["unknown_key"] * crowd
    assert world.jwks_fetches == 2, "one fetch for the crowd, however long it took"


def test_gate_without_reachable_keys_raises(fixture: Dict[str, Any]) -> None:
    def unreachable(url: str) -> Tuple[bytes, Optional[str]]:
        raise OSError("connection refused")

    gate = kya.Gate(api_url=API, authority="api.provider.example", chain_id=fixture["chainId"],
                    registry=fixture["registry"], fetch_jwks=unreachable)
    try:
        gate.admit("GET", f"{PROVIDER}/", {})
    except kya.IssuerKeysUnavailable as error:
        assert "jwks.json" in str(error)
    else:
        raise AssertionError("admitted without keys")
