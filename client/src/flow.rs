//! A write in one call. Gasless: calldata → nonce → domain → EIP-712 signature → `POST /relay`
//! → follow the relay id until it settles (or, with a relayer that has no relay lookups, the
//! transaction's receipt). Direct: the same calldata sent from the signer's own account.

use std::time::{Duration, Instant};

use alloy::{
    primitives::{Address, B256, U256, aliases::U48},
    signers::{Signer, local::PrivateKeySigner},
    sol_types::Eip712Domain,
};
use kya_core::{
    api::relayer_view::RelayStatus,
    registry::forward_request::{self, ForwardRequest},
};

use crate::{
    Error, Result,
    chain::Rpc,
    outcome::{Outcome, forwarded_call_succeeded, receipt_cost, registry_result},
    relayer::{RelayView, RelayerClient},
    write::Write,
};

/// How often a relay's status is asked for while waiting for it to end.
pub const RELAY_POLL: Duration = Duration::from_millis(250);
/// How long a receipt is waited for once the relayer says its transaction is mined.
const RECEIPT_AFTER_MINED: Duration = Duration::from_secs(10);

/// Settings of a write; `Default` asks the relayer for everything.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// The registry (`request.to`); default: the relayer's `/status` `contracts.registry`.
    pub registry: Option<Address>,
    /// The forwarder the request is signed for; default: the relayer's `/domain`.
    pub forwarder: Option<Address>,
    /// Gas for the registry call; default: [`Write::gas`].
    pub gas: Option<u64>,
    /// Unix seconds after which the forwarder refuses the request; 0: never.
    pub deadline: u64,
    /// How long to wait for the outcome.
    pub timeout: Duration,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self { registry: None, forwarder: None, gas: None, deadline: 0, timeout: Duration::from_secs(120) }
    }
}

/// What a write is doing, for progress displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Reading the nonce and the domain.
    Preparing,
    /// Asking the signer.
    Signing,
    /// Posted; the relay's id (if the relayer gives one) and hash (once sent).
    Submitted { relay_id: Option<String>, tx_hash: Option<B256> },
    /// The relay's status changed.
    Status(String),
}

/// A signed forward request as the relayer is sent it.
#[derive(Debug, Clone)]
pub struct SignedRequest {
    pub request: ForwardRequest,
    pub signature: alloy::primitives::Bytes,
    pub domain: Eip712Domain,
}

/// Builds and signs the forward request of `write` for `signer`: the nonce from the relayer,
/// the domain from the relayer's `/domain` (its name, version and chain id; the forwarder
/// unless `options.forwarder` is given), the digest from `kya-core`.
pub async fn sign_request<S: Signer + Sync>(
    relayer: &RelayerClient,
    signer: &S,
    write: &Write,
    options: &WriteOptions,
) -> Result<SignedRequest> {
    write.check()?;
    let from = signer.address();
    let registry = match options.registry {
        Some(registry) => registry,
        None => relayer.status().await?.contracts.registry,
    };
    let (domain, nonce) = tokio::try_join!(relayer.domain(), relayer.nonce(from))?;
    let forwarder = options.forwarder.unwrap_or(domain.verifying_contract);
    let domain = Eip712Domain::new(
        Some(domain.name.into()),
        Some(domain.version.into()),
        Some(U256::from(domain.chain_id)),
        Some(forwarder),
        None,
    );
    let deadline = U48::try_from(options.deadline)
        .map_err(|_| Error::Invalid(format!("deadline {} does not fit in uint48", options.deadline)))?;
    let request = ForwardRequest {
        from,
        to: registry,
        value: U256::ZERO,
        gas: U256::from(options.gas.unwrap_or_else(|| write.gas())),
        nonce,
        deadline,
        data: write.calldata(),
    };
    let digest = forward_request::signing_digest(&request, &domain);
    let signature = signer.sign_hash(&digest).await.map_err(|error| Error::Sign(error.to_string()))?;
    Ok(SignedRequest { request, signature: signature.as_bytes().to_vec().into(), domain })
}

