//! The relayer's view of the chain: reads (balance, forwarder nonce, `verify`, the EIP-712
//! domain), the `execute` simulation and estimate, fees (an OP Stack chain's L1 data fee too),
//! raw sends and receipts.
//!
//! Errors keep the node's message; reverts are read by `kya_core::chain::revert`, the project's one
//! decoder of every node's and provider's shape, and worded here for the relayer's answers.
//! Nothing here holds the key.
//!
//! Over 500 lines with its tests: the code is 414 lines (one method per read or send the
//! relayer makes), and its tests of how each node's answer is read follow it.

pub(crate) mod transport;

use alloy::{
    eips::BlockId,
    network::TransactionBuilder,
    primitives::{Address, B256, Bytes, U256},
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::{
        client::RpcClient,
        types::{TransactionInput, TransactionReceipt, TransactionRequest},
    },
    serde::WithOtherFields,
    sol_types::{SolCall, SolEvent},
    transports::{RpcError, TransportErrorKind, http::reqwest, utils::guess_local_url},
};
use kya_core::{
    chain::{
        abi::{Forwarder, GAS_PRICE_ORACLE, GasPriceOracle},
        retry,
        revert::RevertReason,
    },
    registry::forward_request::ForwardRequest,
};

use crate::{
    chain::transport::RetryingHttp,
    error::{Error, Result},
    rules::fees::Fees,
    store::Outcome,
};

/// Longest wait for one JSON-RPC answer.
pub(crate) const RPC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// What the simulation of `execute` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Simulation {
    /// The registry call succeeds.
    Succeeds,
    /// `execute` itself reverts (the forwarder refuses the request) with this reason.
    ForwarderReverts(String),
    /// `execute` succeeds but the registry call inside fails with this reason.
    CallFails(String),
}

/// The forwarder's EIP-712 domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Domain {
    /// EIP-712 name.
    pub(crate) name: String,
    /// EIP-712 version.
    pub(crate) version: String,
    /// Chain id.
    pub(crate) chain_id: u64,
    /// The forwarder's address.
    pub(crate) verifying_contract: Address,
}

/// Why a raw transaction was not (known to be) taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SendFailure {
    /// The node answered with an error, so it did not take the transaction.
    pub(crate) node_answered: bool,
    /// The node's or the transport's message.
    pub(crate) message: String,
}

/// A mined transaction's receipt, with the L1 data fee an OP Stack node reports in it.
#[derive(Debug, Clone)]
pub(crate) struct Receipt {
    /// The receipt as every node gives it.
    pub(crate) inner: TransactionReceipt,
    /// The receipt's `l1Fee` (a hex quantity): what an OP Stack chain charged the sender for the
    /// transaction's data on L1, on top of its gas. Zero where the node reports none.
    pub(crate) l1_fee_wei: u128,
}

impl Receipt {
    /// Reads the `l1Fee` an OP Stack node adds to a receipt. A receipt without one (or with
    /// `null`) is from a chain that charges none; one the relayer cannot read is the node's
    /// error, not a fee of zero, so the books are never short.
    fn read(receipt: WithOtherFields<TransactionReceipt>) -> Result<Self> {
        let l1_fee_wei = match receipt.other.get("l1Fee") {
            None | Some(serde_json::Value::Null) => 0,
            Some(fee) => serde_json::from_value::<U256>(fee.clone())
                .ok()
                .and_then(|fee| u128::try_from(fee).ok())
                .ok_or_else(|| Error::Rpc(format!("a receipt's l1Fee is not a wei amount: {fee}")))?,
        };
        Ok(Self { inner: receipt.inner, l1_fee_wei })
    }

    /// What the transaction cost its sender: `gasUsed × effectiveGasPrice`, plus the L1 data fee.
    pub(crate) fn cost_wei(&self) -> u128 {
        u128::from(self.inner.gas_used)
            .saturating_mul(self.inner.effective_gas_price)
            .saturating_add(self.l1_fee_wei)
    }
}

