//! A thin client for a development chain: send registry and forwarder calls from unlocked
//! accounts, read views, decode revert reasons, move time.

use alloy::{
    eips::BlockNumberOrTag,
    network::TransactionBuilder,
    primitives::{Address, B256, Bytes, U256},
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::types::{Header, TransactionReceipt, TransactionRequest},
    sol_types::SolCall,
    transports::{RpcError, TransportErrorKind},
};

/// Headroom added to gas estimates (foundry's scripts add 30% for the same reason).
pub const GAS_MARGIN_PERCENT: u64 = 30;

/// Why a transaction or call did not go through.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// The EVM reverted with this reason string (empty when the revert carried none).
    #[error("reverted: {0}")]
    Reverted(String),
    /// The node mined the transaction but it failed.
    #[error("transaction {0} failed on chain")]
    Failed(B256),
    /// The node or the transport failed.
    #[error("rpc: {0}")]
    Rpc(RpcError<TransportErrorKind>),
    /// The node's answer could not be decoded as the call's return type.
    #[error("decoding the return data: {0}")]
    Decode(#[from] alloy::sol_types::Error),
}

impl From<RpcError<TransportErrorKind>> for TxError {
    fn from(error: RpcError<TransportErrorKind>) -> Self {
        match revert_reason(&error) {
            Some(reason) => Self::Reverted(reason),
            None => Self::Rpc(error),
        }
    }
}

impl TxError {
    /// The revert reason, when this is a revert.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Reverted(reason) => Some(reason),
            _ => None,
        }
    }
}

/// A connection to a development chain whose senders are unlocked (anvil's dev accounts, or
/// accounts made unlocked with [`Chain::impersonate`]).
#[derive(Debug, Clone)]
pub struct Chain {
    provider: DynProvider,
    rpc_url: String,
}

impl Chain {
    /// Connects over HTTP. No fillers: the node fills nonce, gas and fees of each transaction.
    pub fn connect(rpc_url: &str) -> anyhow::Result<Self> {
        kya_native_http::install_crypto_provider();
        let provider =
            ProviderBuilder::new().disable_recommended_fillers().connect_http(rpc_url.parse()?).erased();
        Ok(Self { provider, rpc_url: rpc_url.to_owned() })
    }

    /// The underlying provider, for anything this client does not wrap.
    pub fn provider(&self) -> &DynProvider {
        &self.provider
    }

    /// The JSON-RPC endpoint.
    pub fn rpc_url(&self) -> &str {
        &self.rpc_url
    }

    /// The chain's id (`eth_chainId`), which EIP-712 domains name.
    pub async fn chain_id(&self) -> Result<u64, TxError> {
        Ok(self.provider.get_chain_id().await?)
    }

    /// Sends `call` to `to` from `from` and waits until it is mined successfully.
    pub async fn send<C: SolCall>(
        &self,
        from: Address,
        to: Address,
        call: &C,
    ) -> Result<TransactionReceipt, TxError> {
        let request = TransactionRequest::default().with_from(from).with_to(to).with_input(call.abi_encode());
        self.send_request(request).await
    }

    /// Sends a prepared transaction and waits until it is mined successfully. Without a gas limit,
    /// the limit is the node's estimate plus [`GAS_MARGIN_PERCENT`]: anvil's estimate alone has
    /// been seen to fall a few thousand gas short of what the mined transaction used.
    pub async fn send_request(&self, mut request: TransactionRequest) -> Result<TransactionReceipt, TxError> {
        if request.gas.is_none() {
            let estimate = self.provider.estimate_gas(request.clone()).await?;
            request.gas = Some(estimate + estimate * GAS_MARGIN_PERCENT / 100);
        }
        let hash = self.submit(request.clone()).await?;
        let receipt = self.receipt(hash).await?;
        if receipt.status() {
            return Ok(receipt);
        }
        // The node estimated the transaction as succeeding, yet it failed when mined: replay it
        // on the state it ran against to recover the revert reason.
        let parent_block = receipt.block_number.unwrap_or_default().saturating_sub(1);
        match self.provider.call(request).block(parent_block.into()).await {
            Err(error) => Err(error.into()),
            Ok(_) => Err(TxError::Failed(hash)),
        }
    }

    /// Sends a transaction without waiting for its receipt (bulk seeding).
    pub async fn submit(&self, request: TransactionRequest) -> Result<B256, TxError> {
        let pending = self.provider.send_transaction(request).await?;
        Ok(*pending.tx_hash())
    }