/// `write` signed by `signer` and relayed, followed until it settles. `rpc`, when given, reads
/// the receipt for the registry's result (the new agent id of a registration); it is required
/// only by a relayer without relay lookups, whose transaction is then followed by its hash.
pub async fn relay_write<S: Signer + Sync>(
    relayer: &RelayerClient,
    rpc: Option<&Rpc>,
    signer: &S,
    write: &Write,
    options: &WriteOptions,
    mut progress: impl FnMut(Progress),
) -> Result<Outcome> {
    write.check()?;
    let started = Instant::now();
    progress(Progress::Preparing);
    let registry = match options.registry {
        Some(registry) => registry,
        None => relayer.status().await?.contracts.registry,
    };
    let options = WriteOptions { registry: Some(registry), ..options.clone() };
    progress(Progress::Signing);
    let signed = sign_request(relayer, signer, write, &options).await?;
    let forwarder = signed.domain.verifying_contract.unwrap_or_default();
    let submitted = relayer.submit(&signed.request, &signed.signature).await?;
    let submitted = submitted.relayed;
    progress(Progress::Submitted { relay_id: submitted.relay_id.clone(), tx_hash: submitted.tx_hash });

    let settled = match &submitted.relay_id {
        Some(relay_id) => follow_relay(relayer, relay_id, &options, started, &mut progress).await?,
        None => None,
    };
    let mut outcome = match settled {
        Some(view) => Outcome {
            via: "relayer",
            relay_id: Some(view.relay_id.clone()),
            status: view.status.as_str().to_owned(),
            succeeded: view.status.succeeded(),
            tx_hash: view.tx_hash,
            block_number: view.block_number,
            gas_used: view.gas_used.and_then(|gas| u64::try_from(gas).ok()),
            cost_wei: view.cost_wei.map(|wei| wei.to_string()),
            revert_reason: view.revert_reason.clone().or(view.error.clone()),
            result: None,
        },
        None => {
            // No relay lookups: follow the transaction by its hash.
            let (Some(rpc), Some(hash)) = (rpc, submitted.tx_hash) else {
                return Err(Error::Invalid(
                    "this relayer has no relay lookups (GET /relay/:id): give an RPC URL (--rpc or RPC_URL) to follow the transaction".into(),
                ));
            };
            progress(Progress::Status("waiting for the receipt".into()));
            let left = options.timeout.saturating_sub(started.elapsed());
            let receipt = rpc.receipt(hash, left).await?;
            let succeeded =
                receipt.status() && forwarded_call_succeeded(&receipt, forwarder).unwrap_or(false);
            let (gas_used, cost) = receipt_cost(&receipt);
            let status = match (receipt.status(), succeeded) {
                (true, true) => RelayStatus::Mined,
                (true, false) => RelayStatus::CallFailed,
                (false, _) => RelayStatus::Reverted,
            };
            return Ok(Outcome {
                via: "relayer",
                relay_id: None,
                status: status.as_str().into(),
                succeeded,
                tx_hash: Some(hash),
                block_number: receipt.block_number,
                gas_used: Some(gas_used),
                cost_wei: Some(cost),
                revert_reason: None,
                result: succeeded.then(|| registry_result(&receipt, registry)).flatten(),
            });
        }
    };
    if let (true, Some(rpc), Some(hash)) = (outcome.succeeded, rpc, outcome.tx_hash) {
        let receipt = rpc.receipt(hash, RECEIPT_AFTER_MINED).await?;
        outcome.result = registry_result(&receipt, registry);
    }
    Ok(outcome)
}

/// Polls `GET /relay/:id` until the relay is final; `None` if the relayer does not know it.
async fn follow_relay(
    relayer: &RelayerClient,
    relay_id: &str,
    options: &WriteOptions,
    started: Instant,
    progress: &mut impl FnMut(Progress),
) -> Result<Option<RelayView>> {
    let mut last_status = None;
    loop {
        let Some(view) = relayer.relay(relay_id).await? else { return Ok(None) };
        if last_status.as_ref() != Some(&view.status) {
            progress(Progress::Status(view.status.as_str().to_owned()));
            last_status = Some(view.status.clone());
        }
        if view.status.is_final() {
            return Ok(Some(view));
        }
        if started.elapsed() >= options.timeout {
            return Err(Error::Timeout {
                what: format!("relay {relay_id}"),
                seconds: options.timeout.as_secs(),
            });
        }
        tokio::time::sleep(RELAY_POLL).await;
    }
}

/// `write` sent by `signer` straight to `registry`, paying its own gas; waits for the receipt.
pub async fn direct_write(
    rpc: &Rpc,
    signer: PrivateKeySigner,
    registry: Address,
    write: &Write,
    timeout: Duration,
) -> Result<Outcome> {
    write.check()?;
    let receipt = rpc.send_direct(signer, registry, write.calldata(), timeout).await?;
    let (gas_used, cost) = receipt_cost(&receipt);
    let succeeded = receipt.status();
    Ok(Outcome {
        via: "direct",
        relay_id: None,
        status: if succeeded { RelayStatus::Mined } else { RelayStatus::Reverted }.as_str().into(),
        succeeded,
        tx_hash: Some(receipt.transaction_hash),
        block_number: receipt.block_number,
        gas_used: Some(gas_used),
        cost_wei: Some(cost),
        revert_reason: None,
        result: registry_result(&receipt, registry),
    })
}