/// A connection to the chain, bound to one forwarder.
#[derive(Debug, Clone)]
pub(crate) struct RelayerChain {
    provider: DynProvider,
    forwarder: Address,
}

impl RelayerChain {
    /// Connects over HTTP, with no fillers: the relayer sets nonce, gas and fees itself. Every
    /// RPC request times out after [`RPC_TIMEOUT`], so a stuck node yields a 500, never a hang;
    /// a refused one is sent again as `kya_core::chain::retry` says ([`RetryingHttp`]).
    pub(crate) fn connect(rpc_url: &str, forwarder: Address) -> Result<Self> {
        let url = rpc_url.parse().map_err(|_| {
            Error::Config(format!("RPC_URL is not a URL: {}", kya_core::chain::redact::url(rpc_url)))
        })?;
        kya_native_http::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(RPC_TIMEOUT)
            .build()
            .map_err(|error| Error::Config(format!("building the HTTP client: {error}")))?;
        let client = RpcClient::new(RetryingHttp::new(http, url), guess_local_url(rpc_url));
        let provider = ProviderBuilder::new().disable_recommended_fillers().connect_client(client).erased();
        Ok(Self { provider, forwarder })
    }

    /// The latest block's number: the relay's on-chain checks all read this one block, so a
    /// request mined in between cannot pass `verify` and then fail the estimate.
    pub(crate) async fn block_number(&self) -> Result<u64> {
        self.provider.get_block_number().await.map_err(Error::rpc)
    }

    /// The latest block's number and timestamp: stuck relays compare the request's deadline
    /// with the chain's clock, which the forwarder checks, not the wall clock.
    pub(crate) async fn head(&self) -> Result<(u64, u64)> {
        let block = self
            .provider
            .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
            .await
            .map_err(Error::rpc)?
            .ok_or_else(|| Error::Rpc("the node has no latest block".into()))?;
        Ok((block.header.number, block.header.timestamp))
    }

    /// The node's chain id.
    pub(crate) async fn chain_id(&self) -> Result<u64> {
        self.provider.get_chain_id().await.map_err(Error::rpc)
    }

    /// Balance of `account` in wei.
    pub(crate) async fn balance(&self, account: Address) -> Result<U256> {
        self.provider.get_balance(account).await.map_err(Error::rpc)
    }

    /// The account nonce the next transaction of `account` must use, counting pending ones.
    pub(crate) async fn pending_nonce(&self, account: Address) -> Result<u64> {
        self.provider.get_transaction_count(account).pending().await.map_err(Error::rpc)
    }

    /// The account nonce after the latest block: every nonce below it is mined.
    pub(crate) async fn mined_nonce(&self, account: Address) -> Result<u64> {
        self.provider.get_transaction_count(account).latest().await.map_err(Error::rpc)
    }

    /// Whether the node knows the transaction `hash` (in its pool or mined).
    pub(crate) async fn knows_transaction(&self, hash: B256) -> Result<bool> {
        Ok(self.provider.get_transaction_by_hash(hash).await.map_err(Error::rpc)?.is_some())
    }

    /// The forwarder nonce of `from` (what its next request must be signed with).
    pub(crate) async fn forwarder_nonce(&self, from: Address) -> Result<U256> {
        self.view(Address::ZERO, &Forwarder::getNonceCall { from }, BlockId::latest()).await
    }

    /// The forwarder's own check of a request and its signature (nonce, deadline, signer) at
    /// block `at`.
    pub(crate) async fn verify(&self, req: &ForwardRequest, signature: &Bytes, at: u64) -> Result<bool> {
        let call = Forwarder::verifyCall { req: req.clone(), signature: signature.clone() };
        match self.view(Address::ZERO, &call, BlockId::number(at)).await {
            // A revert here can only be the length check, which parsing already enforces.
            Err(Error::Reverted(_)) => Ok(false),
            other => other,
        }
    }

