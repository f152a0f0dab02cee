"""An agent's writes through the gasless relayer, paying no gas: an operator registers the agent
with the agent wallet's consent (and a Haftungsperson's, signed elsewhere from its typed data
when no key is at hand), then the agent attests, reports revenue and takes back the consents it
may have signed ahead.

    RELAYER_URL=http://127.0.0.1:3001 RPC_URL=http://127.0.0.1:8545 \\
    OPERATOR_PRIVATE_KEY=0x... AGENT_PRIVATE_KEY=0x... python relayer_agent.py
"""

from __future__ import annotations

import json
import os
import sys
import time

from kya.relayer import Account, ConsentsMissing, RelayerClient, RelayerError, Registration


def main() -> int:
    operator = Account(os.environ["OPERATOR_PRIVATE_KEY"])
    agent = Account(os.environ["AGENT_PRIVATE_KEY"])
    registration = Registration.of(
        constitution="Be honest. Cite sources.",
        capabilities=["search", "summarise"],
        operational_scope="summarises research papers",
        haftungsperson=os.environ.get("HAFTUNGSPERSON", operator.address),
    )
    with RelayerClient(os.environ["RELAYER_URL"], rpc_url=os.environ["RPC_URL"]) as relayer:
        try:
            registered = relayer.register(registration, account=operator, wallet_consent=agent)
        except ConsentsMissing as missing:
            # The Haftungsperson's wallet signs this typed data (eth_signTypedData_v4); run again
            # with its signature as liability_consent and consent_deadline=missing.plan.deadline.
            for planned in missing.plan.missing():
                print(json.dumps(planned.typed_data, indent=2))
            return 5
        except RelayerError as refused:
            print(f"the relayer refused: {refused.code}: {refused.message}", file=sys.stderr)
            return 1
        agent_id = registered.agent_id
        assert agent_id is not None, "an RPC URL gives the registry's events"
        print(f"agent {agent_id} registered in block {registered.block_number}")
        relayer.attest(agent_id, account=agent)
        now = int(time.time())
        relayer.report_revenue(agent_id, account=agent, amount_cents=1250, currency="EUR", category="api",
                               period_start=now - 86_400, period_end=now)
        taken_back = relayer.invalidate_consents(account=agent)
        print(f"consents below nonce {taken_back.next_consent_nonce} taken back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
