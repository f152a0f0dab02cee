//! The gasless relayer's HTTP interface (INTERFACE.md section 3): status, nonces, the EIP-712
//! domain, submitting a signed forward request, and the relay lookups of its lifecycle.

use alloy::primitives::{Address, B256, Bytes, U256};
use kya_core::forward_request::ForwardRequest;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use crate::{Error, Result, http::Service};

/// A client of the relayer at one base URL (`http://127.0.0.1:3001`).
#[derive(Debug, Clone)]
pub struct RelayerClient {
    service: Service,
}

/// `GET /status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayerStatus {
    /// The relayer's paying account.
    #[serde(serialize_with = "kya_core::checksum::serialize")]
    pub relayer: Address,
    /// In ETH, as a decimal string.
    pub balance: String,
    pub balance_wei: String,
    pub chain_id: u64,
    pub daily_gas_budget: GasBudget,
    pub contracts: Contracts,
}

/// The daily gas budget of `/status`, in wei (decimal strings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GasBudget {
    pub limit_wei: String,
    pub used_wei: String,
    pub remaining_wei: String,
    /// Reservations awaiting a receipt (newer relayers only).
    #[serde(default)]
    pub pending_wei: Option<String>,
    pub resets_at: Option<String>,
}

/// The contracts a relayer forwards to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contracts {
    #[serde(serialize_with = "kya_core::checksum::serialize")]
    pub registry: Address,
    #[serde(serialize_with = "kya_core::checksum::serialize")]
    pub forwarder: Address,
}

/// `GET /domain`: the forwarder's EIP-712 domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Domain {
    pub name: String,
    pub version: String,
    pub chain_id: u64,
    #[serde(serialize_with = "kya_core::checksum::serialize")]
    pub verifying_contract: Address,
}

/// The answer of `POST /relay`. Relayers without the relay lifecycle answer only the hash,
/// signer and nonce; `relay_id` and `status` are then `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Submitted {
    pub tx_hash: Option<B256>,
    #[serde(default)]
    pub relay_id: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    /// 202 instead of 200: accepted, but not sent yet.
    #[serde(skip)]
    pub queued: bool,
}

/// A relay as `GET /relay/:id` (and the other lookups) shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayView {
    pub relay_id: String,
    pub status: RelayStatus,
    #[serde(serialize_with = "kya_core::checksum::serialize")]
    pub from: Address,
    #[serde(deserialize_with = "decimal")]
    pub nonce: U256,
    pub tx_hash: Option<B256>,
    #[serde(default)]
    pub previous_tx_hashes: Vec<B256>,
    pub block_number: Option<u64>,
    pub gas_used: Option<String>,
    pub cost_wei: Option<String>,
    pub revert_reason: Option<String>,
    pub error: Option<String>,
    pub created_at: Option<String>,
    pub settled_at: Option<String>,
}

/// Where a relay is in its lifecycle (`docs/relayer.md`); unknown names are kept as they are.
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
    /// A status this client does not know.
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

/// A `uint256` given as a decimal string or a JSON number.
fn decimal<'de, D: Deserializer<'de>>(deserializer: D) -> Result<U256, D::Error> {
    let value = Value::deserialize(deserializer)?;
    kya_core::forward_request::uint(&value, "nonce").map_err(serde::de::Error::custom)
}

#[derive(Deserialize)]
struct NonceAnswer {
    #[serde(deserialize_with = "decimal")]
    nonce: U256,
}

impl RelayerClient {
    /// A client of the relayer at `base_url`.
    pub fn new(base_url: &str) -> Result<Self> {
        Self::with_http(base_url, reqwest::Client::new())
    }

    /// A client sharing an existing `reqwest` client.
    pub fn with_http(base_url: &str, http: reqwest::Client) -> Result<Self> {
        Ok(Self { service: Service::new("relayer", base_url, http)? })
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        self.service.base()
    }

    /// `GET /status`.
    pub async fn status(&self) -> Result<RelayerStatus> {
        self.service.get("/status").await
    }