    /// The forwarder's EIP-712 domain as it reports it (ERC-5267).
    pub(crate) async fn domain(&self) -> Result<Domain> {
        let domain = self.view(Address::ZERO, &Forwarder::eip712DomainCall {}, BlockId::latest()).await?;
        Ok(Domain {
            name: domain.name,
            version: domain.version,
            chain_id: domain.chainId.try_into().unwrap_or(u64::MAX),
            verifying_contract: domain.verifyingContract,
        })
    }

    fn execute_tx(&self, from: Address, req: &ForwardRequest, signature: &Bytes) -> TransactionRequest {
        let call = Forwarder::executeCall { req: req.clone(), signature: signature.clone() };
        TransactionRequest::default()
            .with_from(from)
            .with_to(self.forwarder)
            .input(call_data(call.abi_encode()))
    }

    /// Runs `execute` with `eth_call` at block `at`, as the relayer would send it.
    pub(crate) async fn simulate(
        &self,
        relayer: Address,
        req: &ForwardRequest,
        signature: &Bytes,
        at: u64,
    ) -> Result<Simulation> {
        let tx = self.execute_tx(relayer, req, signature);
        match self.provider.call(tx).block(BlockId::number(at)).await {
            Ok(output) => {
                let returned = Forwarder::executeCall::abi_decode_returns(&output)
                    .map_err(|error| Error::Rpc(format!("decoding execute's result: {error}")))?;
                if returned._0 {
                    Ok(Simulation::Succeeds)
                } else {
                    Ok(Simulation::CallFails(failure_reason(&returned._1)))
                }
            }
            Err(error) => match revert_reason(&error) {
                Some(reason) => Ok(Simulation::ForwarderReverts(reason)),
                None => Err(Error::rpc(error)),
            },
        }
    }

    /// The node's gas estimate at block `at` for `execute` sent by the relayer. The estimate is
    /// the smallest limit under which the transaction succeeds, so it already leaves the
    /// forwarder's 63/64 margin (a limit below it would hit the guard and fail the estimate).
    /// A revert comes back as [`Error::Reverted`], or as [`Error::InvalidSignature`] when the
    /// forwarder refuses the request itself.
    pub(crate) async fn estimate_execute(
        &self,
        relayer: Address,
        req: &ForwardRequest,
        signature: &Bytes,
        at: u64,
    ) -> Result<u64> {
        let tx = self.execute_tx(relayer, req, signature);
        self.provider.estimate_gas(tx).block(BlockId::number(at)).await.map_err(|error| {
            match revert_reason(&error) {
                Some(reason) => forwarder_refusal(reason),
                None => Error::rpc(error),
            }
        })
    }

    /// Whether the chain is an OP Stack chain, which charges every transaction an L1 data fee on
    /// top of its gas: the `GasPriceOracle` predeploy has code.
    pub(crate) async fn is_op_stack(&self) -> Result<bool> {
        Ok(!self.provider.get_code_at(GAS_PRICE_ORACLE).await.map_err(Error::rpc)?.is_empty())
    }

    /// The `GasPriceOracle`'s L1 data fee at block `at` for `unsigned`, an unsigned transaction
    /// as EIP-2718 bytes (the oracle adds the signature's share itself).
    pub(crate) async fn l1_fee(&self, unsigned: Vec<u8>, at: u64) -> Result<u128> {
        let call = GasPriceOracle::getL1FeeCall { _data: unsigned.into() };
        let tx = TransactionRequest::default().with_to(GAS_PRICE_ORACLE).input(call_data(call.abi_encode()));
        let output = self.provider.call(tx).block(BlockId::number(at)).await.map_err(Error::rpc)?;
        let fee = GasPriceOracle::getL1FeeCall::abi_decode_returns(&output)
            .map_err(|error| Error::Rpc(format!("decoding the GasPriceOracle's getL1Fee: {error}")))?;
        // Beyond u128 no budget could pay it: the reservation refuses it.
        Ok(fee.try_into().unwrap_or(u128::MAX))
    }

