//! The chain itself, through a JSON-RPC endpoint: receipts of relayed transactions (for
//! relayers without relay lookups, and for the registry's events), the consent nonces a
//! registration is signed at, and direct writes paid from the signer's own gas.

use std::time::{Duration, Instant};

use alloy::{
    network::{EthereumWallet, TransactionBuilder},
    primitives::{Address, B256, Bytes, U256},
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::types::{BlockNumberOrTag, TransactionReceipt, TransactionRequest},
    signers::local::PrivateKeySigner,
    sol_types::SolCall,
    transports::{RpcError, TransportErrorKind},
};
use kya_core::chain::{abi::AgentRegistry, revert::RevertReason};

use crate::{ConsentNonces, Error, Registration, Result};

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
        let parsed = url.trim().parse().map_err(|_| {
            Error::Invalid(format!("RPC URL {} is not a URL", kya_core::chain::redact::url(url)))
        })?;
        Ok(Self {
            provider: ProviderBuilder::new().connect_http(parsed).erased(),
            url: url.trim().to_owned(),
        })
    }

    /// The URL without credentials, for messages.
    pub fn shown_url(&self) -> String {
        kya_core::chain::redact::url(&self.url)
    }

    /// The chain id the node reports.
    pub async fn chain_id(&self) -> Result<u64> {
        self.provider.get_chain_id().await.map_err(|error| rpc_error(&error))
    }

    /// The registry's `consentNonce` of `signer`: the nonce its next consent is signed at. A
    /// registry without consents (the one deployed on Base Sepolia) is an error that says so.
    pub async fn consent_nonce(&self, registry: Address, signer: Address) -> Result<U256> {
        let call = AgentRegistry::consentNonceCall(signer);
        let request = TransactionRequest::default().with_to(registry).with_input(call.abi_encode());
        let no_consents = || {
            Error::Invalid(format!(
                "the registry at {registry} has no consentNonce: it predates consents, so only its agent \
                 wallet can register itself there (and, for a root agent, name itself Haftungsperson)"
            ))
        };
        let answer = match self.provider.call(request).await {
            Ok(answer) => answer,
            Err(error) if revert_of(&error).is_some() || is_revert(&error) => return Err(no_consents()),
            Err(error) => return Err(rpc_error(&error)),
        };
        AgentRegistry::consentNonceCall::abi_decode_returns(&answer).map_err(|_| no_consents())
    }

    /// The current consent nonces of `registration`'s agent wallet and Haftungsperson.
    pub async fn consent_nonces(
        &self,
        registry: Address,
        registration: &Registration,
    ) -> Result<ConsentNonces> {
        let (wallet, haftungsperson) = tokio::try_join!(
            self.consent_nonce(registry, registration.agent_wallet),
            self.consent_nonce(registry, registration.haftungsperson),
        )?;
        Ok(ConsentNonces { wallet, haftungsperson })
    }

    /// Whether `address` holds code: a contract wallet, which consents through ERC-1271.
    pub async fn has_code(&self, address: Address) -> Result<bool> {
        let code = self.provider.get_code_at(address).await.map_err(|error| rpc_error(&error))?;
        Ok(!code.is_empty())
    }

    /// The timestamp of the latest block: the registry's "now" (consent deadlines are checked
    /// against it, and a local chain's clock may run ahead of this machine's).
    pub async fn latest_timestamp(&self) -> Result<u64> {
        let block = self
            .provider
            .get_block_by_number(BlockNumberOrTag::Latest)
            .await
            .map_err(|error| rpc_error(&error))?
            .ok_or_else(|| Error::Rpc("the node has no latest block".into()))?;
        Ok(block.header.timestamp)
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

/// A revert without a reason (a call to a function the contract does not have).
fn is_revert(error: &RpcError<TransportErrorKind>) -> bool {
    error.as_error_resp().is_some_and(|response| response.message.contains("revert"))
}

/// An RPC failure as text, with any URL in it redacted.
fn rpc_error(error: &RpcError<TransportErrorKind>) -> Error {
    Error::Rpc(kya_core::chain::redact::urls_in(&error.to_string()))
}
