"""A registration's fields, as ``kya register`` takes them: the two hashes (given, or made from
the constitution's text and the capability names by kya-core's rules), the scope, the parent (0:
a root) and the parties. An agent wallet or Haftungsperson left out is the address of the
account that signs its consent, else the sender's, as on the command line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence, Tuple, Union

from kya._core import InvalidInput, capability_hash, checksum_address, constitution_hash
from kya.accounts import Account

if TYPE_CHECKING:
    from kya._core import HexBytes

#: A consent given to ``register``: an account that signs it here, or its signature made
#: elsewhere (``bytes`` or ``0x`` hex, then with the ``consent_deadline`` it was signed for).
ConsentSource = Union[Account, bytes, str, None]


@dataclass(frozen=True)
class Registration:
    constitution_hash: HexBytes
    capability_hash: HexBytes
    operational_scope: str
    #: ``None``: the address of the account given for its consent, else the sender's.
    agent_wallet: Optional[str] = None
    #: ``None``: as ``agent_wallet``. Read only for a root: a child inherits its parent's.
    haftungsperson: Optional[str] = None
    #: 0: a root agent.
    parent_agent_id: int = 0
    self_modifying: bool = False

    @classmethod
    def of(
        cls,
        *,
        constitution: str,
        capabilities: Sequence[str],
        operational_scope: str,
        agent_wallet: Optional[str] = None,
        haftungsperson: Optional[str] = None,
        parent_agent_id: int = 0,
        self_modifying: bool = False,
    ) -> "Registration":
        """The registration of a constitution's text and capability names (``kya register
        --constitution-text ... --capabilities ...``)."""
        return cls(
            constitution_hash=constitution_hash(constitution),
            capability_hash=capability_hash(list(capabilities)),
            operational_scope=operational_scope,
            agent_wallet=agent_wallet,
            haftungsperson=haftungsperson,
            parent_agent_id=parent_agent_id,
            self_modifying=self_modifying,
        )

    def parties(
        self, creator: str, wallet_consent: ConsentSource, liability_consent: ConsentSource
    ) -> Tuple[str, str]:
        """The agent wallet and the Haftungsperson when ``creator`` sends it: as given, else the
        consenting account's address, else the creator's. An account that is not the given
        address's is refused."""
        return (
            _party(self.agent_wallet, "agent_wallet", wallet_consent, creator),
            _party(self.haftungsperson, "haftungsperson", liability_consent, creator),
        )


def _party(given: Optional[str], name: str, consent: ConsentSource, creator: str) -> str:
    account = consent.address if isinstance(consent, Account) else None
    if given is None:
        return account or creator
    address = checksum_address(given)
    if account is not None and account.lower() != address.lower():
        raise InvalidInput(f"the account consenting for {name} is {account}, not the {name} {address}")
    return address
