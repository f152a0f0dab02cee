//! `POST /relay`: the checks as named stages, cheapest first (SPEC.md sections 7 and 8), then
//! the reservation and the send. A retry of a signed request the relayer already holds is
//! answered with that relay (its id and status) before any check that would count or refuse it.

use std::{net::IpAddr, sync::Arc};

use alloy::{
    primitives::{B256, U256},
    sol_types::SolCall,
};
use kya_core::{abi::Forwarder, forward_request, relayer_view};

use crate::{
    chain::{Fees, Simulation, forwarder_refusal},
    error::{Error, Result},
    queries::stored,
    relayer::{InFlightGuard, Relayer},
    request::RelayBody,
    sender::{Outgoing, Sent},
    store::{NewRelay, RateKind, Refusal, RelayRecord, RelayStatus, Reservation, SignerCount},
    time,
};

/// Headroom on the node's gas estimate: anvil's estimate alone has been seen to fall a few
/// thousand gas short of what the mined transaction used.
pub const GAS_MARGIN_PERCENT: u64 = 30;
/// Gas of the cheapest transaction: the budget must have at least this much left at the current
/// fee before a request is worth checking on chain.
const MIN_TX_GAS: u128 = 21_000;

/// `estimate` plus [`GAS_MARGIN_PERCENT`], saturating rather than overflowing.
pub(crate) fn with_margin(estimate: u64) -> u64 {
    estimate.saturating_add(estimate.saturating_mul(GAS_MARGIN_PERCENT) / 100)
}

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
    pub(crate) fn of(record: &RelayRecord) -> Result<Self> {
        Ok(Self {
            body: relayer_view::Relayed {
                tx_hash: record
                    .tx_hash
                    .as_deref()
                    .map(|hash| stored(hash, "transaction hash"))
                    .transpose()?,
                from: stored(&record.signer, "signer")?,
                nonce: stored(&record.forwarder_nonce, "forwarder nonce")?,
                relay_id: Some(record.relay_id.clone()),
                status: Some(record.status.public()),
            },
            sent: record.status != RelayStatus::Accepted,
        })
    }
}

/// A parsed, signature-checked request and what identifies it.
struct Checked {
    body: RelayBody,
    /// Checksummed signer.
    signer: String,
    /// Forwarder nonce, decimal.
    nonce: String,
    /// EIP-712 digest, hex.
    digest: String,
    /// Signature, hex.
    signature: String,
}

impl Relayer {
    /// Handles a `POST /relay` body from `client`. The work runs as a tracked task: once a
    /// reservation is made the relay finishes (and is recorded) even if the client hangs up,
    /// and shutdown waits for it.
    pub async fn relay(self: &Arc<Self>, body: Vec<u8>, client: IpAddr) -> Result<Relayed> {
        let relayer = Arc::clone(self);
        let outcome = self
            .handlers
            .spawn(async move { relayer.relay_checked(&body, client).await })
            .await
            .map_err(|error| Error::Internal(format!("relay task failed: {error}")))?;
        if let Err(error) = &outcome {
            self.metrics.rejected(error.reason());
            tracing::info!(%client, reason = error.reason(), error = %error, "relay refused");
        }
        outcome
    }

    async fn relay_checked(self: &Arc<Self>, body: &[u8], client: IpAddr) -> Result<Relayed> {
        let checked = self.shape(body)?;
        self.policy(&checked.body)?;
        if let Some(held) = self.held(&checked).await? {
            return Ok(held);
        }
        match self.stages(&checked, client).await {
            // A copy of this request accepted (and perhaps mined) while this one was being
            // checked: the forwarder now refuses its nonce, but the request is held.
            Err(Error::InvalidSignature) => match self.held(&checked).await? {
                Some(held) => Ok(held),
                None => Err(Error::InvalidSignature),
            },
            other => other,
        }
    }

    /// Stages 4 to 13, for a request that is not held.
    async fn stages(self: &Arc<Self>, checked: &Checked, client: IpAddr) -> Result<Relayed> {
        self.ip_limit(client).await?;
        self.off_chain_signature(checked)?;
        self.signer_limit_read_only(checked).await?;
        self.balance().await?;
        let fees = self.budget_left().await?;
        let at = self.chain.block_number().await?;
        self.forwarder_verify(checked, at).await?;
        if let Some(held) = self.count_signer(checked).await? {
            return Ok(held);
        }
        self.simulate(checked, at).await?;
        let gas_limit = with_margin(
            self.chain
                .estimate_execute(self.address(), &checked.body.request, &checked.body.signature, at)
                .await?,
        );
        // From here until this handler ends, the reconciler leaves the record to it.
        let _in_flight = InFlightGuard::new(&self.in_flight, (checked.signer.clone(), checked.nonce.clone()));
        let reservation = match self.reserve(checked, client, gas_limit, fees, at).await? {
            Ok(reservation) => reservation,
            Err(held) => return Ok(held),
        };
        self.send(checked, &reservation, gas_limit, fees, at).await
    }