    /// Current EIP-1559 fee suggestion.
    pub(crate) async fn fees(&self) -> Result<Fees> {
        let fees = self.provider.estimate_eip1559_fees().await.map_err(Error::rpc)?;
        Ok(Fees {
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
        })
    }

    /// Submits a signed raw transaction. A refusal carries the node's message for the nonce
    /// handling to classify; a transport failure (timeout, dropped connection, a gateway's 5xx)
    /// leaves open whether the node took the transaction. An HTTP 429 that outlasted the
    /// transport's retries is a refusal: the provider turned it away before processing it.
    pub(crate) async fn send_raw(&self, raw: &[u8]) -> std::result::Result<(), SendFailure> {
        self.provider.send_raw_transaction(raw).await.map(drop).map_err(|error| {
            let refused = error
                .as_transport_err()
                .and_then(TransportErrorKind::as_http_error)
                .is_some_and(|http| retry::refused_unprocessed(http.status));
            SendFailure {
                node_answered: error.as_error_resp().is_some() || refused,
                message: kya_core::chain::redact::urls_in(&error.to_string()),
            }
        })
    }

    /// The receipt of `hash`, if mined, with the fields the Ethereum types leave out kept, so an
    /// OP Stack node's `l1Fee` is read.
    pub(crate) async fn receipt(&self, hash: B256) -> Result<Option<Receipt>> {
        let receipt: Option<WithOtherFields<TransactionReceipt>> = self
            .provider
            .raw_request("eth_getTransactionReceipt".into(), (hash,))
            .await
            .map_err(Error::rpc)?;
        receipt.map(Receipt::read).transpose()
    }

    /// The registry's revert reason for a relayed call that failed inside a mined `execute`
    /// (the forwarder's event carries no return data): the request's call made again the way
    /// the forwarder makes it (from the forwarder, the signer appended, the request's gas) on the
    /// state of the block it was mined in. `None` if the call succeeds there.
    pub(crate) async fn call_failure(&self, input: &[u8], block: u64) -> Result<Option<String>> {
        let execute = Forwarder::executeCall::abi_decode(input)
            .map_err(|error| Error::Internal(format!("a stored relay's calldata: {error}")))?;
        let request = execute.req;
        let mut data = request.data.to_vec();
        data.extend_from_slice(request.from.as_slice());
        let tx = TransactionRequest::default()
            .with_from(self.forwarder)
            .with_to(request.to)
            .input(call_data(data))
            .with_gas_limit(request.gas.try_into().unwrap_or(u64::MAX));
        match self.provider.call(tx).block(BlockId::number(block)).await {
            Ok(_) => Ok(None),
            Err(error) => match revert_reason(&error) {
                Some(reason) => Ok(Some(reason)),
                None => Err(Error::rpc(error)),
            },
        }
    }

    /// What a mined relay cost (`gasUsed × effectiveGasPrice` plus any L1 data fee: everything
    /// the chain took from the relayer) and how it ended. `execute` does not revert when the
    /// registry call fails, so a successful transaction is only a relayed call if the forwarder's
    /// `Executed` event says `success`. A successful transaction to the relayer itself is the
    /// cancellation.
    pub(crate) fn settlement(&self, receipt: &Receipt) -> (u128, Outcome) {
        let cost = receipt.cost_wei();
        let receipt = &receipt.inner;
        if !receipt.status() {
            return (cost, Outcome::Reverted);
        }
        if receipt.to == Some(receipt.from) {
            return (cost, Outcome::Cancelled);
        }
        let call_succeeded = receipt
            .inner
            .logs()
            .iter()
            .filter(|log| log.address() == self.forwarder)
            .find_map(|log| Forwarder::Executed::decode_log(&log.inner).ok())
            .is_some_and(|executed| executed.data.success);
        (cost, if call_succeeded { Outcome::Mined } else { Outcome::CallFailed })
    }

