"""The relayer's answers as a flow returns them, typed with the relayer's own field names
(docs/relayer.md, INTERFACE.md section 3): ``GET /status``, ``/domain``, ``POST /relay`` and the
relay lookups, as the JSON came; and ``Outcome``, what one write came to: the relay as it
settled and the registry's events of its transaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Optional, TypedDict

if TYPE_CHECKING:
    from kya._core import RegistryEvent

#: The answer of ``POST /relay``: 200 once sent, 202 while it waits to be (``txHash`` then
#: ``None``). ``from`` is a keyword, hence the functional form.
Relayed = TypedDict(
    "Relayed",
    {"txHash": Optional[str], "from": str, "nonce": str, "relayId": str, "status": str},
)


class SentTransaction(TypedDict):
    txHash: str
    #: ``relay`` (the forwarder's ``execute``) or ``cancel``.
    kind: str
    maxFeePerGas: str
    maxPriorityFeePerGas: str
    sentAt: str


#: A relay as ``GET /relay/:id`` shows it; ``status`` one of ``accepted``, ``sent``,
#: ``replaced``, ``mined``, ``call_failed``, ``dropped``, ``expired``, ``reverted``,
#: ``executed``, ``failed``.
RelayView = TypedDict(
    "RelayView",
    {
        "relayId": str,
        "status": str,
        "from": str,
        "nonce": str,
        "txHash": Optional[str],
        "previousTxHashes": List[str],
        "transactions": List[SentTransaction],
        "relayerNonce": Optional[int],
        "blockNumber": Optional[int],
        "gasUsed": Optional[str],
        "costWei": Optional[str],
        "reservedWei": Optional[str],
        "revertReason": Optional[str],
        "error": Optional[str],
        "deadline": Optional[int],
        "createdAt": Optional[str],
        "sentAt": Optional[str],
        "updatedAt": Optional[str],
        "settledAt": Optional[str],
    },
)


class GasBudget(TypedDict):
    limitWei: str
    usedWei: str
    remainingWei: str
    pendingWei: str
    resetsAt: Optional[str]
    openWei: str
    nextSliceAt: Optional[str]


class Contracts(TypedDict):
    registry: str
    forwarder: str


class RelayerStatus(TypedDict):
    """``GET /status`` (its ``lanes`` left untyped: an operator's view)."""

    relayer: str
    balance: str
    balanceWei: str
    chainId: int
    dailyGasBudget: GasBudget
    contracts: Contracts


class Domain(TypedDict):
    """``GET /domain``: the forwarder's EIP-712 domain."""

    name: str
    version: str
    chainId: int
    verifyingContract: str


#: Where a relay's status stops changing.
FINAL_STATUSES = frozenset({"mined", "call_failed", "dropped", "expired", "reverted", "executed", "failed"})
#: The statuses of a relay whose registry call ran and succeeded.
SUCCEEDED_STATUSES = frozenset({"mined", "executed"})


@dataclass
class Outcome:
    """What one write came to: the relay as it settled, and, when the client has an RPC URL,
    the registry's events of its transaction (``AgentRegistered``, ``ComplianceAttested``,
    ``ConsentUsed``, ...)."""

    relay: RelayView
    events: List[RegistryEvent] = field(default_factory=list)

    @property
    def relay_id(self) -> str:
        return self.relay["relayId"]

    @property
    def status(self) -> str:
        return self.relay["status"]

    @property
    def tx_hash(self) -> Optional[str]:
        return self.relay["txHash"]

    @property
    def block_number(self) -> Optional[int]:
        return self.relay["blockNumber"]

    @property
    def agent_id(self) -> Optional[int]:
        """The new agent's id, for a registration (from its ``AgentRegistered``)."""
        for event in self.events:
            if event["event"] == "AgentRegistered":
                return event["agent_id"]
        return None

    @property
    def next_consent_nonce(self) -> Optional[int]:
        """The signer's consent nonce after ``invalidateConsents``(``Through``)."""
        for event in self.events:
            if event["event"] == "ConsentsInvalidated":
                return event["next_nonce"]
        return None