    /// Stage 1, shape: the body parses; the request's identity (signer, nonce, digest, signature).
    fn shape(&self, body: &[u8]) -> Result<Checked> {
        let body = RelayBody::parse(body)?;
        let digest = forward_request::signing_digest(
            &body.request,
            &forward_request::domain(self.chain_id, self.config.forwarder),
        );
        Ok(Checked {
            signer: body.request.from.to_checksum(None),
            nonce: body.request.nonce.to_string(),
            digest: digest.to_string(),
            signature: body.signature.to_string(),
            body,
        })
    }

    /// Stage 2, policy: only the registry, no value, gas within the cap.
    fn policy(&self, body: &RelayBody) -> Result<()> {
        let request = &body.request;
        if request.to != self.config.registry {
            return Err(Error::WrongTarget);
        }
        if request.value > U256::ZERO {
            return Err(Error::ValueTransfer);
        }
        if request.gas > U256::from(self.config.max_request_gas) {
            return Err(Error::GasAboveCap {
                requested: request.gas.to_string(),
                cap: self.config.max_request_gas,
            });
        }
        Ok(())
    }

    /// Stage 3, held: this very signed request (same signer, nonce, digest and signature) is on its
    /// way or ran. Its relay answers, whatever the chain says now: a retry of a request being
    /// mined must not read "Invalid signature or nonce mismatch", which tells an agent to
    /// re-sign. Nothing is counted: no new transaction comes of it.
    async fn held(&self, checked: &Checked) -> Result<Option<Relayed>> {
        let (signer, nonce, digest, signature) = (
            checked.signer.clone(),
            checked.nonce.clone(),
            checked.digest.clone(),
            checked.signature.clone(),
        );
        let held = self.db(move |store| store.held(&signer, &nonce, &digest, &signature)).await?;
        held.map(|record| {
            let relayed = Relayed::of(&record)?;
            self.metrics.retried();
            tracing::info!(relay = %record.relay_id, status = record.status.public().as_str(), "a retry of a held relay");
            Ok(relayed)
        })
        .transpose()
    }

    /// Stage 4, per-IP limit (every request that gets this far counts).
    async fn ip_limit(&self, client: IpAddr) -> Result<()> {
        let (ip, per_ip, now) = (client.to_string(), self.config.rate_limit_per_ip, time::now());
        if self.db(move |store| store.hit(RateKind::Ip, &ip, per_ip, now)).await? {
            Ok(())
        } else {
            Err(Error::IpRateLimited(per_ip))
        }
    }

    /// Stage 5, off-chain signature: the recovered signer must be `from`.
    fn off_chain_signature(&self, checked: &Checked) -> Result<()> {
        match checked.body.recover_signer(self.chain_id, self.config.forwarder) {
            Some(signer) if signer == checked.body.request.from => Ok(()),
            _ => Err(Error::InvalidSignature),
        }
    }

    /// Stage 6, per-signer limit, read only: a signer at its limit is refused before any RPC call.
    /// The request is counted after the forwarder's `verify` ([`Self::count_signer`]): anyone
    /// can replay a signer's old requests, whose signatures still recover, but their nonces are
    /// spent, so they fail `verify` and never count. Nobody can spend another signer's quota.
    async fn signer_limit_read_only(&self, checked: &Checked) -> Result<()> {
        let (key, per_signer, now) = (checked.signer.clone(), self.config.rate_limit_per_signer, time::now());
        if self.db(move |store| store.hits(RateKind::Signer, &key, now)).await? >= per_signer {
            return Err(Error::SignerRateLimited(per_signer));
        }
        Ok(())
    }

    /// Stage 7, balance.
    async fn balance(&self) -> Result<()> {
        if self.chain.balance(self.address()).await? < U256::from(self.config.min_balance_wei) {
            return Err(Error::BalanceTooLow);
        }
        Ok(())
    }

    /// Stage 8, budget: is any transaction still affordable at today's fee? Returns the fees.
    async fn budget_left(&self) -> Result<Fees> {
        let fees = self.chain.fees().await?;
        let now = time::now();
        let budget = self.db(move |store| store.budget(now)).await?;
        let remaining = self.config.daily_gas_budget_wei.saturating_sub(budget.used_wei);
        if remaining < MIN_TX_GAS.saturating_mul(fees.max_fee_per_gas) {
            return Err(Error::BudgetExhausted);
        }
        Ok(fees)
    }

    /// Stage 9, the forwarder's own check (nonce, deadline, signer). It, the simulation and the
    /// estimate read one block, so they agree even while a copy of this request is mined.
    async fn forwarder_verify(&self, checked: &Checked, at: u64) -> Result<()> {
        if self.chain.verify(&checked.body.request, &checked.body.signature, at).await? {
            Ok(())
        } else {
            Err(Error::InvalidSignature)
        }
    }

