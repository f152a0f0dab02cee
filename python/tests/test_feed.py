"""The change feed followed (kya.feed, kya.sse): the stream's messages parsed wherever the bytes
are cut; kya-core's reading of an event (what revokes, ids in order); the followers against the
read API on loopback (tests/loopback_api.py), which ends stream connections with the feed's
planned end, cuts them, and records each connection's Last-Event-ID; and a provider's Gate
refusing a pass once the feed reports its wallet's loss of compliance."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import kya
from kya.feed import RevocationFollower
from kya.sse import Message, MessageReader
from loopback_api import LoopbackApi, event

WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def _until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_sse_messages_are_read_whole_wherever_the_bytes_are_cut() -> None:
    stream = (
        "retry: 3000\n: after 41-2\n\n"
        'id: 41-3\nevent: agent.status_changed\ndata: {"scope":"é"}\n\n'
        ": keep-alive\n\n"
        "data: one\ndata:two\n\n"
        "id: not\0one\ndata: x\nretry: soon\n\n"
        ": end budget last-event-id=41-7\nid: 41-7\n\n"
        "id: 41-8\ndata: cut before its blank line\n"
    )
    expected = [
        Message(None, "message", None, 3000),
        Message("41-3", "agent.status_changed", '{"scope":"é"}', None),
        Message(None, "message", "one\ntwo", None),
        Message(None, "message", "x", None),
        # The planned end: an id of its own and no data. The keep-alive gave nothing.
        Message("41-7", "message", None, None),
    ]
    for line_end in ("\n", "\r\n", "\r"):
        raw = stream.replace("\n", line_end).encode()
        for cut in range(len(raw) + 1):
            reader = MessageReader()
            assert reader.feed(raw[:cut]) + reader.feed(raw[cut:]) == expected, (line_end, cut)
        reader = MessageReader()
        assert [message for byte in raw for message in reader.feed(bytes([byte]))] == expected, line_end


def test_compliance_lost_at_and_ids_are_read_as_kya_core_reads_them() -> None:
    assert kya.compliance_lost_at(event("4-0", WALLET, 120, compliant=True)) is None
    lost = event("4-1", WALLET.lower(), 121, compliant=False, type="agent.status_changed")
    assert kya.compliance_lost_at(lost) == (WALLET, 121), "any type; the wallet as EIP-55"
    import json

    assert kya.compliance_lost_at(json.dumps(lost)) == (WALLET, 121)
    # A retraction states the standing once the reorganisation was applied.
    retracted = {**event("4-2", WALLET, 122, compliant=False), "finality": "retracted", "retracts": "3-9"}
    assert kya.compliance_lost_at(retracted) == (WALLET, 122)
    for broken in ({**lost, "wallet": "0x12"}, {**lost, "id": "4"}, {"type": "agent.registered"}, "{"):
        try:
            kya.compliance_lost_at(broken)
        except kya.InvalidInput as error:
            assert "not a change feed event" in str(error)
        else:
            raise AssertionError(f"read {broken!r}")
    assert kya.cursor_key("9-5") < kya.cursor_key("10-0") < kya.cursor_key("10-4294967295")
    for malformed in ("0-1", "9", "9-x", "-1-2", ""):
        try:
            kya.cursor_key(malformed)
        except kya.InvalidInput:
            pass
        else:
            raise AssertionError(f"took {malformed!r}")
    assert kya.FEED_RECONNECT_MS == 3000


def test_follower_pages_then_streams_and_resumes_at_once_after_each_planned_end() -> None:
    with LoopbackApi(budget=2, retry_ms=20_000) as api:
        api.append(*(event(f"1-{i}", WALLET, 100 + i, compliant=i % 2 == 0) for i in range(4)))
        follower = kya.ChangeFollower(api.url, page_size=3)
        ids: List[str] = []
        started = time.monotonic()
        for item in follower:
            ids.append(item["id"])
            if item["id"] == "1-3":  # the last of the pages: the rest comes through the stream
                assert follower.caught_up.is_set() is False
                api.append(*(event(f"2-{i}", WALLET, 110 + i, compliant=True) for i in range(5)))
            if item["id"] == "2-4":
                break
        elapsed = time.monotonic() - started
    assert ids == ["1-0", "1-1", "1-2", "1-3", "2-0", "2-1", "2-2", "2-3", "2-4"]
    assert follower.position == "2-4"
    assert api.requests.count("/api/v1/changes") == 2, api.requests
    # Each connection resumed from the id the previous one's end named, at once: never after the
    # stream's retry (20 s here).
    assert [last for last, _ in api.resumes] == ["1-3", "2-1", "2-3"]
    assert elapsed < 10, elapsed


def test_a_filtered_follower_resumes_past_the_events_its_filter_skipped() -> None:
    with LoopbackApi(budget=3) as api:
        api.append(event("1-0", WALLET, 100, compliant=True))
        follower = kya.ChangeFollower(api.url, type="agent.compliance_changed")
        ids: List[str] = []
        for item in follower:
            ids.append(item["id"])
            if item["id"] == "1-0":
                api.append(
                    event("1-1", WALLET, 101, compliant=False),
                    event("1-2", WALLET, 101, compliant=False, type="agent.status_changed"),
                    event("1-3", WALLET, 102, compliant=True, type="agent.status_changed"),
                    event("1-4", WALLET, 102, compliant=True),
                )
            if item["id"] == "1-4":
                break
    assert ids == ["1-0", "1-1", "1-4"]
    # The first connection sent 1-1 and passed over 1-2 and 1-3: its end named 1-3, and the
    # second connection resumed there, not after 1-1 (which would have offered them again).
    assert [last for last, _ in api.resumes] == ["1-0", "1-3"]


def test_a_stream_cut_without_an_end_resumes_after_the_last_event_and_the_streams_retry() -> None:
    with LoopbackApi(cut_after=2, retry_ms=300) as api:
        api.append(event("1-0", WALLET, 100, compliant=True))
        follower = kya.ChangeFollower(api.url)
        ids: List[str] = []
        for item in follower:
            ids.append(item["id"])
            if item["id"] == "1-0":
                api.append(*(event(f"1-{i}", WALLET, 100 + i, compliant=True) for i in range(1, 5)))
            if item["id"] == "1-4":
                break
    assert ids == ["1-0", "1-1", "1-2", "1-3", "1-4"], "none missed, none twice"
    assert [last for last, _ in api.resumes] == ["1-0", "1-2"]
    assert follower.retry_secs == 0.3, "the stream's own retry"
    waited = api.resumes[1][1] - api.resumes[0][1]
    assert waited >= 0.3, waited


def test_async_follower_gives_the_same_events_in_order() -> None:
    async def follow(api: LoopbackApi) -> List[str]:
        ids: List[str] = []
        follower = kya.AsyncChangeFollower(api.url, page_size=3)
        async for item in follower:
            ids.append(item["id"])
            if item["id"] == "1-3":
                api.append(*(event(f"2-{i}", WALLET, 110 + i, compliant=True) for i in range(5)))
            if item["id"] == "2-4":
                break
        await follower.api.aclose()
        assert follower.position == "2-4"
        return ids

    with LoopbackApi(budget=2) as api:
        api.append(*(event(f"1-{i}", WALLET, 100 + i, compliant=True) for i in range(4)))
        ids = asyncio.run(follow(api))
    assert ids == ["1-0", "1-1", "1-2", "1-3", "2-0", "2-1", "2-2", "2-3", "2-4"]
    assert [last for last, _ in api.resumes] == ["1-3", "2-1", "2-3"]


def _gate(fixture: Dict[str, Any], api: LoopbackApi) -> kya.Gate:
    return kya.Gate(api_url=api.url, issuer=fixture["issuer"], authority="api.provider.example",
                    chain_id=fixture["chainId"], registry=fixture["registry"], clock=lambda: fixture["now"])


def _request(fixture: Dict[str, Any]) -> Dict[str, Any]:
    signer = kya.RequestSigner(chain_id=fixture["chainId"], private_key=fixture["walletKey"])
    url = "https://api.provider.example/v1/infer"
    headers = {**signer.headers("GET", url), kya.PASS_HEADER: fixture["passes"]["valid"]}
    return {"method": "GET", "url": url, "headers": headers}


def test_revocation_follower_in_a_thread_revokes_passes_from_the_feeds_loss_on(fixture: Dict[str, Any]) -> None:
    with LoopbackApi(fixture) as api:
        api.append(event("1-0", fixture["wallet"], 30, compliant=True))
        gate = _gate(fixture, api)
        revocations = RevocationFollower(gate)
        thread = revocations.start()
        assert revocations.caught_up.wait(5)
        assert gate.admit(**_request(fixture)).admitted
        # A loss at block 41, which the pass (block 42) shows already: still admitted.
        api.append(event("1-1", fixture["wallet"].lower(), 41, compliant=False))
        assert _until(lambda: revocations.revocations == 1)
        assert gate.admit(**_request(fixture)).admitted
        # A suspension at the pass's block: its passes of that block or before are refused.
        api.append(event("1-2", fixture["wallet"], 42, compliant=False, type="agent.status_changed"),
                   event("1-3", fixture["wallet"], 42, compliant=False))
        assert _until(lambda: revocations.revocations == 2)
        refused = gate.admit(**_request(fixture))
        assert (refused.status, refused.stage, refused.reason) == (403, "pass", "revoked")
        assert "42" in (refused.message or "")
        revocations.stop()
        thread.join(5)
        assert not thread.is_alive()
    assert revocations.position == "1-3" and revocations.error is None
    # The status change at 42 was not sent (the follower reads compliance changes only), else 3.
    assert revocations.revocations == 2
    assert api.count("/.well-known/jwks.json") == 1


def test_revocation_follower_as_a_task_revokes_passes_for_aadmit(fixture: Dict[str, Any]) -> None:
    async def run(api: LoopbackApi) -> List[Optional[str]]:
        gate = _gate(fixture, api)
        revocations = RevocationFollower(gate)
        task = revocations.start_task()
        while not revocations.caught_up.is_set():
            await asyncio.sleep(0.01)
        reasons = [(await gate.aadmit(**_request(fixture))).reason]
        api.append(event("1-1", fixture["wallet"], 42, compliant=False))
        for _ in range(500):
            if revocations.revocations:
                break
            await asyncio.sleep(0.01)
        reasons.append((await gate.aadmit(**_request(fixture))).reason)
        revocations.stop()
        try:
            await task
        except asyncio.CancelledError:
            pass
        assert task.done() and revocations.error is None
        return reasons

    with LoopbackApi(fixture) as api:
        api.append(event("1-0", fixture["wallet"], 30, compliant=True))
        assert asyncio.run(run(api)) == [None, "revoked"]


def test_revocation_follower_waits_out_a_busy_api_and_stops_on_a_refusal(fixture: Dict[str, Any]) -> None:
    with LoopbackApi(fixture, oldest_kept="2-0") as api:
        api.append(event("2-0", fixture["wallet"], 30, compliant=True))
        api.refusals["/api/v1/changes"] = [(503, "the index is not ready")]
        api.refusals["/api/v1/changes/stream"] = [(429, "Rate limit exceeded. Try again in 1 minute.")]
        gate = _gate(fixture, api)
        revocations = RevocationFollower(gate)
        thread = revocations.start()
        assert revocations.caught_up.wait(5)
        assert _until(lambda: api.count("/api/v1/changes/stream") == 2), api.requests
        api.append(event("2-1", fixture["wallet"], 42, compliant=False))
        assert _until(lambda: revocations.revocations == 1)
        assert gate.admit(**_request(fixture)).reason == "revoked"
        assert revocations.error is None
        revocations.stop()
        thread.join(5)

        # A cursor older than the feed keeps: 410, and no retry can mend it.
        stale = RevocationFollower(gate, after="1-5")
        stale_thread = stale.start()
        stale_thread.join(5)
        assert not stale_thread.is_alive() and not stale.caught_up.is_set()
    error = stale.error
    assert isinstance(error, kya.ApiError), error
    assert (error.status, error.message) == (410, "the cursor 1-5 is older than the feed keeps")


def test_stop_ends_a_follower_reading_the_stream_at_once() -> None:
    """A quiet stream (no heartbeat for 60 s) holds the follower's thread in a read: stop()
    shuts the connection down, and the thread ends without waiting for the next byte."""
    with LoopbackApi(retry_ms=60_000, heartbeat_secs=60) as api:
        follower = kya.ChangeFollower(api.url)
        ids: List[str] = []
        thread = threading.Thread(target=lambda: ids.extend(item["id"] for item in follower))
        thread.start()
        # The stream is open and its opening frame read: the thread now waits for bytes.
        assert follower.caught_up.wait(5) and _until(lambda: follower._open is not None)
        time.sleep(0.1)
        stopped_at = time.monotonic()
        follower.stop()
        thread.join(10)
        assert not thread.is_alive() and ids == []
        assert time.monotonic() - stopped_at < 5
