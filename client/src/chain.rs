//! The chain itself, through a JSON-RPC endpoint: receipts of relayed transactions (for
//! relayers without relay lookups, and for the registry's events), and direct writes paid from
//! the signer's own gas.

use std::time::{Duration, Instant};

use alloy::{
    network::{EthereumWallet, TransactionBuilder},
    primitives::{Address, B256, Bytes},
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::types::{TransactionReceipt, TransactionRequest},
    signers::local::PrivateKeySigner,
    transports::{RpcError, TransportErrorKind},
};
use kya_core::revert::RevertReason;

use crate::{Error, Result};

/// How often a receipt is asked for while waiting.
const POLL: Duration = Duration::from_millis(250);

/// A JSON-RPC endpoint.
#[derive(Debug, Clone)]
pub struct Rpc {
    provider: DynProvider,
    url: String,
}

impl Rpc {
    /// Connects (lazily: nothing is sent yet) to `url`.
    pub fn new(url: &str) -> Result<Self> {
        crate::install_crypto_provider();
        let parsed = url
            .trim()
            .parse()
            .map_err(|_| Error::Invalid(format!("RPC URL {} is not a URL", kya_core::redact::url(url))))?;
        Ok(Self {
            provider: ProviderBuilder::new().connect_http(parsed).erased(),
            url: url.trim().to_owned(),
        })
    }

    /// The URL without credentials, for messages.
    pub fn shown_url(&self) -> String {
        kya_core::redact::url(&self.url)
    }

    /// The chain id the node reports.
    pub async fn chain_id(&self) -> Result<u64> {
        self.provider.get_chain_id().await.map_err(|error| rpc_error(&error))
    }

    /// Waits for the receipt of `hash`, up to `timeout`.
    pub async fn receipt(&self, hash: B256, timeout: Duration) -> Result<TransactionReceipt> {
        let started = Instant::now();
        loop {
            match self.provider.get_transaction_receipt(hash).await {
                Ok(Some(receipt)) => return Ok(receipt),
                Ok(None) => {}
                Err(error) => return Err(rpc_error(&error)),
            }
            if started.elapsed() >= timeout {
                return Err(Error::Timeout {
                    what: format!("transaction {hash}"),
                    seconds: timeout.as_secs(),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends `data` to `to` from `signer`'s account, paying the gas itself: the call is first
    /// simulated (a revert answers with its reason and sends nothing), then sent with the node's
    /// gas estimate plus 30% (anvil's estimate alone has fallen short), and its receipt awaited.
    pub async fn send_direct(
        &self,
        signer: PrivateKeySigner,
        to: Address,
        data: Bytes,
        timeout: Duration,
    ) -> Result<TransactionReceipt> {
        let from = signer.address();
        let request = TransactionRequest::default().with_from(from).with_to(to).with_input(data);
        if let Err(error) = self.provider.call(request.clone()).await {
            return Err(match revert_of(&error) {
                Some(reason) => Error::Reverted(reason),
                None => rpc_error(&error),
            });
        }
        let estimate =
            self.provider.estimate_gas(request.clone()).await.map_err(|error| rpc_error(&error))?;
        let request = request.with_gas_limit(estimate + estimate * 3 / 10);
        let wallet = ProviderBuilder::new()
            .wallet(EthereumWallet::from(signer))
            .connect_provider(self.provider.clone());
        let pending = wallet.send_transaction(request).await.map_err(|error| rpc_error(&error))?;
        self.receipt(*pending.tx_hash(), timeout).await
    }
}

/// The contract's revert reason in an RPC error, if the error is a revert.
fn revert_of(error: &RpcError<TransportErrorKind>) -> Option<String> {
    RevertReason::from_error(error.as_error_resp()?).map(|reason| reason.to_string())
}

/// An RPC failure as text, with any URL in it redacted.
fn rpc_error(error: &RpcError<TransportErrorKind>) -> Error {
    Error::Rpc(kya_core::redact::urls_in(&error.to_string()))
}
