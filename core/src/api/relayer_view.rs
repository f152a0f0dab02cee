//! The gasless relayer's answers (INTERFACE.md section 3, `relayer-daemon/openapi.json`): one
//! definition for the daemon that writes them and for kya-client that reads them.
//!
//! Written, every field is present (`null` where it has no value), amounts and nonces are
//! decimal strings (they pass `u64`, which a JavaScript number cannot hold exactly), addresses
//! EIP-55 and hashes lowercase hex. Read, a nonce or amount may also be a JSON number, and the
//! fields relayers before the relay lifecycle did not send are optional.

use alloy_primitives::{Address, B256, U256};
use serde::{Deserialize, Serialize};

/// `GET /status`: the paying accounts (the first in `relayer`, every one in `lanes`), their
/// balances and the day's gas budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayerStatus {
    /// The relayer's paying account: its first key's.
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub relayer: Address,
    /// That key's balance in ETH, as a decimal string (`"1.5"`).
    pub balance: String,
    #[serde(with = "decimal")]
    pub balance_wei: U256,
    pub chain_id: u64,
    pub daily_gas_budget: GasBudget,
    pub contracts: Contracts,
    /// Every key of the pool (one nonce lane each), in the configured order (relayers before
    /// the key pool: absent, read as empty).
    #[serde(default)]
    pub lanes: Vec<LaneStatus>,
}

/// One key of `/status`'s pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaneStatus {
    /// The key's account.
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub address: Address,
    /// In ETH, as a decimal string.
    pub balance: String,
    #[serde(with = "decimal")]
    pub balance_wei: U256,
    /// Below the relayer's minimum balance: no new relay goes to this key.
    pub below_min_balance: bool,
    /// Relays on this key not yet ended (accepted, sent, replaced, being cancelled).
    pub depth: u64,
    /// The daemon whose lease lets it send on this key (its `RELAYER_ID`); `null` while no daemon
    /// holds the key (its holder stopped, or died and its lease has not yet run out).
    pub holder: Option<String>,
}

/// The daily gas budget of `/status`, in wei.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GasBudget {
    #[serde(with = "decimal")]
    pub limit_wei: U256,
    /// Paid today, plus what is reserved for relays awaiting a receipt.
    #[serde(with = "decimal")]
    pub used_wei: U256,
    #[serde(with = "decimal")]
    pub remaining_wei: U256,
    /// The reserved part of `used_wei` (relayers before the relay lifecycle: absent).
    #[serde(default, with = "optional_decimal")]
    pub pending_wei: Option<U256>,
    /// When the day's spending is forgotten (ISO 8601); `null` until something is spent.
    pub resets_at: Option<String>,
    /// What may be spent before the next slice opens: the slices opened so far (what earlier
    /// ones left unspent carried over) less `usedWei` (relayers before pacing: absent).
    #[serde(default, with = "optional_decimal")]
    pub open_wei: Option<U256>,
    /// When the next slice of the budget opens (ISO 8601); `null` while no window runs, in its
    /// last slice, or without pacing (relayers before pacing: absent).
    #[serde(default)]
    pub next_slice_at: Option<String>,
}

/// The contracts a relayer forwards to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contracts {
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub registry: Address,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub forwarder: Address,
}

/// `GET /nonce/:address`: the forwarder nonce the next request of `address` must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NonceView {
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub address: Address,
    #[serde(with = "decimal")]
    pub nonce: U256,
}

/// `GET /domain`: the forwarder's EIP-712 domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Domain {
    pub name: String,
    pub version: String,
    pub chain_id: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub verifying_contract: Address,
}

/// The answer of `POST /relay`: 200 once its transaction is sent, 202 while it waits to be.
/// Relayers before the relay lifecycle answer only the hash, signer and nonce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Relayed {
    /// `null` while the relay is `accepted` and not sent.
    pub tx_hash: Option<B256>,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub from: Address,
    #[serde(with = "decimal")]
    pub nonce: U256,
    #[serde(default)]
    pub relay_id: Option<String>,
    #[serde(default)]
    pub status: Option<RelayStatus>,
}

/// A relay as `GET /relay/:id` (and the other lookups) shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayView {
    pub relay_id: String,
    pub status: RelayStatus,
    /// The request's signer.
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub from: Address,
    /// The request's forwarder nonce.
    #[serde(with = "decimal")]
    pub nonce: U256,
    /// The current transaction: the latest sent, or the one mined.
    pub tx_hash: Option<B256>,
    /// The relay's other transactions (replaced, or the cancellation that lost).
    #[serde(default)]
    pub previous_tx_hashes: Vec<B256>,
    /// Every transaction sent for it, oldest first.
    #[serde(default)]
    pub transactions: Vec<SentTransaction>,
    /// The relayer account's nonce its transactions use.
    #[serde(default)]
    pub relayer_nonce: Option<u64>,
    #[serde(default)]
    pub block_number: Option<u64>,
    #[serde(default, with = "optional_decimal")]
    pub gas_used: Option<U256>,
    /// `gasUsed × effectiveGasPrice`, once settled.
    #[serde(default, with = "optional_decimal")]
    pub cost_wei: Option<U256>,
    /// What the budget holds for it (the worst case until settled).
    #[serde(default, with = "optional_decimal")]
    pub reserved_wei: Option<U256>,
    /// The registry's revert reason, for `call_failed`.
    #[serde(default)]
    pub revert_reason: Option<String>,
    /// Why it was dropped, failed or expired.
    #[serde(default)]
    pub error: Option<String>,
    /// The request's deadline (Unix seconds); `null`: none.
    #[serde(default)]
    pub deadline: Option<u64>,
    /// ISO 8601, like the times below (this relayer always writes it).
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub sent_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub settled_at: Option<String>,
}

