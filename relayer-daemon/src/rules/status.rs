//! Where a relay stands, and how a mined one ended: the one list of statuses, with the
//! predicates the pipeline, the followers and the store's SQL sets are written from. Pure values:
//! the store keeps them as [`RelayStatus::as_str`].

use kya_core::api::relayer_view::RelayStatus as PublicStatus;

use crate::error::{Error, Result};

/// Where a relay stands. Stored as [`RelayStatus::as_str`]; clients see [`RelayStatus::public`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelayStatus {
    /// Checked and reserved for; not sent yet.
    Accepted,
    /// Its transaction is with the node, not mined yet.
    Sent,
    /// It was stuck and is now sent again at the same relayer nonce with higher fees.
    Replaced,
    /// It was stuck past its deadline or the fee cap: a zero-value self-transfer at its relayer
    /// nonce is on its way to cancel it. Clients read `expired`; should the relay's own
    /// transaction win the race, it ends `mined` all the same.
    Cancelling,
    /// Mined, and the registry call succeeded.
    Mined,
    /// Mined, but the registry call inside `execute` failed: gas paid, request nonce used up.
    CallFailed,
    /// Mined, but the transaction itself failed (the forwarder reverted, or it ran out of gas).
    Reverted,
    /// The request ran on chain with no receipt of ours to show for it: worst case charged.
    Executed,
    /// Never sent: the node refused it; the reservation was released.
    Failed,
    /// It will never be mined: reservation released, the request may be relayed again.
    Dropped,
    /// Its relayer nonce was cancelled: the request never ran, and may be signed afresh.
    Expired,
}

impl RelayStatus {
    /// Every status: the one list the store's SQL sets are written from
    /// (the store's SQL sets) and its indexes are tested against.
    pub const ALL: [Self; 11] = [
        Self::Accepted,
        Self::Sent,
        Self::Replaced,
        Self::Cancelling,
        Self::Mined,
        Self::CallFailed,
        Self::Reverted,
        Self::Executed,
        Self::Failed,
        Self::Dropped,
        Self::Expired,
    ];

    /// The text kept in the store.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Sent => "sent",
            Self::Replaced => "replaced",
            Self::Cancelling => "cancelling",
            Self::Mined => "mined",
            Self::CallFailed => "call_failed",
            Self::Reverted => "reverted",
            Self::Executed => "executed",
            Self::Failed => "failed",
            Self::Dropped => "dropped",
            Self::Expired => "expired",
        }
    }

    /// The status `GET /relay/:id` reports (INTERFACE.md section 3): a relay being cancelled
    /// already reads `expired`.
    pub const fn public(self) -> PublicStatus {
        match self {
            Self::Accepted => PublicStatus::Accepted,
            Self::Sent => PublicStatus::Sent,
            Self::Replaced => PublicStatus::Replaced,
            Self::Cancelling | Self::Expired => PublicStatus::Expired,
            Self::Mined => PublicStatus::Mined,
            Self::CallFailed => PublicStatus::CallFailed,
            Self::Reverted => PublicStatus::Reverted,
            Self::Executed => PublicStatus::Executed,
            Self::Failed => PublicStatus::Failed,
            Self::Dropped => PublicStatus::Dropped,
        }
    }

    /// Still waiting for the chain (the reconciler's and the follower's business).
    pub const fn is_open(self) -> bool {
        matches!(self, Self::Accepted) || self.is_with_the_node()
    }

    /// Its transaction is with the node (sent, replaced or being cancelled): the follower's.
    pub const fn is_with_the_node(self) -> bool {
        matches!(self, Self::Sent | Self::Replaced | Self::Cancelling)
    }

    /// A relay that keeps any other relay of its (signer, forwarder nonce) out of the store (the
    /// statuses of the unique index `relays_live_request_v4`, both engines; their tests check it),
    /// and that a retry of the same signed request is answered with rather than relayed again:
    /// the request is on its way or ran. `call_failed` is one: its request ran (the registry call
    /// inside failed), its forwarder nonce is used up, as `mined`'s and `executed`'s are. Dropped,
    /// failed, reverted and expired relays never ran, so their request may be relayed again.
    pub const fn is_live(self) -> bool {
        self.is_open() || matches!(self, Self::Mined | Self::CallFailed | Self::Executed)
    }

    pub(crate) fn parse(text: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
            .ok_or_else(|| Error::StoreCorrupt(format!("unknown relay status {text:?}")))
    }
}

/// How a mined relay ended, from its receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The transaction succeeded and the forwarder's call of the registry did too.
    Mined,
    /// The transaction itself failed (the forwarder reverted, or it ran out of gas).
    Reverted,
    /// The transaction succeeded but the registry call inside it reverted (`Executed` with
    /// `success` false): the request's nonce is used up and the gas paid.
    CallFailed,
    /// The cancellation (a self-transfer at the relay's relayer nonce) was mined.
    Cancelled,
}

impl Outcome {
    /// The relay's status after this outcome.
    pub const fn status(self) -> RelayStatus {
        match self {
            Self::Mined => RelayStatus::Mined,
            Self::Reverted => RelayStatus::Reverted,
            Self::CallFailed => RelayStatus::CallFailed,
            Self::Cancelled => RelayStatus::Expired,
        }
    }
}
