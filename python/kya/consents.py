"""A registration's consents as an agent gathers them (INTERFACE.md section 5), as ``kya
register`` does: which ones it needs at the parties' current nonces (``kya._core.consents_needed``),
signed by accounts at hand or attached as signatures made elsewhere (a wallet's
``eth_signTypedData_v4`` of the typed data), and, while some are missing, an exception carrying
what their signers must sign, with nothing sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Literal, Optional, Tuple

from kya._core import InvalidInput, KyaError, consent_digest, consent_typed_data, consents_needed, recover_signer
from kya.accounts import Account

if TYPE_CHECKING:
    from kya._core import Consent, HexBytes

ConsentKind = Literal["AgentWalletConsent", "LiabilityConsent"]


@dataclass
class PlannedConsent:
    """One consent: what its signer signs (``digest``, or ``typed_data`` in a wallet), and the
    signature once there is one."""

    consent: Consent
    digest: bytes
    typed_data: Dict[str, Any]
    signature: Optional[bytes] = None

    @property
    def kind(self) -> ConsentKind:
        return self.consent["kind"]

    @property
    def signer(self) -> str:
        return self.consent["signer"]

    @property
    def nonce(self) -> int:
        return self.consent["nonce"]


@dataclass
class ConsentPlan:
    """The consents one registration needs when ``creator`` sends it: valid for the
    registration ``creator`` sends next with them, until ``deadline`` (Unix seconds) or until
    another consent of the same signer is used first."""

    chain_id: int
    registry: str
    creator: str
    deadline: int
    agent_wallet: Optional[PlannedConsent] = None
    liability: Optional[PlannedConsent] = None

    @classmethod
    def new(
        cls,
        *,
        chain_id: int,
        registry: str,
        creator: str,
        agent_wallet: str,
        haftungsperson: str,
        parent_agent_id: int,
        nonces: Tuple[int, int],
        deadline: int,
    ) -> "ConsentPlan":
        """The consents needed at ``nonces`` (the agent wallet's and the Haftungsperson's
        ``consentNonce``), none signed yet."""
        needed = consents_needed(
            creator=creator,
            agent_wallet=agent_wallet,
            haftungsperson=haftungsperson,
            parent_agent_id=parent_agent_id,
            wallet_nonce=nonces[0],
            haftungsperson_nonce=nonces[1],
            deadline=deadline,
        )

        def planned(consent: Optional[Consent]) -> Optional[PlannedConsent]:
            if consent is None:
                return None
            return PlannedConsent(
                consent=consent,
                digest=consent_digest(consent, chain_id=chain_id, registry=registry),
                typed_data=consent_typed_data(consent, chain_id=chain_id, registry=registry),
            )

        return cls(
            chain_id=chain_id,
            registry=registry,
            creator=creator,
            deadline=deadline,
            agent_wallet=planned(needed["agent_wallet"]),
            liability=planned(needed["liability"]),
        )

    def consents(self) -> Iterator[PlannedConsent]:
        """Every consent needed, the wallet's first."""
        for planned in (self.agent_wallet, self.liability):
            if planned is not None:
                yield planned

    def missing(self) -> List[PlannedConsent]:
        """The consents still without a signature."""
        return [planned for planned in self.consents() if planned.signature is None]

    def is_empty(self) -> bool:
        """True for a self-registration: no consent needed."""
        return self.agent_wallet is None and self.liability is None

    def sign_with(self, account: Account) -> int:
        """Signs, with ``account``, every consent still unsigned whose signer it is; how many."""
        signed = 0
        for planned in self.missing():
            if planned.signer.lower() == account.address.lower():
                planned.signature = account.sign_consent(
                    planned.consent, chain_id=self.chain_id, registry=self.registry
                )
                signed += 1
        return signed

    def attach(self, kind: ConsentKind, signature: HexBytes) -> Optional[str]:
        """Attaches a signature of the ``kind`` consent made elsewhere; returns whom it recovers
        to as an ordinary key's signature (``None``: no key's). One that is not the signer's may
        still be a contract wallet's (ERC-1271), which only the chain can tell."""
        planned = self.agent_wallet if kind == "AgentWalletConsent" else self.liability
        if planned is None:
            raise InvalidInput(
                "this registration needs no agent wallet consent: its sender is the agent wallet"
                if kind == "AgentWalletConsent"
                else "this registration needs no liability consent: its sender is the Haftungsperson, "
                "or it registers a child (which inherits its parent's)"
            )
        signature_bytes = _bytes(signature)
        if not signature_bytes:
            raise InvalidInput("a consent signature must not be empty")
        planned.signature = signature_bytes
        return recover_signer(planned.digest, signature_bytes)

    def signatures(self) -> Tuple[Optional[bytes], Optional[bytes]]:
        """The agent wallet's and the Haftungsperson's signatures for ``registerAgentWithConsent``
        (``None`` where the sender is that party); ``ConsentsMissing`` while any is missing."""
        if self.missing():
            raise ConsentsMissing(self)
        wallet = self.agent_wallet.signature if self.agent_wallet is not None else None
        liability = self.liability.signature if self.liability is not None else None
        return wallet, liability


class ConsentsMissing(KyaError):
    """A registration lacks consents its parties must give; nothing was sent. ``plan`` holds
    what each missing signer signs (``digest``, ``typed_data``) and the ``deadline`` to give
    back with the signatures (``register(..., consent_deadline=plan.deadline)``)."""

    def __init__(self, plan: ConsentPlan) -> None:
        self.plan = plan
        named = " and ".join(_described(planned) for planned in plan.missing())
        super().__init__(f"consent missing: {named}; nothing was sent")


def _described(planned: PlannedConsent) -> str:
    party = "agent wallet" if planned.kind == "AgentWalletConsent" else "Haftungsperson"
    return f"the {party} {planned.signer}'s {planned.kind}"


def _bytes(signature: HexBytes) -> bytes:
    if isinstance(signature, str):
        text = signature.strip()
        if not text.startswith("0x"):
            raise InvalidInput("a consent signature must be bytes or 0x hex")
        try:
            return bytes.fromhex(text[2:])
        except ValueError as error:
            raise InvalidInput("a consent signature must be bytes or 0x hex") from error
    return bytes(signature)