    /// Stage 10, the signer's count: re-checked and recorded in one store transaction, so concurrent
    /// requests that all passed stage 6 cannot together exceed the limit. A copy of a request
    /// accepted meanwhile is answered with that relay and not counted.
    async fn count_signer(&self, checked: &Checked) -> Result<Option<Relayed>> {
        let (key, nonce, per_signer, now) =
            (checked.signer.clone(), checked.nonce.clone(), self.config.rate_limit_per_signer, time::now());
        match self.db(move |store| store.count_signer(&key, &nonce, per_signer, now)).await? {
            SignerCount::Counted => Ok(None),
            SignerCount::Limited => Err(Error::SignerRateLimited(per_signer)),
            SignerCount::Duplicate => self.held(checked).await?.map(Some).ok_or(Error::InvalidSignature),
        }
    }

    /// Stage 11, simulate `execute`: a registry call that would fail is never paid for.
    async fn simulate(&self, checked: &Checked, at: u64) -> Result<()> {
        match self.chain.simulate(self.address(), &checked.body.request, &checked.body.signature, at).await? {
            Simulation::Succeeds => Ok(()),
            Simulation::CallFails(reason) => Err(Error::Reverted(reason)),
            Simulation::ForwarderReverts(reason) => Err(forwarder_refusal(reason)),
        }
    }

    /// Stage 12, reserve the worst case (limit × max fee, plus on OP Stack chains the L1 data fee
    /// quoted at block `at` with its headroom) atomically. A copy of this request reserved
    /// meanwhile is answered with its relay (`Err`); another request with the same nonce is
    /// refused.
    async fn reserve(
        &self,
        checked: &Checked,
        client: IpAddr,
        gas_limit: u64,
        fees: Fees,
        at: u64,
    ) -> Result<std::result::Result<Reservation, Relayed>> {
        let input = Forwarder::executeCall {
            req: checked.body.request.clone(),
            signature: checked.body.signature.clone(),
        }
        .abi_encode();
        let l1_fee_wei = self.l1_fee_reserve(&input, gas_limit, fees, at).await?;
        let new_relay = NewRelay {
            signer: checked.signer.clone(),
            forwarder_nonce: checked.nonce.clone(),
            digest: checked.digest.clone(),
            signature: checked.signature.clone(),
            deadline: checked.body.request.deadline.to(),
            input: alloy::primitives::hex::encode_prefixed(input),
            client_ip: client.to_string(),
            gas_limit,
            max_fee_wei: fees.max_fee_per_gas,
            priority_fee_wei: fees.max_priority_fee_per_gas,
            l1_fee_wei,
        };
        let (limit, now) = (self.config.daily_gas_budget_wei, time::now());
        match self.db(move |store| store.reserve(&new_relay, limit, now)).await? {
            Ok(reservation) => Ok(Ok(reservation)),
            Err(Refusal::Budget) => Err(Error::BudgetExhausted),
            Err(Refusal::Duplicate) => self.held(checked).await?.map(Err).ok_or(Error::InvalidSignature),
        }
    }

    /// Stage 13, send. The signed transaction's hash is on disk before the node can see it: after a
    /// crash or a lost answer, the follower and the reconciler find it by that hash.
    async fn send(
        self: &Arc<Self>,
        checked: &Checked,
        reservation: &Reservation,
        gas_limit: u64,
        fees: Fees,
        at: u64,
    ) -> Result<Relayed> {
        let input = Forwarder::executeCall {
            req: checked.body.request.clone(),
            signature: checked.body.signature.clone(),
        }
        .abi_encode();
        let outgoing = Outgoing { to: self.config.forwarder, gas_limit, fees, input: input.into() };
        let (id, relayer) = (reservation.id, Arc::clone(self));
        let record = move |signed: Sent| {
            let relayer = Arc::clone(&relayer);
            async move {
                let hash = signed.hash.to_string();
                relayer.db(move |store| store.mark_sent(id, signed.nonce, &hash, at, time::now())).await
            }
        };
        let sent = match self.sender.send(&outgoing, record).await {
            Ok(sent) => sent,
            Err(error @ Error::Unconfirmed { .. }) => {
                // Kept on the books as sent: its follower finds the receipt if the node did
                // take it, and until then the worst case stays reserved; the reconciler drops
                // it if the node never had it.
                self.follow(id);
                return Err(error);
            }
            Err(error) => {
                let reason = error.to_string();
                self.db(move |store| store.release(id, &reason, time::now())).await?;
                return Err(error);
            }
        };
        let hash: B256 = sent.hash;
        tracing::info!(
            signer = %checked.signer,
            forwarder_nonce = %checked.nonce,
            relay = %reservation.relay_id,
            tx = %hash,
            relayer_nonce = sent.nonce,
            gas_limit,
            reserved_wei = %reservation.reserved_wei,
            "relay sent"
        );
        self.metrics.accepted();
        self.follow(id);
        Ok(Relayed {
            body: relayer_view::Relayed {
                tx_hash: Some(hash),
                from: checked.body.request.from,
                nonce: checked.body.request.nonce,
                relay_id: Some(reservation.relay_id.clone()),
                status: Some(RelayStatus::Sent.public()),
            },
            sent: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gas_margin_saturates() {
        assert_eq!(with_margin(100_000), 130_000);
        assert_eq!(with_margin(u64::MAX), u64::MAX);
        assert_eq!(with_margin(184_467_440_737_095_516), 239_807_672_958_224_170);
    }
}
