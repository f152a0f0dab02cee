"""A Python agent's relayer flows against the real relayer daemon and anvil with the real
contracts, run by tests/it/python_relayer.rs (which starts them, hands the URLs and three fresh
keys in the environment, and reads the chain afterwards). Outside python/tests: the unit suite
needs no chain.

An operator registers the agent: the agent wallet's consent signed here by its key, the
Haftungsperson's first missing (nothing sent, its typed data handed back), then signed from that
typed data by eth-account as a wallet would. The agent then attests through a signer of hashes
held elsewhere (eth-account standing in for a KMS), reports revenue, and takes its consents
back, the last time through the async client. What came back is written to ``KYA_E2E_OUT`` for
the Rust side to check against the chain."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from typing import Any, Dict

import pytest
from eth_account import Account as EthAccount

import kya._core as core
from kya.relayer import (
    Account,
    AsyncRelayerClient,
    CallReverted,
    ConsentsMissing,
    InvalidSignature,
    RelayerClient,
    Registration,
    RequestRefused,
)

CONSTITUTION = "Be honest. Cite sources."
SCOPE = "summarises research papers"
REVENUE: Dict[str, Any] = dict(amount_cents=123_456, currency="EUR", category="compute",
                               period_start=1_700_000_000, period_end=1_702_592_000)


def urls() -> Dict[str, str]:
    return {"relayer_url": os.environ["KYA_RELAYER_URL"], "rpc_url": os.environ["KYA_RPC_URL"]}


def keys() -> Dict[str, str]:
    return {role: os.environ[f"KYA_{role.upper()}_KEY"] for role in ("operator", "agent", "haftungsperson")}


def test_an_agent_registers_with_its_consents_attests_reports_and_takes_them_back() -> None:
    key = keys()
    operator, agent = Account(key["operator"]), Account(key["agent"])
    person = EthAccount.from_key(key["haftungsperson"])
    registration = Registration.of(constitution=CONSTITUTION, capabilities=["summarise", "search"],
                                   operational_scope=SCOPE, haftungsperson=person.address)
    with RelayerClient(urls()["relayer_url"], rpc_url=urls()["rpc_url"]) as client:
        with pytest.raises(ConsentsMissing) as missing:
            client.register(registration, account=operator, wallet_consent=agent)
        plan = missing.value.plan
        [planned] = plan.missing()
        assert (planned.kind, planned.signer, planned.nonce) == ("LiabilityConsent", person.address, 0)
        assert plan.agent_wallet is not None and plan.agent_wallet.signature is not None, "signed here"
        assert client.nonce(operator.address) == 0, "nothing was sent"

        liability = EthAccount.sign_typed_data(key["haftungsperson"], full_message=planned.typed_data).signature
        registered = client.register(registration, account=operator, wallet_consent=agent,
                                     liability_consent=bytes(liability), consent_deadline=plan.deadline)
        assert registered.status == "mined"
        agent_id = registered.agent_id
        assert agent_id is not None
        used = [(event["signer"], event["nonce"]) for event in registered.events if event["event"] == "ConsentUsed"]
        assert used == [(agent.address, 0), (person.address, 0)]

        held = EthAccount.from_key(key["agent"])
        kms = Account(signer=lambda digest: bytes(held.unsafe_sign_hash(digest).signature), address=held.address)
        attested = client.attest(agent_id, account=kms)
        [attestation] = [event for event in attested.events if event["event"] == "ComplianceAttested"]
        reported = client.report_revenue(agent_id, account=agent, **REVENUE)
        [revenue] = [event for event in reported.events if event["event"] == "RevenueReported"]
        assert (revenue["agent_id"], revenue["amount_cents"], revenue["currency"]) == (agent_id, 123_456, "EUR")
        taken_back = client.invalidate_consents(account=agent)
        assert taken_back.next_consent_nonce == 2, "1 after its consent was used, then moved by one"

    async def through_nine() -> Any:
        async with AsyncRelayerClient(urls()["relayer_url"], rpc_url=urls()["rpc_url"]) as client:
            return await client.invalidate_consents(account=agent, through=9)

    through = asyncio.run(through_nine())
    assert through.next_consent_nonce == 10

    with open(os.environ["KYA_E2E_OUT"], "w", encoding="utf-8") as out:
        json.dump({
            "agentId": agent_id,
            "operator": operator.address,
            "agent": agent.address,
            "haftungsperson": person.address,
            "constitution": CONSTITUTION,
            "scope": SCOPE,
            "consentDeadline": plan.deadline,
            "registeredIn": registered.block_number,
            "attestedIn": attested.block_number,
            "attestedAt": attestation["attested_at"],
            "reportedIn": reported.block_number,
            "revenue": REVENUE,
            "nextConsentNonce": through.next_consent_nonce,
            "relays": [outcome.relay_id for outcome in (registered, attested, reported, taken_back, through)],
        }, out)


def test_the_relayers_refusals_are_exceptions_with_its_status_code_and_message() -> None:
    stranger = Account("0x" + secrets.token_hex(32))
    with RelayerClient(urls()["relayer_url"], rpc_url=urls()["rpc_url"]) as client:
        # The registry's simulation refuses it: 500 with its revert reason, nothing sent.
        with pytest.raises(CallReverted) as reverted:
            client.attest(999_999, account=stranger)
        assert (reverted.value.status, reverted.value.code, reverted.value.reason) == (500, "reverted",
                                                                                       "Agent not found")
        assert client.nonce(stranger.address) == 0
        domain = client.domain()
        chain_id, forwarder = domain["chainId"], domain["verifyingContract"]
        data = core.attest_compliance_calldata(999_999)
        registry = client.status()["contracts"]["registry"]
        # Signed at a nonce the forwarder is not at: its verify refuses it.
        ahead: core.ForwardRequest = {"from": stranger.address, "to": registry, "value": 0,
                                      "gas": core.forward_gas(data), "nonce": 5, "data": data}
        signature = stranger.sign_forward_request(ahead, chain_id=chain_id, forwarder=forwarder)
        with pytest.raises(InvalidSignature) as invalid:
            client.submit(ahead, signature, chain_id=chain_id, forwarder=forwarder)
        assert (invalid.value.status, invalid.value.code) == (401, "invalid_signature")
        assert invalid.value.message == "Invalid signature or nonce mismatch"
        # Value sent along: the relayer forwards none.
        paying: core.ForwardRequest = {"from": stranger.address, "to": registry, "value": 1,
                                       "gas": core.forward_gas(data), "nonce": 0, "data": data}
        signature = stranger.sign_forward_request(paying, chain_id=chain_id, forwarder=forwarder)
        with pytest.raises(RequestRefused) as refused:
            client.submit(paying, signature, chain_id=chain_id, forwarder=forwarder)
        assert (refused.value.status, refused.value.code, refused.value.message) == (
            403, "value_transfer", "Value transfers not supported")
