"""The read API's answers as ``TypedDict``s, with the API's own field names (SPEC.md section 2,
INTERFACE.md sections 2 and 7, docs/change-feed.md): what ``kya.client`` returns and what
``kya.feed`` yields. Timestamps are ISO 8601 strings, ``None`` for a time that is 0 on chain;
addresses are EIP-55."""

from __future__ import annotations

from typing import List, Literal, Optional, Sequence, TypedDict, Union

AgentStatus = Literal["Active", "Suspended", "Revoked", "Terminated"]


class KyaAgent(TypedDict):
    """The reduced agent record of a KYA result."""

    agentId: int
    creator: str
    haftungsperson: str
    agentWallet: str
    operationalScope: str
    status: AgentStatus
    registeredAt: Optional[str]
    lastAttestation: Optional[str]


class KyaResult(TypedDict):
    """``GET /api/v1/kya/:wallet``: ``isCompliant`` means provision; registered but not
    compliant, ask for a renewed attestation; not registered, deny or ask to register."""

    wallet: str
    isRegistered: bool
    isCompliant: bool
    agent: Optional[KyaAgent]
    checkedAt: str


class BatchBlock(TypedDict):
    """The one block a batch read every wallet at (``timestamp`` in Unix seconds)."""

    number: int
    timestamp: int


class KyaBatch(TypedDict):
    """``POST /api/v1/kya/batch``: each wallet's result, in the order asked, at one block."""

    block: BatchBlock
    results: List[KyaResult]


class AgentRecord(TypedDict):
    """The full agent record (SPEC.md section 2)."""

    agentId: int
    creator: str
    haftungsperson: str
    agentWallet: str
    constitutionHash: str
    capabilityHash: str
    operationalScope: str
    parentAgentId: int
    generation: int
    selfModifying: bool
    registeredAt: Optional[str]
    lastAttestation: Optional[str]
    lastRevenueReport: Optional[str]
    status: AgentStatus


class Compliance(TypedDict):
    """The compliance object: compliant is ``isActive`` and ``attestationCurrent``."""

    isActive: bool
    attestationCurrent: bool
    secondsSinceAttestation: int
    childCount: int
    status: AgentStatus


class AgentDetails(TypedDict):
    """``GET /api/v1/agent/:id``: the record, its children's ids and its compliance."""

    agent: AgentRecord
    children: List[int]
    compliance: Compliance


EventType = Literal[
    "agent.registered",
    "agent.status_changed",
    "agent.attested",
    "agent.attestation_expired",
    "agent.revenue_reported",
    "agent.compliance_changed",
    "agent.unregistered",
]


class EventBlock(TypedDict):
    number: int
    hash: str
    time: str


class EventLog(TypedDict):
    transactionHash: str
    logIndex: int


class Standing(TypedDict):
    """The agent's standing after the change, as ``/kya/:wallet`` answers it at that block."""

    isRegistered: bool
    isCompliant: bool
    status: Optional[AgentStatus]


class _ChangeEventFields(TypedDict):
    id: str
    finality: Literal["provisional", "final", "retracted"]
    type: EventType
    agentId: int
    wallet: str
    block: EventBlock
    #: ``None`` for what time or a correction made.
    log: Optional[EventLog]
    standing: Standing


# `from` is a keyword, hence the functional form: read it as ``event["from"]``.
_ChangeEventDetail = TypedDict(
    "_ChangeEventDetail",
    {
        # A final entry: the provisional id it confirms; a retracted one: the id it withdraws.
        "confirms": str,
        "retracts": str,
        # agent.status_changed (statuses) and agent.compliance_changed (booleans).
        "from": Union[AgentStatus, bool],
        "to": Union[AgentStatus, bool],
        # agent.attested.
        "attestedAt": str,
        # agent.attestation_expired.
        "lastAttestation": str,
        "validUntil": str,
    },
    total=False,
)


class ChangeEvent(_ChangeEventFields, _ChangeEventDetail):
    """An entry of the change feed: its ``id`` is the cursor to resume after."""


class ChangesPage(TypedDict):
    """``GET /api/v1/changes``: ``next`` is where the next page starts (the last event this page
    looked at, selected or not; ``None`` while the feed is empty), ``more`` whether the feed holds
    events past it."""

    events: List[ChangeEvent]
    next: Optional[str]
    more: bool


#: A filter's values: one, or several (any of which matches); ``None``: no filter.
FilterValues = Union[str, int, Sequence[Union[str, int]], None]

__all__ = [
    "AgentDetails",
    "AgentRecord",
    "AgentStatus",
    "BatchBlock",
    "ChangeEvent",
    "ChangesPage",
    "Compliance",
    "EventBlock",
    "EventLog",
    "EventType",
    "FilterValues",
    "KyaAgent",
    "KyaBatch",
    "KyaResult",
    "Standing",
]