/// A webhook delivery's body: one change of a relay's status, with the relay as the lookups
/// showed it right after the change (`docs/relayer.md`, Webhooks). The same event (same `id`,
/// same bytes) is delivered again until the receiver answers 2xx.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayEvent {
    /// Unique per event (`evt_` and 32 hex digits); also the `webhook-id` header.
    pub id: String,
    /// `relay.` and the relay's status: `relay.accepted`, `relay.sent`, `relay.mined`, …
    #[serde(rename = "type")]
    pub event_type: String,
    /// When the change happened (ISO 8601): the relay's `updatedAt`.
    pub timestamp: String,
    /// The event's place among its relay's events, from 1: a receiver that sees a number twice
    /// has a repeated delivery, one below the last it saw a replay.
    pub sequence: u64,
    /// The relay after the change.
    pub data: RelayView,
}

/// One transaction sent for a relay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentTransaction {
    pub tx_hash: B256,
    /// `relay` (the forwarder's `execute`) or `cancel` (a zero-value self-transfer).
    pub kind: String,
    #[serde(with = "decimal")]
    pub max_fee_per_gas: U256,
    #[serde(with = "decimal")]
    pub max_priority_fee_per_gas: U256,
    pub sent_at: String,
}

/// Where a relay is in its lifecycle (`docs/relayer.md`). Read, a name this version does not
/// know is kept as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelayStatus {
    /// Checked and paid for; not sent yet.
    Accepted,
    /// Its transaction is with the node.
    Sent,
    /// Stuck, and sent again with higher fees.
    Replaced,
    /// Mined, and the registry call succeeded.
    Mined,
    /// Mined, but the registry call inside failed (`revert_reason` says why).
    CallFailed,
    /// Will never be mined; the same request may be relayed again.
    Dropped,
    /// Stuck past its deadline or the fee cap; cancelled, never ran.
    Expired,
    /// The transaction itself reverted.
    Reverted,
    /// Ran, without a receipt of the relayer's own.
    Executed,
    /// The node refused the send.
    Failed,
    /// A status this version does not know.
    #[serde(untagged)]
    Other(String),
}

impl RelayStatus {
    /// Settled: nothing will change any more.
    pub fn is_final(&self) -> bool {
        !matches!(self, Self::Accepted | Self::Sent | Self::Replaced)
    }

    /// The registry call ran and succeeded.
    pub fn succeeded(&self) -> bool {
        matches!(self, Self::Mined | Self::Executed)
    }

    /// The name as the relayer writes it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Accepted => "accepted",
            Self::Sent => "sent",
            Self::Replaced => "replaced",
            Self::Mined => "mined",
            Self::CallFailed => "call_failed",
            Self::Dropped => "dropped",
            Self::Expired => "expired",
            Self::Reverted => "reverted",
            Self::Executed => "executed",
            Self::Failed => "failed",
            Self::Other(name) => name,
        }
    }
}