    /// The receipt of a transaction, polling briefly: anvil mines on submission, so it is
    /// normally there at once.
    pub async fn receipt(&self, hash: B256) -> Result<TransactionReceipt, TxError> {
        for _ in 0..200 {
            if let Some(receipt) = self.provider.get_transaction_receipt(hash).await? {
                return Ok(receipt);
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        Err(TxError::Failed(hash))
    }

    /// Deploys `init_code` (creation bytecode with constructor arguments) from `from`.
    pub async fn deploy(&self, from: Address, init_code: Bytes) -> Result<Address, TxError> {
        let request = TransactionRequest::default().with_from(from).with_deploy_code(init_code);
        let receipt = self.send_request(request).await?;
        receipt.contract_address.ok_or(TxError::Failed(receipt.transaction_hash))
    }

    /// Calls a view of `to` at the latest block.
    pub async fn view<C: SolCall>(&self, to: Address, call: &C) -> Result<C::Return, TxError> {
        self.view_from(Address::ZERO, to, call).await
    }

    /// Calls `to` as `from` at the latest block, without sending a transaction.
    pub async fn view_from<C: SolCall>(
        &self,
        from: Address,
        to: Address,
        call: &C,
    ) -> Result<C::Return, TxError> {
        let request = TransactionRequest::default().with_from(from).with_to(to).with_input(call.abi_encode());
        // alloy calls at `pending` unless told: anvil stamps a pending block with the clock, so
        // a time-dependent view (compliance) read twice could straddle a second.
        let output = self.provider.call(request).block(alloy::eips::BlockId::latest()).await?;
        Ok(C::abi_decode_returns(&output)?)
    }

    /// Lets `account` send transactions through the node and gives it 100 ETH for gas.
    pub async fn impersonate(&self, account: Address) -> Result<(), TxError> {
        let balance = U256::from(100u64) * U256::from(10u64).pow(U256::from(18u64));
        self.provider.raw_request::<_, ()>("anvil_setBalance".into(), (account, balance)).await?;
        self.provider.raw_request::<_, ()>("anvil_impersonateAccount".into(), (account,)).await?;
        Ok(())
    }

    /// Moves the chain's clock forward by `seconds` and mines a block at the new time.
    pub async fn increase_time(&self, seconds: u64) -> Result<(), TxError> {
        self.provider.raw_request::<_, serde_json::Value>("evm_increaseTime".into(), (seconds,)).await?;
        self.mine().await
    }

    /// Sends many transactions fast: mining is paused, `per_block` transactions go to the pool,
    /// then one `evm_mine` puts them in a block, all of which must be mined and succeed. Order is
    /// kept per sender (nonces), and a later block never runs before an earlier one.
    ///
    /// Every block is mined at the base fee the chain had before the first
    /// (`anvil_setNextBlockBaseFeePerGas`), and the chain is left at it. Without that, blocks
    /// fuller than half the gas limit raise the base fee by up to an eighth each (EIP-1559): 200
    /// blocks of 70 registrations (22 M of 30 M gas) took it from 1 gwei to 77,575 gwei, and
    /// the senders' 10,000 ETH ran out. Anvil then leaves a sender's transactions it cannot pay
    /// for out of the block, so the next registrations took other ids than their senders meant.
    pub async fn send_in_blocks(
        &self,
        requests: impl IntoIterator<Item = TransactionRequest>,
        per_block: usize,
    ) -> Result<usize, TxError> {
        let base_fee = self.next_base_fee().await?;
        self.provider.raw_request::<_, ()>("evm_setAutomine".into(), (false,)).await?;
        let outcome = self.send_in_blocks_paused(requests.into_iter(), per_block.max(1), base_fee).await;
        self.provider.raw_request::<_, ()>("evm_setAutomine".into(), (true,)).await?;
        self.pin_base_fee(base_fee).await?;
        outcome
    }

    async fn send_in_blocks_paused(
        &self,
        mut requests: impl Iterator<Item = TransactionRequest>,
        per_block: usize,
        base_fee: Option<u128>,
    ) -> Result<usize, TxError> {
        let mut sent = 0;
        loop {
            // Before the block's transactions go to the pool: the node fills their fees from it.
            self.pin_base_fee(base_fee).await?;
            let mut in_block = 0;
            for request in requests.by_ref().take(per_block) {
                self.submit(request).await?;
                in_block += 1;
            }
            if in_block == 0 {
                return Ok(sent);
            }
            self.mine().await?;
            let receipts =
                self.provider.get_block_receipts(alloy::eips::BlockId::latest()).await?.unwrap_or_default();
            // A transaction left out explains the failures after it (a child registered before
            // its parent): report it first.
            if receipts.len() != in_block {
                return Err(TxError::Reverted(format!(
                    "{in_block} transactions sent but {} mined: a sender short of funds, or more gas \
                     than the block's limit (lower per_block)",
                    receipts.len()
                )));
            }
            if let Some(failed) = receipts.iter().find(|receipt| !receipt.status()) {
                return Err(TxError::Failed(failed.transaction_hash));
            }
            sent += in_block;
        }
    }

    /// The base fee the next block will have (`None` on a chain without EIP-1559 fees).
    async fn next_base_fee(&self) -> Result<Option<u128>, TxError> {
        Ok(self.header(BlockNumberOrTag::Pending).await?.base_fee_per_gas.map(u128::from))
    }

    /// The header of the block `tag` names; a node that has none is an error naming the tag.
    async fn header(&self, tag: BlockNumberOrTag) -> Result<Header, TxError> {
        let block = self
            .provider
            .get_block_by_number(tag)
            .await?
            .ok_or_else(|| TxError::Rpc(TransportErrorKind::custom_str(&format!("no {tag} block"))))?;
        Ok(block.header)
    }

    /// Makes the next block's base fee `base_fee` (anvil), if the chain has one.
    async fn pin_base_fee(&self, base_fee: Option<u128>) -> Result<(), TxError> {
        if let Some(base_fee) = base_fee {
            self.provider
                .raw_request::<_, serde_json::Value>(
                    "anvil_setNextBlockBaseFeePerGas".into(),
                    (U256::from(base_fee),),
                )
                .await?;
        }
        Ok(())
    }

    /// The gas limit of the latest block.
    pub async fn block_gas_limit(&self) -> Result<u64, TxError> {
        Ok(self.header(BlockNumberOrTag::Latest).await?.gas_limit)
    }

    /// Makes the gas limit of the next blocks `gas_limit` (anvil's `evm_setBlockGasLimit`).
    pub async fn set_block_gas_limit(&self, gas_limit: u64) -> Result<(), TxError> {
        self.provider
            .raw_request::<_, serde_json::Value>("evm_setBlockGasLimit".into(), (U256::from(gas_limit),))
            .await?;
        Ok(())
    }

    /// Makes the next block carry exactly `timestamp`.
    pub async fn set_next_timestamp(&self, timestamp: u64) -> Result<(), TxError> {
        self.provider
            .raw_request::<_, serde_json::Value>("evm_setNextBlockTimestamp".into(), (timestamp,))
            .await?;
        Ok(())
    }

    /// Puts `code` (runtime bytecode) at `address`, as anvil's `anvil_setCode` does.
    pub async fn set_code(&self, address: Address, code: &Bytes) -> Result<(), TxError> {
        self.provider.raw_request::<_, ()>("anvil_setCode".into(), (address, code)).await?;
        Ok(())
    }

    /// The runtime code that `init_code` deploys, computed by the node (`eth_call` of the creation
    /// code, with no recipient) without a transaction.
    pub async fn runtime_code(&self, init_code: Bytes) -> Result<Bytes, TxError> {
        let request = TransactionRequest::default().with_deploy_code(init_code);
        Ok(self.provider.call(request).await?)
    }

    /// Mines one empty block.
    pub async fn mine(&self) -> Result<(), TxError> {
        self.provider.raw_request::<_, serde_json::Value>("evm_mine".into(), ()).await?;
        Ok(())
    }

    /// The timestamp of the latest block.
    pub async fn latest_timestamp(&self) -> Result<u64, TxError> {
        Ok(self.header(BlockNumberOrTag::Latest).await?.timestamp)
    }
}

/// The reason of a reverted call, in whichever shape the node reports it (`kya_core::chain::revert`).
fn revert_reason(error: &RpcError<TransportErrorKind>) -> Option<String> {
    kya_core::chain::revert::RevertReason::from_error(error.as_error_resp()?).map(|reason| reason.to_string())
}