    async fn view<C: SolCall>(&self, from: Address, call: &C, at: BlockId) -> Result<C::Return> {
        let tx = TransactionRequest::default()
            .with_from(from)
            .with_to(self.forwarder)
            .input(call_data(call.abi_encode()));
        let output = self.provider.call(tx).block(at).await.map_err(|error| match revert_reason(&error) {
            Some(reason) => Error::Reverted(reason),
            None => Error::rpc(error),
        })?;
        C::abi_decode_returns(&output)
            .map_err(|error| Error::Rpc(format!("decoding the forwarder's answer: {error}")))
    }
}

/// Call data for `eth_call` and `eth_estimateGas`, in both `input` (the execution API spec) and
/// `data` (older clients, and what ethers and viem send): every node reads one of them.
fn call_data(data: Vec<u8>) -> TransactionInput {
    TransactionInput::both(data.into())
}

/// The error for a revert of `execute` itself. The forwarder reverts with `Forwarder: invalid
/// signature` when its own `verify` fails (a used nonce, a passed deadline, another signer):
/// that is the spec's 401, whichever step saw it. Any other revert keeps its reason (a 500).
pub(crate) fn forwarder_refusal(reason: String) -> Error {
    if reason == "Forwarder: invalid signature" { Error::InvalidSignature } else { Error::Reverted(reason) }
}

/// The reason a relayed registry call failed, from the `returndata` the forwarder passes back.
pub(crate) fn failure_reason(returndata: &[u8]) -> String {
    worded(RevertReason::from_data(returndata))
}

/// The relayer's wording of a revert: a `require` message as it is (SPEC.md's tables list them),
/// the others described.
fn worded(reason: RevertReason) -> String {
    match reason {
        RevertReason::Message(message) => message,
        RevertReason::Panic(code) => format!("Relayed call panicked (code {code})"),
        // What an inner call that ran out of its `request.gas` returns.
        RevertReason::Empty => "Relayed call failed without a reason (is request.gas too low?)".into(),
        RevertReason::Custom(data) => format!("Relayed call failed: {data}"),
    }
}

/// The revert reason in a node's error answer, if it is a revert (in any node's or provider's
/// shape: `kya_core::chain::revert`).
fn revert_reason(error: &RpcError<TransportErrorKind>) -> Option<String> {
    RevertReason::from_error(error.as_error_resp()?).map(worded)
}

#[cfg(test)]
mod tests {
    use alloy::sol_types::{Panic, Revert, SolError};

    use super::*;

    #[test]
    fn failure_reasons_decode_reverts_panics_and_empty_data() {
        let reason = kya_core::registry::reverts::WALLET_ALREADY_REGISTERED;
        assert_eq!(failure_reason(&Revert::from(reason).abi_encode()), reason);
        let panic = Panic { code: U256::from(0x11) }.abi_encode();
        assert_eq!(failure_reason(&panic), "Relayed call panicked (code 17)");
        assert!(failure_reason(&[]).contains("request.gas"));
        assert_eq!(failure_reason(&[1, 2]), "Relayed call failed: 0x0102");
    }