/// A `uint256` written as a decimal string; read from a decimal (or `0x`) string or a JSON
/// number.
pub mod decimal {
    use alloy_primitives::U256;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(value: &U256, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<U256, D::Error> {
        let value = Value::deserialize(deserializer)?;
        crate::registry::forward_request::uint(&value, "the number").map_err(D::Error::custom)
    }
}

/// [`decimal`], or `null`.
pub mod optional_decimal {
    use alloy_primitives::U256;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(value: &Option<U256>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => serializer.collect_str(value),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<U256>, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Null => Ok(None),
            value => crate::registry::forward_request::uint(&value, "the number")
                .map(Some)
                .map_err(D::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SIGNER: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    const HASH: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";

    fn relay() -> RelayView {
        RelayView {
            relay_id: "0123456789abcdef0123456789abcdef".into(),
            status: RelayStatus::CallFailed,
            from: SIGNER.parse().unwrap(),
            nonce: U256::from(3),
            tx_hash: Some(HASH.parse().unwrap()),
            previous_tx_hashes: vec![],
            transactions: vec![SentTransaction {
                tx_hash: HASH.parse().unwrap(),
                kind: "relay".into(),
                max_fee_per_gas: U256::from(2_000_000_000u64),
                max_priority_fee_per_gas: U256::from(1_000_000_000u64),
                sent_at: "2025-01-01T00:00:01.000Z".into(),
            }],
            relayer_nonce: Some(4),
            block_number: Some(12),
            gas_used: Some(U256::from(51_234)),
            cost_wei: Some(U256::from(100)),
            reserved_wei: Some(U256::MAX),
            revert_reason: Some("Agent not active".into()),
            error: None,
            deadline: None,
            created_at: Some("2025-01-01T00:00:00.000Z".into()),
            sent_at: Some("2025-01-01T00:00:01.000Z".into()),
            updated_at: None,
            settled_at: None,
        }
    }

    /// Every field present, wei as exact decimal strings, the signer checksummed.
    #[test]
    fn a_relay_is_written_as_the_interface_says() {
        let written = serde_json::to_value(relay()).unwrap();
        assert_eq!(
            written,
            json!({
                "relayId": "0123456789abcdef0123456789abcdef", "status": "call_failed",
                "from": SIGNER, "nonce": "3", "txHash": HASH, "previousTxHashes": [],
                "transactions": [{
                    "txHash": HASH, "kind": "relay", "maxFeePerGas": "2000000000",
                    "maxPriorityFeePerGas": "1000000000", "sentAt": "2025-01-01T00:00:01.000Z"
                }],
                "relayerNonce": 4, "blockNumber": 12, "gasUsed": "51234", "costWei": "100",
                "reservedWei": U256::MAX.to_string(), "revertReason": "Agent not active",
                "error": null, "deadline": null, "createdAt": "2025-01-01T00:00:00.000Z",
                "sentAt": "2025-01-01T00:00:01.000Z", "updatedAt": null, "settledAt": null
            })
        );
        assert_eq!(serde_json::from_value::<RelayView>(written).unwrap(), relay());
    }

    /// Another relayer may leave out what it does not track: only the id, status, signer and
    /// nonce are needed.
    #[test]
    fn a_relay_with_only_its_identity_reads() {
        let view: RelayView = serde_json::from_value(json!({
            "relayId": "0123456789abcdef0123456789abcdef", "status": "sent", "from": SIGNER, "nonce": 3,
            "txHash": null
        }))
        .unwrap();
        assert_eq!((view.status, view.nonce, view.created_at), (RelayStatus::Sent, U256::from(3), None));
        assert_eq!((view.gas_used, view.cost_wei, view.block_number), (None, None, None));
    }

    #[test]
    fn statuses_read_and_tell_whether_they_are_final() {
        let other: RelayStatus = serde_json::from_value(json!("parked")).unwrap();
        assert_eq!(other, RelayStatus::Other("parked".into()));
        assert!(other.is_final());
        assert!(!RelayStatus::Replaced.is_final() && RelayStatus::Expired.is_final());
        assert!(RelayStatus::Executed.succeeded() && !RelayStatus::CallFailed.succeeded());
        assert_eq!(serde_json::to_value(RelayStatus::CallFailed).unwrap(), "call_failed");
        assert_eq!(RelayStatus::CallFailed.as_str(), "call_failed");
    }

    /// A relayer without the relay lifecycle answers `POST /relay` with the hash, signer and
    /// nonce only, the nonce as a number.
    #[test]
    fn an_answer_of_an_older_relayer_reads() {
        let relayed: Relayed =
            serde_json::from_value(json!({ "txHash": HASH, "from": SIGNER, "nonce": 7 })).unwrap();
        assert_eq!((relayed.relay_id, relayed.status), (None, None));
        assert_eq!(relayed.nonce, U256::from(7));
        assert!(relayed.tx_hash.is_some());
    }

    #[test]
    fn wei_past_u64_reads_exactly_and_garbage_is_refused() {
        let budget: GasBudget = serde_json::from_value(json!({
            "limitWei": "340282366920938463463374607431768211456", "usedWei": "0",
            "remainingWei": "0x10", "resetsAt": null
        }))
        .unwrap();
        assert_eq!(budget.limit_wei, U256::from(u128::MAX) + U256::from(1));
        assert_eq!((budget.remaining_wei, budget.pending_wei), (U256::from(16), None));
        assert_eq!((budget.open_wei, budget.next_slice_at), (None, None), "a relayer before pacing");
        let paced: GasBudget = serde_json::from_value(json!({
            "limitWei": "24", "usedWei": "1", "remainingWei": "23", "pendingWei": "0",
            "resetsAt": "2026-05-02T12:00:00.000Z", "openWei": "1", "nextSliceAt": "2026-05-01T13:00:00.000Z"
        }))
        .unwrap();
        assert_eq!(paced.open_wei, Some(U256::from(1)));
        assert_eq!(serde_json::to_value(&paced).unwrap()["nextSliceAt"], "2026-05-01T13:00:00.000Z");
        let refused = serde_json::from_value::<NonceView>(json!({ "address": SIGNER, "nonce": "-1" }));
        assert!(refused.unwrap_err().to_string().contains("non-negative integer"), "a clear reason");
    }
}