    /// `GET /nonce/:address`: the forwarder nonce the next request of `address` must carry.
    pub async fn nonce(&self, address: Address) -> Result<U256> {
        Ok(self.service.get::<NonceAnswer>(&format!("/nonce/{address}")).await?.nonce)
    }

    /// `GET /domain`.
    pub async fn domain(&self) -> Result<Domain> {
        self.service.get("/domain").await
    }

    /// `POST /relay` with a signed request.
    pub async fn submit(&self, request: &ForwardRequest, signature: &Bytes) -> Result<Submitted> {
        let body = json!({
            "request": {
                "from": request.from.to_checksum(None),
                "to": request.to.to_checksum(None),
                "value": request.value.to_string(),
                "gas": request.gas.to_string(),
                "nonce": request.nonce.to_string(),
                "deadline": request.deadline.to_string(),
                "data": request.data.to_string(),
            },
            "signature": signature.to_string(),
        });
        let answer = self.service.post::<Submitted>("/relay", &body).await?;
        let mut submitted = answer.body;
        submitted.queued = answer.status == 202;
        if submitted.tx_hash.is_none() && submitted.relay_id.is_none() {
            return Err(Error::Unexpected {
                service: "relayer",
                reason: "POST /relay answered neither a txHash nor a relayId".into(),
            });
        }
        Ok(submitted)
    }

    /// `GET /relay/:id`; `None` when the relayer does not know it.
    pub async fn relay(&self, relay_id: &str) -> Result<Option<RelayView>> {
        if relay_id.is_empty() || !relay_id.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Err(Error::Invalid(format!("invalid relay id {relay_id:?}: expected hex digits")));
        }
        self.service.get_optional(&format!("/relay/{relay_id}")).await
    }

    /// `GET /relay/tx/:hash`: the relay that sent this transaction.
    pub async fn relay_by_hash(&self, hash: B256) -> Result<Option<RelayView>> {
        self.service.get_optional(&format!("/relay/tx/{hash}")).await
    }

    /// `GET /relay/signer/:address/:nonce`: the latest relay of that signed request.
    pub async fn relay_by_request(&self, signer: Address, nonce: U256) -> Result<Option<RelayView>> {
        self.service.get_optional(&format!("/relay/signer/{signer}/{nonce}")).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_views_read_the_lifecycle_shape() {
        let view: RelayView = serde_json::from_value(json!({
            "relayId": "0123456789abcdef0123456789abcdef", "status": "call_failed",
            "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "nonce": "3",
            "txHash": "0x1111111111111111111111111111111111111111111111111111111111111111",
            "previousTxHashes": [], "transactions": [], "relayerNonce": 4, "blockNumber": 12,
            "gasUsed": "51234", "costWei": "100", "reservedWei": "200",
            "revertReason": "Agent not active", "error": null, "deadline": null,
            "createdAt": "2025-01-01T00:00:00.000Z", "sentAt": null, "updatedAt": null, "settledAt": null
        }))
        .unwrap();
        assert_eq!(view.status, RelayStatus::CallFailed);
        assert!(view.status.is_final() && !view.status.succeeded());
        assert_eq!(view.nonce, U256::from(3));
        assert_eq!(view.block_number, Some(12));
        assert_eq!(view.revert_reason.as_deref(), Some("Agent not active"));
        let other: RelayStatus = serde_json::from_value(json!("parked")).unwrap();
        assert_eq!(other, RelayStatus::Other("parked".into()));
        assert!(other.is_final());
        assert!(!RelayStatus::Replaced.is_final());
    }

    #[test]
    fn old_relayers_answer_only_a_hash() {
        let submitted: Submitted = serde_json::from_value(json!({
            "txHash": "0x1111111111111111111111111111111111111111111111111111111111111111",
            "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "nonce": "0"
        }))
        .unwrap();
        assert_eq!(submitted.relay_id, None);
        assert!(submitted.tx_hash.is_some());
    }
}