    /// Every revert shape of PROVIDERS.md reads as the same answer; other failures are no
    /// revert (the caller answers them as RPC errors).
    #[test]
    fn reverts_in_every_providers_shape_read_the_same() {
        let reason = kya_core::registry::reverts::WALLET_ALREADY_REGISTERED;
        let data = alloy::primitives::hex::encode_prefixed(Revert::from(reason).abi_encode());
        let shapes = [
            serde_json::json!({"code": 3, "message": format!("execution reverted: {reason}"), "data": data}),
            serde_json::json!({"code": -32000, "message": "execution reverted", "data": data}),
            serde_json::json!({"code": -32000, "message": format!("execution reverted: {reason}")}),
            serde_json::json!({"code": -32015, "message": "VM execution error.", "data": format!("revert: {reason}")}),
            serde_json::json!({"code": -32015, "message": "VM execution error.", "data": format!("Reverted {data}")}),
            serde_json::json!({"code": -32000, "message": format!("VM Exception while processing transaction: revert {reason}")}),
        ];
        for shape in shapes {
            let error = RpcError::ErrorResp(serde_json::from_value(shape.clone()).unwrap());
            assert_eq!(revert_reason(&error).as_deref(), Some(reason), "{shape}");
        }
        let empty = RpcError::ErrorResp(
            serde_json::from_value(
                serde_json::json!({"code": 3, "message": "execution reverted", "data": "0x"}),
            )
            .unwrap(),
        );
        assert_eq!(revert_reason(&empty).unwrap(), failure_reason(&[]));
        for other in [
            serde_json::json!({"code": -32000, "message": "header not found"}),
            serde_json::json!({"code": -32005, "message": "limit exceeded"}),
        ] {
            assert_eq!(revert_reason(&RpcError::ErrorResp(serde_json::from_value(other).unwrap())), None);
        }
    }

    /// A receipt as anvil or geth gives it, with `extra` fields added.
    fn receipt_with(extra: serde_json::Value) -> Result<Receipt> {
        let mut receipt = serde_json::json!({
            "type": "0x2", "status": "0x1", "cumulativeGasUsed": "0x5208", "logs": [],
            "logsBloom": format!("0x{}", "00".repeat(256)),
            "transactionHash": B256::repeat_byte(1), "transactionIndex": "0x0",
            "blockHash": B256::repeat_byte(2), "blockNumber": "0x7",
            "gasUsed": "0x5208", "effectiveGasPrice": "0x3b9aca07",
            "from": Address::repeat_byte(3), "to": Address::repeat_byte(4), "contractAddress": null,
        });
        receipt.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        Receipt::read(serde_json::from_value(receipt).unwrap())
    }

    /// An OP Stack receipt's `l1Fee` is part of the cost, to the wei; a receipt without one (or
    /// with `null`) costs its gas; an `l1Fee` that is no amount is the node's error, never zero.
    #[test]
    fn a_receipts_cost_adds_its_l1_fee() {
        let gas = 21_000 * 1_000_000_007u128;
        let plain = receipt_with(serde_json::json!({})).unwrap();
        assert_eq!((plain.l1_fee_wei, plain.cost_wei()), (0, gas));
        assert_eq!(plain.inner.block_number, Some(7));
        let op = receipt_with(serde_json::json!({
            "l1Fee": "0x2b5e3af16b1880c7", "l1GasPrice": "0x6fc23ac00", "l1GasUsed": "0x640",
            "l1BaseFeeScalar": "0xf4240", "l1BlobBaseFee": "0x1", "l1BlobBaseFeeScalar": "0x0",
        }))
        .unwrap();
        assert_eq!(op.l1_fee_wei, 0x2b5e3af16b1880c7);
        assert_eq!(op.cost_wei(), gas + 0x2b5e3af16b1880c7);
        assert_eq!(receipt_with(serde_json::json!({"l1Fee": null})).unwrap().cost_wei(), gas);
        for malformed in [serde_json::json!("lots"), serde_json::json!({"fee": 1}), serde_json::json!("-0x1")]
        {
            let error = receipt_with(serde_json::json!({ "l1Fee": malformed })).unwrap_err();
            assert!(error.detail().contains("l1Fee"), "{}", error.detail());
        }
    }

    #[test]
    fn the_forwarders_own_refusal_is_the_spec_401() {
        assert!(matches!(forwarder_refusal("Forwarder: invalid signature".into()), Error::InvalidSignature));
        assert!(matches!(
            forwarder_refusal("Forwarder: insufficient gas".into()),
            Error::Reverted(reason) if reason == "Forwarder: insufficient gas"
        ));
    }
}
