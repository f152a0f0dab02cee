"""The typed client of the read API (kya.client), against httpx's MockTransport playing the API:
each call's method, path, query and body, the answers as SPEC.md names their fields, and the
API's errors as ApiError with their status and message."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List, Tuple

import httpx

import kya
from kya.api_types import AgentDetails, AgentRecord, ChangeEvent, Compliance, KyaAgent, KyaBatch, KyaResult
from loopback_api import event

API = "https://kya.example"
WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
OTHER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"

# SPEC.md section 2, as written there.
SPEC_AGENT = ["agentId", "creator", "haftungsperson", "agentWallet", "constitutionHash", "capabilityHash",
              "operationalScope", "parentAgentId", "generation", "selfModifying", "registeredAt",
              "lastAttestation", "lastRevenueReport", "status"]
SPEC_COMPLIANCE = ["isActive", "attestationCurrent", "secondsSinceAttestation", "childCount", "status"]
SPEC_KYA = ["wallet", "isRegistered", "isCompliant", "agent", "checkedAt"]
SPEC_KYA_AGENT = ["agentId", "creator", "haftungsperson", "agentWallet", "operationalScope", "status",
                  "registeredAt", "lastAttestation"]

KYA_AGENT = {"agentId": 7, "creator": OTHER, "haftungsperson": OTHER, "agentWallet": WALLET,
             "operationalScope": "inference", "status": "Active", "registeredAt": "2026-01-01T00:00:00.000Z",
             "lastAttestation": "2026-01-02T00:00:00.000Z"}
KYA = {"wallet": WALLET, "isRegistered": True, "isCompliant": True, "agent": KYA_AGENT,
       "checkedAt": "2026-01-03T00:00:00.000Z"}
UNREGISTERED = {"wallet": OTHER, "isRegistered": False, "isCompliant": False, "agent": None,
                "checkedAt": "2026-01-03T00:00:00.000Z"}
AGENT = {"agent": {"agentId": 7, "creator": OTHER, "haftungsperson": OTHER, "agentWallet": WALLET,
                   "constitutionHash": "0x" + "ab" * 32, "capabilityHash": "0x" + "00" * 32,
                   "operationalScope": "inference", "parentAgentId": 0, "generation": 0, "selfModifying": False,
                   "registeredAt": "2026-01-01T00:00:00.000Z", "lastAttestation": "2026-01-02T00:00:00.000Z",
                   "lastRevenueReport": None, "status": "Active"},
         "children": [8, 9],
         "compliance": {"isActive": True, "attestationCurrent": True, "secondsSinceAttestation": 86400,
                        "childCount": 2, "status": "Active"}}
PAGE = {"events": [event("41-3", WALLET, 120, compliant=False, type="agent.status_changed")], "next": "41-9",
        "more": True}


class Api:
    """The API's answers, and the requests it received."""

    def __init__(self) -> None:
        self.seen: List[Tuple[str, str, List[Tuple[str, str]], Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.seen.append((request.method, request.url.raw_path.decode().split("?")[0],
                          request.url.params.multi_items(), body))
        path = request.url.path
        if path == f"/api/v1/kya/{WALLET}":
            return httpx.Response(200, json=KYA)
        if path == "/api/v1/kya/batch":
            return httpx.Response(200, json={"block": {"number": 120, "timestamp": 1_767_225_600},
                                             "results": [KYA, UNREGISTERED]})
        if path == "/api/v1/agent/7":
            return httpx.Response(200, json=AGENT)
        if path == "/api/v1/changes":
            return httpx.Response(200, json=PAGE)
        if path == "/api/v1/agent/9":
            return httpx.Response(404, json={"error": "Agent not found: 9"})
        if path == "/api/v1/agent/10":
            return httpx.Response(429, json={"error": "Rate limit exceeded. Try again in 1 minute."},
                                  headers={"Retry-After": "60"})
        if path == "/api/v1/agent/11":
            return httpx.Response(500, text="upstream timeout")
        if path == "/api/v1/agent/12":
            return httpx.Response(502)
        if path == "/api/v1/agent/13":
            return httpx.Response(200, text="<html>")
        if path == "/api/v1/changes/stream":
            return httpx.Response(410, json={"error": "the cursor 1-0 is older than the feed keeps"})
        return httpx.Response(404, json={"error": f"Agent not found: no resource at {path}"})


def _check_answers(kya_result: KyaResult, batch: KyaBatch, details: AgentDetails, page: Any, api: Api) -> None:
    assert kya_result == KYA and kya_result["agent"] is not None and kya_result["agent"]["agentId"] == 7
    assert batch["block"] == {"number": 120, "timestamp": 1_767_225_600}
    assert [result["isCompliant"] for result in batch["results"]] == [True, False]
    assert details["children"] == [8, 9] and details["compliance"]["childCount"] == 2
    assert details["agent"]["lastRevenueReport"] is None
    changed: ChangeEvent = page["events"][0]
    assert (changed["id"], changed["from"], changed["to"], page["next"], page["more"]) == (
        "41-3", "Active", "Suspended", "41-9", True)
    assert api.seen == [
        ("GET", f"/api/v1/kya/{WALLET}", [], None),
        ("POST", "/api/v1/kya/batch", [], {"wallets": [WALLET, OTHER]}),
        ("GET", "/api/v1/agent/7", [], None),
        ("GET", "/api/v1/changes", [("after", "41-2"), ("limit", "50"), ("wallet", WALLET), ("wallet", OTHER),
                                    ("agentId", "7"), ("type", "agent.status_changed"), ("final", "true")], None),
    ]


def test_read_client_asks_each_endpoint_and_types_its_answer_as_spec_names_it() -> None:
    assert KyaResult.__required_keys__ == set(SPEC_KYA)
    assert KyaAgent.__required_keys__ == set(SPEC_KYA_AGENT)
    assert AgentRecord.__required_keys__ == set(SPEC_AGENT)
    assert Compliance.__required_keys__ == set(SPEC_COMPLIANCE)
    api = Api()
    with kya.ReadClient(API + "/", http=httpx.Client(transport=httpx.MockTransport(api))) as client:
        _check_answers(client.kya(WALLET), client.kya_batch([WALLET, OTHER]), client.agent(7),
                       client.changes(after="41-2", limit=50, wallet=[WALLET, OTHER], agent_id=7,
                                      type="agent.status_changed", final=True), api)
        # A wallet is one segment of the path, whatever it holds.
        try:
            client.kya("../agent/7")
        except kya.ApiError as error:
            assert error.status == 404
        assert api.seen[-1][1] == "/api/v1/kya/..%2Fagent%2F7"
        try:
            client.kya_batch(WALLET)
        except TypeError as error:
            assert "list of addresses" in str(error)
        else:
            raise AssertionError("one address taken for a list")


def test_async_read_client_asks_the_same_and_reads_the_same() -> None:
    api = Api()

    async def read() -> None:
        async with kya.AsyncReadClient(API, http=httpx.AsyncClient(transport=httpx.MockTransport(api))) as client:
            results = await asyncio.gather(client.kya(WALLET), client.kya_batch([WALLET, OTHER]), client.agent(7))
            page = await client.changes(after="41-2", limit=50, wallet=[WALLET, OTHER], agent_id=[7],
                                        type=["agent.status_changed"], final=True)
            _check_answers(results[0], results[1], results[2], page, api)
            try:
                async with client.stream_changes(last_event_id="1-0"):
                    raise AssertionError("a refused stream opened")
            except kya.ApiError as error:
                assert (error.status, error.message) == (410, "the cursor 1-0 is older than the feed keeps")

    asyncio.run(read())


def test_api_errors_carry_the_status_and_the_apis_message() -> None:
    api = Api()
    client = kya.ReadClient(API, http=httpx.Client(transport=httpx.MockTransport(api)))
    expected: Dict[int, Tuple[int, str, Any]] = {
        9: (404, "Agent not found: 9", None),
        10: (429, "Rate limit exceeded. Try again in 1 minute.", 60.0),
        11: (500, "upstream timeout", None),
        12: (502, "an empty body", None),
    }
    for agent_id, (status, message, retry_after) in expected.items():
        try:
            client.agent(agent_id)
        except kya.ApiError as error:
            assert (error.status, error.message, error.retry_after) == (status, message, retry_after)
            assert str(error) == f"the KYA API answered HTTP {status}: {message}"
            assert isinstance(error, kya.KyaError)
        else:
            raise AssertionError(f"agent {agent_id} answered")
    try:
        client.agent(13)
    except kya.ApiError as error:
        assert error.status == 200 and error.message.startswith("an answer that is not JSON")
    else:
        raise AssertionError("HTML read as an agent")
    try:
        with client.stream_changes(last_event_id="1-0", type="agent.compliance_changed"):
            raise AssertionError("a refused stream opened")
    except kya.ApiError as error:
        assert error.status == 410
    assert api.seen[-1][1:3] == ("/api/v1/changes/stream", [("type", "agent.compliance_changed")])
