//! The gasless relayer's HTTP interface (INTERFACE.md section 3): status, nonces, the EIP-712
//! domain, submitting a signed forward request, and the relay lookups of its lifecycle.

use alloy::primitives::{Address, B256, Bytes, U256};
pub use kya_core::api::relayer_view::{
    Contracts, Domain, GasBudget, LaneStatus, NonceView, RelayStatus, RelayView, Relayed, RelayerStatus,
    SentTransaction,
};
use kya_core::registry::forward_request::ForwardRequest;
use serde_json::json;

use crate::{Error, Result, http::Service};

/// A client of the relayer at one base URL (`http://127.0.0.1:3001`).
#[derive(Debug, Clone)]
pub struct RelayerClient {
    service: Service,
}

/// The answer of `POST /relay`, and how it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// Hash, signer and nonce; relay id and status from relayers with the relay lifecycle.
    pub relayed: Relayed,
    /// 202 instead of 200: accepted, but not sent yet.
    pub queued: bool,
}

impl RelayerClient {
    /// A client of the relayer at `base_url`.
    pub fn new(base_url: &str) -> Result<Self> {
        crate::install_crypto_provider();
        Self::with_http(base_url, crate::http::default_http())
    }

    /// A client sharing an existing `reqwest` client (built after
    /// [`crate::install_crypto_provider`]).
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
        Ok(self.service.get::<NonceView>(&format!("/nonce/{address}")).await?.nonce)
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
        let answer = self.service.post::<Relayed>("/relay", &body).await?;
        let submitted = Submitted { relayed: answer.body, queued: answer.status == 202 };
        if submitted.relayed.tx_hash.is_none() && submitted.relayed.relay_id.is_none() {
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

    /// The reading of the answers themselves is tested where they are defined
    /// (`kya_core::api::relayer_view`); here, what the client adds to them.
    #[tokio::test]
    async fn a_relay_id_must_be_hex_before_anything_is_sent() {
        // Port 9 (discard): were anything sent, the error would be a connection failure.
        let client = RelayerClient::new("http://127.0.0.1:9").unwrap();
        let refused = client.relay("not-hex").await;
        assert!(matches!(refused, Err(Error::Invalid(reason)) if reason.contains("expected hex digits")));
    }
}
