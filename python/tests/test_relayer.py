"""An agent's relayer flows: the bindings against what kya-client (the `kya` command line) and
the relayer make of the same values (tests/it/python_package.rs writes them to the fixture),
eth-account as an independent EIP-712 implementation, and the clients (sync and async) against
a relayer and a chain played by httpx's MockTransport: what they sign and post, how they follow
a relay, and the relayer's refusals as exceptions with its status, code and message."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List, Optional

import httpx
import pytest
from eth_account import Account as EthAccount
from eth_account.messages import encode_typed_data

import kya._core as core
from kya.accounts import Account
from kya.consents import ConsentsMissing
from kya.registration import Registration
from kya.relayer import AsyncRelayerClient, RelayerClient
from kya.relayer_errors import (
    CallReverted,
    InvalidSignature,
    RateLimited,
    RelayerUnavailable,
    RelayFailed,
    RequestRefused,
    Unreachable,
    relayer_error,
)

RELAYER = "http://relayer.test"
RPC = "http://rpc.test/v1/secret-api-key"


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def _request(relayer: Dict[str, Any]) -> Any:
    """The fixture's forward request (a ``core.ForwardRequest``; ``Any``: the tests spell it
    wrongly on purpose too)."""
    return dict(relayer["request"]["fields"])


def test_a_forward_request_hashes_and_signs_as_kya_client_and_eth_account_do(fixture: Dict[str, Any]) -> None:
    relayer = fixture["relayer"]
    request = _request(relayer)
    chain, forwarder = relayer["chainId"], relayer["forwarder"]
    typed = core.forward_request_typed_data(request, chain_id=chain, forwarder=forwarder)
    assert typed == relayer["request"]["typedData"]
    digest = core.forward_request_digest(request, chain_id=chain, forwarder=forwarder)
    assert _hex(digest) == relayer["request"]["digest"]
    signature = core.sign_forward_request(request, chain_id=chain, forwarder=forwarder,
                                          private_key=fixture["walletKey"])
    assert _hex(signature) == relayer["request"]["signature"], "RFC 6979: kya-client's very bytes"
    assert core.sign_forward_request(request, chain_id=chain, forwarder=forwarder,
                                     private_key=core.PrivateKey(fixture["walletKey"])) == signature
    assert EthAccount.recover_message(encode_typed_data(full_message=typed), signature=signature) == fixture["wallet"]
    # eth-account's own EIP-712 of the typed data: the same digest and signature.
    theirs = EthAccount.sign_typed_data(fixture["walletKey"], full_message=typed)
    assert (bytes(theirs.message_hash), bytes(theirs.signature)) == (digest, signature)
    assert core.recover_signer(digest, signature) == fixture["wallet"]
    # The same request with its numbers as decimal strings and its data as bytes.
    spelled: Any = dict(request, gas=str(request["gas"]), nonce="4", data=bytes.fromhex(request["data"][2:]))
    assert core.forward_request_digest(spelled, chain_id=chain, forwarder=forwarder) == digest
    # Refused with the relayer's own words.
    with pytest.raises(core.InvalidInput, match="request.from must be a 20-byte hex address"):
        nobody: Any = dict(request, **{"from": "nobody"})
        core.forward_request_digest(nobody, chain_id=chain, forwarder=forwarder)
    with pytest.raises(core.InvalidInput, match="request.nonce must be a non-negative integer"):
        negative: Any = dict(request, nonce=-1)
        core.forward_request_digest(negative, chain_id=chain, forwarder=forwarder)


def test_an_account_with_a_hash_signer_signs_as_its_key_and_never_shows_a_key(fixture: Dict[str, Any]) -> None:
    relayer = fixture["relayer"]
    request = _request(relayer)
    chain, forwarder = relayer["chainId"], relayer["forwarder"]
    held = EthAccount.from_key(fixture["walletKey"])
    kms = Account(signer=lambda digest: bytes(held.unsafe_sign_hash(digest).signature), address=held.address)
    local = Account(fixture["walletKey"])
    assert kms.address == local.address == fixture["wallet"]
    ours = local.sign_forward_request(request, chain_id=chain, forwarder=forwarder)
    assert Account(core.PrivateKey(fixture["walletKey"])).sign_forward_request(
        request, chain_id=chain, forwarder=forwarder) == ours
    assert kms.sign_forward_request(request, chain_id=chain, forwarder=forwarder) == ours
    # A signer giving v as 0/1 (a KMS's): written as 27/28.
    low_v = Account(signer=lambda digest: (lambda sig: sig[:64] + bytes([sig[64] - 27]))(
        bytes(held.unsafe_sign_hash(digest).signature)), address=held.address)
    assert low_v.sign_forward_request(request, chain_id=chain, forwarder=forwarder) == ours
    # A signer of another key: refused before anything is sent, naming addresses only.
    stranger = EthAccount.from_key(fixture["strangerKey"])
    wrong = Account(signer=lambda digest: bytes(stranger.unsafe_sign_hash(digest).signature), address=held.address)
    with pytest.raises(core.SignError, match="the forwarder would refuse it") as refused:
        wrong.sign_forward_request(request, chain_id=chain, forwarder=forwarder)
    with pytest.raises(core.SignError, match="not this account"):
        Account(fixture["strangerKey"]).sign_forward_request(request, chain_id=chain, forwarder=forwarder)
    with pytest.raises(core.InvalidInput, match="not 0x"):
        Account(fixture["walletKey"], address=stranger.address)
    for shown in (repr(local), repr(kms), str(refused.value)):
        assert fixture["walletKey"][2:] not in shown and fixture["strangerKey"][2:] not in shown
    assert repr(local) == f"Account(address='{fixture['wallet']}', key)"


def test_consents_are_planned_hashed_and_signed_as_kya_register_does(fixture: Dict[str, Any]) -> None:
    relayer = fixture["relayer"]
    consents = relayer["consents"]
    chain, registry = relayer["chainId"], relayer["registry"]
    needed = core.consents_needed(creator=relayer["creator"], agent_wallet=fixture["wallet"],
                                  haftungsperson=core.address_of(fixture["strangerKey"]),
                                  parent_agent_id=0, wallet_nonce=consents["walletNonce"],
                                  haftungsperson_nonce=consents["haftungspersonNonce"], deadline=consents["deadline"])
    wallet, liability = needed["agent_wallet"], needed["liability"]
    assert wallet is not None and liability is not None
    assert (wallet["signer"], wallet["nonce"], wallet["parent_agent_id"]) == (fixture["wallet"], 3, 0)
    assert (liability["nonce"], liability["deadline"]) == (5, 1_900_000_000)
    for consent, expected, key in ((wallet, consents["agentWallet"], fixture["walletKey"]),
                                   (liability, consents["liability"], fixture["strangerKey"])):
        typed = core.consent_typed_data(consent, chain_id=chain, registry=registry)
        assert typed == expected["typedData"]
        digest = core.consent_digest(consent, chain_id=chain, registry=registry)
        assert _hex(digest) == expected["digest"]
        signature = core.sign_consent(consent, chain_id=chain, registry=registry, private_key=key)
        assert _hex(signature) == expected["signature"]
        assert core.sign_consent(consent, chain_id=chain, registry=registry,
                                 private_key=core.PrivateKey(key)) == signature
        # A wallet's eth_signTypedData_v4 of the typed data: the same bytes.
        assert bytes(EthAccount.sign_typed_data(key, full_message=typed).signature) == signature
        assert core.recover_signer(digest, signature) == consent["signer"]
    assert core.latest_consent_deadline(1_700_000_000) == 1_700_000_000 + core.MAX_CONSENT_LIFETIME_SECS


def test_who_must_consent_depends_on_the_sender_and_the_parent(fixture: Dict[str, Any]) -> None:
    me, other = fixture["wallet"], core.address_of(fixture["strangerKey"])

    def needed(creator: str, wallet: str, person: str, parent: int) -> core.ConsentsNeeded:
        return core.consents_needed(creator=creator, agent_wallet=wallet, haftungsperson=person,
                                    parent_agent_id=parent, wallet_nonce=4, haftungsperson_nonce=4, deadline=10)

    assert needed(me, me, me, 0) == {"agent_wallet": None, "liability": None}
    child = needed(other, me, other, 7)
    assert child["liability"] is None and child["agent_wallet"] is not None
    assert child["agent_wallet"]["parent_agent_id"] == 7
    # One signer of both: the liability consent takes the nonce after the wallet's.
    both = needed(other, me, me, 0)
    assert both["agent_wallet"] is not None and both["liability"] is not None
    assert (both["agent_wallet"]["nonce"], both["liability"]["nonce"]) == (4, 5)


def test_registry_calldata_gas_and_hashes_are_kya_clients(fixture: Dict[str, Any]) -> None:
    relayer = fixture["relayer"]
    writes, consents = relayer["writes"], relayer["consents"]
    person = core.address_of(fixture["strangerKey"])
    constitution = core.constitution_hash("Be honest.")
    capabilities = core.capability_hash([" summarise", "search", "search"])
    assert (_hex(constitution), _hex(capabilities)) == (consents["constitutionHash"], consents["capabilityHash"])
    assert capabilities == core.capability_hash(["search", "summarise"]), "the set, not the order"
    fields: Dict[str, Any] = dict(constitution_hash=constitution, capability_hash=_hex(capabilities),
                                  operational_scope="summarises papers")
    calldata = {
        "register": core.register_agent_calldata(haftungsperson=relayer["creator"], agent_wallet=relayer["creator"],
                                                 **fields),
        "registerWithConsent": core.register_agent_with_consent_calldata(
            haftungsperson=person, agent_wallet=fixture["wallet"], deadline=consents["deadline"],
            wallet_consent=consents["agentWallet"]["signature"],
            liability_consent=bytes.fromhex(consents["liability"]["signature"][2:]), **fields),
        "attest": core.attest_compliance_calldata(7),
        "reportRevenue": core.report_revenue_calldata(agent_id=7, amount_cents=123_456, currency="EUR",
                                                      category="compute", period_start=1_700_000_000,
                                                      period_end=1_702_592_000),
        "terminate": core.terminate_self_calldata(7),
        "invalidateConsents": core.invalidate_consents_calldata(),
        "invalidateConsentsThrough": core.invalidate_consents_through_calldata(9),
    }
    assert set(calldata) == set(writes)
    for name, data in calldata.items():
        assert _hex(data) == writes[name]["calldata"], name
        assert core.forward_gas(data) == writes[name]["gas"], name
    assert _hex(core.consent_nonce_calldata("0x" + "11" * 20)) == relayer["consentNonceCall"]
    assert core.decode_consent_nonce("0x" + (41).to_bytes(32, "big").hex()) == 41
    with pytest.raises(core.InvalidInput, match="give at least one name"):
        core.capability_hash([" ", ""])


def test_what_the_registry_or_the_relayer_would_refuse_is_refused_before_signing(fixture: Dict[str, Any]) -> None:
    me = fixture["wallet"]
    fields: Dict[str, Any] = dict(haftungsperson=me, agent_wallet=me, constitution_hash=b"\x01" * 32,
                                  capability_hash=b"\x02" * 32)
    core.register_agent_calldata(operational_scope="ü" * 512, **fields)
    with pytest.raises(core.InvalidInput, match=r"operational scope is 1026 bytes; the registry stores at most 1024"):
        core.register_agent_calldata(operational_scope="ü" * 513, **fields)
    report: Dict[str, Any] = dict(agent_id=1, amount_cents=1, period_start=0, period_end=0)
    with pytest.raises(core.InvalidInput, match="currency is 17 bytes"):
        core.report_revenue_calldata(currency="C" * 17, category="c", **report)
    with pytest.raises(core.InvalidInput, match="category is 65 bytes"):
        core.report_revenue_calldata(currency="EUR", category="c" * 65, **report)
    with pytest.raises(core.InvalidInput, match="constitution_hash must be 32 bytes"):
        core.register_agent_calldata(operational_scope="s", **dict(fields, constitution_hash=b"\x01"))
    # A view, or padding after a write: the relayer forwards neither, so no gas is named.
    with pytest.raises(core.InvalidInput, match="a view of the registry"):
        core.forward_gas(core.consent_nonce_calldata(me))
    with pytest.raises(core.InvalidInput, match="1 bytes after the arguments of attestCompliance"):
        core.forward_gas(core.attest_compliance_calldata(1) + b"\x00")
    with pytest.raises(core.InvalidInput, match="below 2\\*\\*256"):
        core.attest_compliance_calldata(2**256)


def test_a_registry_event_decodes_from_its_log(fixture: Dict[str, Any]) -> None:
    relayer = fixture["relayer"]
    log = relayer["registeredLog"]
    assert core.registry_event(log["topics"], log["data"]) == {
        "event": "AgentRegistered", "agent_id": 7, "creator": relayer["creator"], "agent_wallet": fixture["wallet"],
        "haftungsperson": core.address_of(fixture["strangerKey"]), "parent_agent_id": 0, "generation": 0,
    }
    assert core.registry_event(["0x" + "00" * 32], "0x") is None, "another contract's event"
    assert core.registry_event([], "0x") is None


def test_every_refusal_of_the_relayer_is_an_exception_with_its_status_code_and_message(
    fixture: Dict[str, Any],
) -> None:
    kinds = {400: RequestRefused, 401: InvalidSignature, 403: RequestRefused, 404: RequestRefused,
             429: RateLimited, 503: RelayerUnavailable}
    for refusal in fixture["relayer"]["refusals"]:
        status, message, code = refusal["status"], refusal["message"], refusal["code"]
        # The daemon's body names its code; a body without one has it read from the words.
        for body in (refusal["body"], json.dumps({"error": message})):
            error = relayer_error(status, body)
            assert (error.status, error.code, error.message) == (status, code, message), (refusal, body)
        expected = kinds.get(status) or (CallReverted if code == "reverted" else RelayerUnavailable)
        assert type(error) is expected, refusal
        assert str(error) == f"relayer answered HTTP {status} ({code}): {message}"
    slice_spent = relayer_error(429, '{"error": "Gas budget for this hour spent. Try again at x."}', "42")
    assert (slice_spent.code, slice_spent.retry_after) == ("budget_slice_spent", 42)
    reverted = relayer_error(500, '{"error": "Agent not active"}')
    assert isinstance(reverted, CallReverted) and reverted.reason == "Agent not active"
    proxy = relayer_error(502, "<html>Bad gateway</html>")
    assert (proxy.code, proxy.message) == ("http_502", "<html>Bad gateway</html>")


class MockChain:
    """The relayer and the chain's RPC endpoint of a test, played by MockTransport: it checks
    what is posted (the request kya-core's typed data says, signed by ``from`` as eth-account
    recovers it), answers relays as a relayer does, and counts what it was asked."""

    def __init__(self, fixture: Dict[str, Any], *, settle_as: str = "mined") -> None:
        self.relayer = fixture["relayer"]
        self.settle_as = settle_as
        self.posted: List[Dict[str, Any]] = []
        self.lookups = 0
        self.nonces: Dict[str, int] = {}
        self.consent_nonces: Dict[str, int] = {}
        self.refuse_relay: Optional[httpx.Response] = None
        self.now = 1_800_000_000
        self.asked: List[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "rpc.test":
            return self.rpc(json.loads(request.content))
        path = request.url.path
        self.asked.append(f"{request.method} {path}")
        if path == "/status":
            return httpx.Response(200, json={"contracts": {"registry": self.relayer["registry"],
                                                           "forwarder": self.relayer["forwarder"]}})
        if path == "/domain":
            return httpx.Response(200, json={"name": "MinimalForwarder", "version": "1",
                                             "chainId": self.relayer["chainId"],
                                             "verifyingContract": self.relayer["forwarder"]})
        if path.startswith("/nonce/"):
            address = path.split("/")[-1]
            return httpx.Response(200, json={"address": address, "nonce": str(self.nonces.get(address, 0))})
        if path == "/relay" and request.method == "POST":
            return self.relay(json.loads(request.content))
        if path.startswith("/relay/"):
            self.lookups += 1
            status = "sent" if self.lookups == 1 else self.settle_as
            return httpx.Response(200, json=self.view(status))
        return httpx.Response(404, json={"error": "Not found"})

    def relay(self, body: Dict[str, Any]) -> httpx.Response:
        if self.refuse_relay is not None:
            return self.refuse_relay
        request = body["request"]
        typed = core.forward_request_typed_data(request, chain_id=self.relayer["chainId"],
                                                forwarder=self.relayer["forwarder"])
        assert typed["message"] == request, "the relayer is sent kya-core's own JSON of the request"
        signer = EthAccount.recover_message(encode_typed_data(full_message=typed), signature=body["signature"])
        assert signer == request["from"]
        assert request["nonce"] == str(self.nonces.get(signer, 0))
        assert int(request["gas"]) == core.forward_gas(request["data"])
        self.nonces[signer] = self.nonces.get(signer, 0) + 1
        self.posted.append(body)
        return httpx.Response(200, json={"txHash": "0x" + "ab" * 32, "from": signer, "nonce": request["nonce"],
                                         "relayId": "0123456789abcdef0123456789abcdef", "status": "sent"})

    def view(self, status: str) -> Dict[str, Any]:
        request = self.posted[-1]["request"]
        return {"relayId": "0123456789abcdef0123456789abcdef", "status": status, "from": request["from"],
                "nonce": request["nonce"], "txHash": "0x" + "ab" * 32, "previousTxHashes": [], "transactions": [],
                "relayerNonce": 0, "blockNumber": 12, "gasUsed": "90000", "costWei": "1",
                "reservedWei": "1", "revertReason": "Agent not active" if status == "call_failed" else None,
                "error": None, "deadline": None, "createdAt": None, "sentAt": None, "updatedAt": None,
                "settledAt": None}

    def rpc(self, call: Dict[str, Any]) -> httpx.Response:
        method, params = call["method"], call["params"]
        self.asked.append(method)
        result: Any
        if method == "eth_chainId":
            result = hex(self.relayer["chainId"])
        elif method == "eth_getBlockByNumber":
            result = {"timestamp": hex(self.now)}
        elif method == "eth_call":
            signer = "0x" + params[0]["data"][-40:]
            nonce = next((n for a, n in self.consent_nonces.items() if a.lower() == signer.lower()), 0)
            result = "0x" + nonce.to_bytes(32, "big").hex()
        elif method == "eth_getCode":
            result = "0x"
        elif method == "eth_getTransactionReceipt":
            log = self.relayer["registeredLog"]
            result = {"logs": [{"address": self.relayer["registry"].lower(), "topics": log["topics"],
                                "data": log["data"]}]}
        else:
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": method}})
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": result})

    def client(self, **settings: Any) -> RelayerClient:
        http = httpx.Client(transport=httpx.MockTransport(self.handle))
        return RelayerClient(RELAYER, rpc_url=RPC, http=http, poll_secs=0.001, **settings)


def test_a_write_is_signed_at_the_relayers_nonce_posted_and_followed_until_it_settles(
    fixture: Dict[str, Any],
) -> None:
    chain = MockChain(fixture)
    agent = Account(fixture["walletKey"])
    chain.nonces[agent.address] = 4
    with chain.client() as client:
        outcome = client.attest(7, account=agent)
    assert chain.asked == ["GET /status", "GET /domain", f"GET /nonce/{agent.address}", "POST /relay",
                           "GET /relay/0123456789abcdef0123456789abcdef",
                           "GET /relay/0123456789abcdef0123456789abcdef", "eth_getTransactionReceipt"]
    request = chain.posted[0]["request"]
    assert request["data"] == fixture["relayer"]["writes"]["attest"]["calldata"]
    assert (request["to"], request["value"], request["deadline"]) == (fixture["relayer"]["registry"], "0", "0")
    assert (outcome.status, outcome.relay_id, outcome.block_number) == ("mined", "0123456789abcdef0123456789abcdef", 12)
    assert outcome.tx_hash == "0x" + "ab" * 32
    assert outcome.agent_id == 7, "the registry's event from the receipt"


def test_a_registration_with_consents_is_sent_only_once_every_consent_is_signed(fixture: Dict[str, Any]) -> None:
    chain = MockChain(fixture)
    creator, agent = Account(fixture["walletKey"]), Account(fixture["strangerKey"])
    chain.consent_nonces = {agent.address: 2}
    registration = Registration.of(constitution="Be honest.", capabilities=["search"],
                                   operational_scope="summarises papers", agent_wallet=agent.address,
                                   haftungsperson=creator.address)
    client = chain.client()
    # The agent wallet's consent missing: nothing sent, and what it must sign.
    with pytest.raises(ConsentsMissing) as missing:
        client.register(registration, account=creator)
    plan = missing.value.plan
    assert [planned.kind for planned in plan.missing()] == ["AgentWalletConsent"]
    planned = plan.missing()[0]
    assert (planned.signer, planned.nonce, plan.deadline) == (agent.address, 2, chain.now + 3600)
    assert planned.typed_data["message"]["nonce"] == "2"
    assert str(missing.value) == (f"consent missing: the agent wallet {agent.address}'s AgentWalletConsent; "
                                  "nothing was sent")
    assert "POST /relay" not in chain.asked
    # Signed elsewhere from the typed data (a wallet), given back with its deadline.
    signature = bytes(EthAccount.sign_typed_data(fixture["strangerKey"], full_message=planned.typed_data).signature)
    outcome = client.register(registration, account=creator, wallet_consent=_hex(signature),
                              consent_deadline=plan.deadline)
    expected = core.register_agent_with_consent_calldata(
        haftungsperson=creator.address, agent_wallet=agent.address, constitution_hash=registration.constitution_hash,
        capability_hash=registration.capability_hash, operational_scope="summarises papers",
        deadline=plan.deadline, wallet_consent=signature)
    assert chain.posted[-1]["request"]["data"] == _hex(expected)
    assert outcome.agent_id == 7
    # The agent's own account signs it here just the same.
    client.register(registration, account=creator, wallet_consent=agent, consent_deadline=plan.deadline)
    assert chain.posted[-1]["request"]["data"] == _hex(expected)
    # A signature that is not the agent's (its wallet has no code): refused, nothing sent.
    chain.posted.clear()
    forged = core.sign_consent(planned.consent, chain_id=plan.chain_id, registry=plan.registry,
                               private_key=fixture["walletKey"])
    with pytest.raises(core.InvalidInput, match=f"is not {agent.address}'s signature of this consent"):
        client.register(registration, account=creator, wallet_consent=forged, consent_deadline=plan.deadline)
    with pytest.raises(core.InvalidInput, match="needs consent_deadline"):
        client.register(registration, account=creator, wallet_consent=signature)
    with pytest.raises(core.InvalidInput, match="Consent deadline too far"):
        client.register(registration, account=creator, wallet_consent=agent, consent_deadline=chain.now + 8 * 86400)
    with pytest.raises(core.InvalidInput, match="needs no consent"):
        client.register(Registration.of(constitution="c", capabilities=["x"], operational_scope="s"),
                        account=creator, liability_consent=signature)
    with pytest.raises(core.InvalidInput, match="consenting for agent_wallet"):
        client.register(registration, account=creator, wallet_consent=creator)
    assert chain.posted == []
    client.close()


def test_a_self_registration_needs_no_rpc_and_a_consented_one_says_it_does(fixture: Dict[str, Any]) -> None:
    chain = MockChain(fixture)
    me = Account(fixture["walletKey"])
    http = httpx.Client(transport=httpx.MockTransport(chain.handle))
    client = RelayerClient(RELAYER, http=http, poll_secs=0.001)
    own = Registration.of(constitution="Be honest.", capabilities=["search", "summarise"],
                          operational_scope="summarises papers")
    outcome = client.register(own, account=me)
    assert outcome.events == [] and outcome.agent_id is None, "no RPC: the relay alone"
    assert chain.posted[-1]["request"]["data"] == _hex(core.register_agent_calldata(
        haftungsperson=me.address, agent_wallet=me.address, constitution_hash=own.constitution_hash,
        capability_hash=own.capability_hash, operational_scope="summarises papers"))
    with pytest.raises(core.InvalidInput, match="needs the chain's RPC URL"):
        client.register(own, account=me, wallet_consent=Account(fixture["strangerKey"]))


def test_the_relayers_refusals_and_a_failed_relay_reach_the_caller_as_exceptions(fixture: Dict[str, Any]) -> None:
    chain = MockChain(fixture)
    agent = Account(fixture["walletKey"])
    client = chain.client()
    chain.refuse_relay = httpx.Response(401, json={"error": "Invalid signature or nonce mismatch"})
    with pytest.raises(InvalidSignature) as refused:
        client.attest(7, account=agent)
    assert (refused.value.status, refused.value.code) == (401, "invalid_signature")
    assert refused.value.message == "Invalid signature or nonce mismatch"
    chain.refuse_relay = httpx.Response(500, json={"error": "Agent not found"})
    with pytest.raises(CallReverted) as reverted:
        client.attest(99, account=agent)
    assert (reverted.value.code, reverted.value.reason) == ("reverted", "Agent not found")
    chain.refuse_relay = httpx.Response(429, json={"error": "Gas budget for this hour spent. Try again at 2030."},
                                        headers={"Retry-After": "120"})
    with pytest.raises(RateLimited) as limited:
        client.attest(7, account=agent)
    assert (limited.value.code, limited.value.retry_after) == ("budget_slice_spent", 120)
    # Accepted, then mined with the registry call failing.
    chain.refuse_relay = None
    chain.settle_as = "call_failed"
    with pytest.raises(RelayFailed) as failed:
        client.attest(7, account=agent)
    assert (failed.value.status, failed.value.reason) == ("call_failed", "Agent not active")
    assert failed.value.relay["relayId"] == "0123456789abcdef0123456789abcdef"
    client.close()

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    unreachable = RelayerClient(RELAYER, rpc_url=RPC, http=httpx.Client(transport=httpx.MockTransport(down)))
    with pytest.raises(Unreachable, match="the relayer could not be reached: ConnectError") as lost:
        unreachable.attest(7, account=agent)
    assert "secret-api-key" not in str(lost.value) and fixture["walletKey"][2:] not in str(lost.value)


def test_the_async_client_runs_the_same_flows(fixture: Dict[str, Any]) -> None:
    chain = MockChain(fixture)
    agent = Account(fixture["walletKey"])

    async def run() -> None:
        http = httpx.AsyncClient(transport=httpx.MockTransport(chain.handle))
        async with AsyncRelayerClient(RELAYER, rpc_url=RPC, http=http, poll_secs=0.001) as client:
            reported = await client.report_revenue(7, account=agent, amount_cents=123_456, currency="EUR",
                                                   category="compute", period_start=1_700_000_000,
                                                   period_end=1_702_592_000)
            assert reported.status == "mined"
            assert chain.posted[-1]["request"]["data"] == fixture["relayer"]["writes"]["reportRevenue"]["calldata"]
            chain.lookups = 0
            taken_back = await client.invalidate_consents(account=agent, through=9)
            assert taken_back.status == "mined"
            assert chain.posted[-1]["request"]["data"] == (
                fixture["relayer"]["writes"]["invalidateConsentsThrough"]["calldata"])
            assert await client.nonce(agent.address) == 2
        await http.aclose()

    asyncio.run(run())
