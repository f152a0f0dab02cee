//! The answer to an accepted relay, as the checks give it to their client and a standby gives
//! it to its own once the key's holder sent the relay.

use kya_core::api::relayer_view;

use crate::store::{RelayRecord, RelayStatus};

/// The answer to an accepted `POST /relay`: 200 once a transaction is with the node, 202 while
/// the relay is accepted but not sent yet (a retry that arrives in between).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relayed {
    /// Hash, signer, nonce, relay id and status.
    pub body: relayer_view::Relayed,
    /// A transaction is with the node (200), or not yet (202).
    pub sent: bool,
}

impl Relayed {
    /// The answer for `record`.
    pub(crate) fn of(record: &RelayRecord) -> Self {
        Self {
            body: relayer_view::Relayed {
                tx_hash: record.tx_hash,
                from: record.signer,
                nonce: record.forwarder_nonce,
                relay_id: Some(record.relay_id.clone()),
                status: Some(record.status.public()),
            },
            sent: record.status != RelayStatus::Accepted,
        }
    }

    /// The answer for `record` while its transaction is not known to be with the node (its
    /// holder recorded it, but has not had the node's answer): 202 as a relay not sent yet,
    /// status `accepted` and no hash. Read it by its id: it reads `sent` until the node's answer
    /// says otherwise.
    pub(crate) fn not_sent_yet(record: &RelayRecord) -> Self {
        let mut relayed = Self::of(record);
        relayed.body.tx_hash = None;
        relayed.body.status = Some(RelayStatus::Accepted.public());
        relayed.sent = false;
        relayed
    }
}
