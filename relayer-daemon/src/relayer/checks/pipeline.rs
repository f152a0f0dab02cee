//! `POST /relay`: the checks as named stages, cheapest first (SPEC.md sections 7 and 8), then
//! the reservation and the send. A retry of a signed request the relayer already holds is
//! answered with that relay (its id and status) before any check that would count or refuse it.

use std::{net::IpAddr, sync::Arc};

use alloy::{
    primitives::{Address, B256, U256},
    sol_types::SolCall,
};
use kya_core::{
    api::client_ip::relay_client_of,
    chain::abi::AgentRegistry,
    registry::{call, consent, forward_request},
};

use crate::{
    chain::{Simulation, forwarder_refusal},
    error::{Error, Result},
    relayer::{Relayer, relayed::Relayed},
    rules::fees::Fees,
    rules::request::RelayBody,
    store::{Admission, RateKind, SignedRequest, SignerCount},
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

/// A parsed, signature-checked request and what identifies it: its signer (`from`), forwarder
/// nonce, EIP-712 digest and signature.
pub(super) struct Checked {
    pub(super) body: RelayBody,
    /// The registry write it calls.
    pub(super) function: &'static str,
    /// EIP-712 digest on this chain and forwarder.
    pub(super) digest: B256,
}

impl Checked {
    pub(super) fn signer(&self) -> Address {
        self.body.request.from
    }

    pub(super) fn nonce(&self) -> U256 {
        self.body.request.nonce
    }
}

impl Relayer {
    /// Handles a `POST /relay` body from `client`. The work runs as a tracked task: once a
    /// reservation is made the relay finishes (and is recorded) even if the client hangs up,
    /// and shutdown waits for it.
    pub async fn relay(self: &Arc<Self>, body: Vec<u8>, client: IpAddr) -> Result<Relayed> {
        let relayer = Arc::clone(self);
        let outcome = self
            .shutdown
            .spawn_handler(async move { relayer.relay_checked(&body, client).await })
            .await
            .map_err(|error| Error::Internal(format!("relay task failed: {error}")))?;
        if let Err(error) = &outcome {
            self.metrics.rejected(error.reason());
            tracing::info!(%client, reason = error.reason(), error = %error, "relay refused");
        }
        outcome
    }

    async fn relay_checked(self: &Arc<Self>, body: &[u8], client: IpAddr) -> Result<Relayed> {
        let body = RelayBody::parse(body)?;
        let function = self.policy(&body)?;
        let checked = self.identify(body, function);
        // What costs the relayer money is counted per IPv6 /48, not per address or /64.
        let client = relay_client_of(client).to_string();
        self.prefilter(&client, checked.digest)?;
        let admission = match self.admit(&checked, &client).await? {
            Admitted::Held(held) => return Ok(held),
            Admitted::Checking(admission) => admission,
        };
        let outcome = self.stages(&checked, client.clone(), admission).await;
        if outcome.is_ok() {
            self.checks.prefilter.accepted(&client, checked.digest);
        }
        match outcome {
            // A copy of this request accepted (and perhaps mined) while this one was being
            // checked: the forwarder now refuses its nonce, but the request is held.
            Err(Error::InvalidSignature) => match self.held(&checked).await? {
                Some(held) => Ok(held),
                None => Err(Error::InvalidSignature),
            },
            other => other,
        }
    }

    /// Stages 4 to 13, for a request that is not held, with what its first store call found.
    async fn stages(
        self: &Arc<Self>,
        checked: &Checked,
        client: String,
        admission: Admission,
    ) -> Result<Relayed> {
        self.ip_limit(&admission)?;
        self.off_chain_signature(checked)?;
        self.signer_limit_read_only(&admission)?;
        // A turn at the checks on chain, in arrival order, held until the estimate is in.
        let turn = self.checks.turns.take(self.pool.held_count()).await?;
        // Stages 7 and 8 and the head block are reads that need nothing of each other: asked at
        // once, they cost the node's round trip once, not three times. Their outcomes are taken
        // in stage order, so a request is answered as if they ran one after another.
        let (payers, fees, head) =
            tokio::join!(self.lanes_that_can_pay(), self.budget_left(checked, &client), self.checked_head());
        let (payers, fees, (at, head_time)) = (payers?, fees?, head?);
        self.deadline_room(checked, head_time)?;
        self.forwarder_verify(checked, at).await?;
        // Only a request the forwarder verified is counted (stage 10), and only a counted one
        // would ever be sent; the simulation and the estimate are reads of the same block, so
        // they go with the count rather than after it: two round trips fewer. A request refused
        // by its count has cost two reads no more than it would have a moment earlier.
        let (counted, simulated, estimate) = tokio::join!(
            self.count_signer(checked),
            self.simulate(checked, at),
            self.chain.estimate_execute(self.address(), &checked.body.request, &checked.body.signature, at),
        );
        if let Some(held) = counted? {
            return Ok(held);
        }
        simulated?;
        let gas_limit = with_margin(estimate?);
        drop(turn);
        // From here until this handler ends, the reconciler leaves the record to it.
        let in_flight = self.in_flight.hold((checked.signer(), checked.nonce()));
        let reservation = match self.reserve(checked, &client, payers.lanes, gas_limit, fees, at).await? {
            Ok(reservation) => reservation,
            Err(held) => return Ok(held),
        };
        if !payers.held {
            return self.hand_off(&reservation).await;
        }
        match self.send(checked, &reservation, gas_limit, fees, at).await {
            // Recorded past the lease's margin and not submitted (this daemon stalled): the
            // record was taken back and the relay handed to its key's holder, which may be this
            // daemon again (its hand-off sender leaves alone what a handler holds). Answered as a
            // standby answers: once sent, or 202 with the relay's id.
            Err(Error::Withheld { .. }) => {
                drop(in_flight);
                self.await_holder(reservation.id).await
            }
            outcome => outcome,
        }
    }

    /// Stage 1 (after [`RelayBody::parse`]), the request's identity: signer, nonce, digest,
    /// signature.
    fn identify(&self, body: RelayBody, function: &'static str) -> Checked {
        let digest = forward_request::signing_digest(
            &body.request,
            &forward_request::domain(self.chain_id, self.config.chain.forwarder),
        );
        Checked { body, function, digest }
    }

    /// Stage 2, policy: only the registry, no value, gas within the cap, and data that is
    /// exactly one registry write (no padding the relayer would pay 16 gas a byte for, no view).
    /// Returns the write's name.
    fn policy(&self, body: &RelayBody) -> Result<&'static str> {
        let request = &body.request;
        if request.to != self.config.chain.registry {
            return Err(Error::WrongTarget);
        }
        if request.value > U256::ZERO {
            return Err(Error::ValueTransfer);
        }
        if request.gas > U256::from(self.config.relay.max_request_gas) {
            return Err(Error::GasAboveCap {
                requested: request.gas.to_string(),
                cap: self.config.relay.max_request_gas,
            });
        }
        Ok(call::exact_write(&request.data)?)
    }

    /// Stages 3, 4 and 6's store work, in one call ([`crate::store::Store::admit`]): a held
    /// request is answered with its relay, counting nothing; any other is counted against its
    /// client's hourly limit (every request that gets this far counts), keyed by `client` (an
    /// IPv4 address or an IPv6 /48), and its signer's count is read. Their verdicts are given in
    /// their stages' order ([`Self::stages`]).
    async fn admit(&self, checked: &Checked, client: &str) -> Result<Admitted> {
        let request = SignedRequest {
            signer: checked.signer(),
            nonce: checked.nonce(),
            digest: checked.digest,
            signature: checked.body.signature.clone(),
        };
        let (counted_as, per_ip, now) = (client.to_owned(), self.config.relay.rate_limit_per_ip, time::now());
        let mut admission =
            self.stores.db(move |store| store.admit(&request, &counted_as, per_ip, now)).await?;
        if admission.held {
            if let Some(held) = self.held(checked).await? {
                return Ok(Admitted::Held(held));
            }
            // Its relay closed between the two reads (dropped, say): checked as a new request,
            // and counted now as one.
            let counted_as = client.to_owned();
            admission.held = false;
            admission.client_counted =
                self.stores.db(move |store| store.hit(RateKind::Ip, &counted_as, per_ip, now)).await?;
        }
        if admission.client_counted {
            self.checks.prefilter.counted(client, checked.digest, per_ip, now);
        }
        Ok(Admitted::Checking(admission))
    }

    /// Stage 3, held: this very signed request (same signer, nonce, digest and signature) is on its
    /// way or ran. Its relay answers, whatever the chain says now: a retry of a request being
    /// mined must not read "Invalid signature or nonce mismatch", which tells an agent to
    /// re-sign. Nothing is counted: no new transaction comes of it.
    pub(super) async fn held(&self, checked: &Checked) -> Result<Option<Relayed>> {
        let (signer, nonce, digest, signature) =
            (checked.signer(), checked.nonce(), checked.digest, checked.body.signature.clone());
        let held = self.stores.db(move |store| store.held(signer, nonce, digest, &signature)).await?;
        held.map(|record| {
            let relayed = Relayed::of(&record);
            self.metrics.retried();
            tracing::info!(relay = %record.relay_id, status = record.status.public().as_str(), "a retry of a held relay");
            Ok(relayed)
        })
        .transpose()
    }

    /// Before stage 3, the per-IP limit's pre-filter: a client this daemon alone has seen reach
    /// its hourly limit is refused with the limit's own 429 from memory, before any store access,
    /// unless `request` is one of the requests counted (a retry, answered with its relay).
    fn prefilter(&self, client: &str, request: B256) -> Result<()> {
        let refused =
            self.checks.prefilter.check(client, request, self.config.relay.rate_limit_per_ip, time::now());
        if refused.is_err() {
            self.metrics.prefiltered();
        }
        refused
    }

    /// Stage 4, per-IP limit: the request was counted by [`Self::admit`], unless its client
    /// had reached the limit.
    fn ip_limit(&self, admission: &Admission) -> Result<()> {
        if admission.client_counted {
            Ok(())
        } else {
            Err(Error::IpRateLimited(self.config.relay.rate_limit_per_ip))
        }
    }

    /// Stage 5, off-chain signature: the recovered signer must be `from`.
    fn off_chain_signature(&self, checked: &Checked) -> Result<()> {
        match checked.body.recover_signer(self.chain_id, self.config.chain.forwarder) {
            Some(signer) if signer == checked.body.request.from => Ok(()),
            _ => Err(Error::InvalidSignature),
        }
    }

    /// Stage 6, per-signer limit, read only (by [`Self::admit`]): a signer at its limit is
    /// refused before any RPC call. The request is counted after the forwarder's `verify`
    /// ([`Self::count_signer`]): anyone can replay a signer's old requests, whose signatures
    /// still recover, but their nonces are spent, so they fail `verify` and never count. Nobody
    /// can spend another signer's quota.
    fn signer_limit_read_only(&self, admission: &Admission) -> Result<()> {
        let per_signer = self.config.relay.rate_limit_per_signer;
        if admission.signer_hits >= per_signer {
            return Err(Error::SignerRateLimited(per_signer));
        }
        Ok(())
    }

    /// Stage 7, balance: the keys this daemon holds the lease of that hold at least
    /// `MIN_BALANCE`, in pool order. A key below it is passed over (the relay goes to another
    /// lane). When none of this daemon's keys can pay (it holds none: the cluster's keys are all
    /// leased to other daemons), the keys other daemons hold that can: the relay is handed off
    /// to their holder ([`Self::hand_off`]). 503 only when no daemon holds a key, or none that
    /// can pay.
    async fn lanes_that_can_pay(&self) -> Result<Payers> {
        let held = self.pool.held_lanes();
        // A relay reads its lanes fresh, and the cached balances are read again after it.
        self.balances_changed();
        let ours = self.paying(held.clone()).await?;
        if !ours.is_empty() {
            return Ok(Payers { lanes: ours, held: true });
        }
        let (all, me, now) = (self.pool.addresses(), self.config.keys.relayer_id.clone(), time::now());
        let others: Vec<Address> = self
            .stores
            .db(move |store| store.lane_holders(&all, now))
            .await?
            .into_iter()
            .filter(|holder| holder.holder.as_ref().is_some_and(|holder| *holder != me))
            .map(|holder| holder.lane)
            .collect();
        if others.is_empty() {
            return Err(if held.is_empty() { Error::NoFreeLane } else { Error::BalanceTooLow });
        }
        let theirs = self.paying(others).await?;
        if theirs.is_empty() {
            return Err(Error::BalanceTooLow);
        }
        Ok(Payers { lanes: theirs, held: false })
    }

    /// The latest block's number and time, by which a relay is verified and its deadline judged.
    async fn checked_head(&self) -> Result<(u64, u64)> {
        self.checks.reads.head.read((), || self.chain.head()).await
    }

    /// Those of `lanes` that hold at least `MIN_BALANCE`, in their order.
    async fn paying(&self, lanes: Vec<Address>) -> Result<Vec<Address>> {
        if lanes.is_empty() {
            return Ok(lanes);
        }
        let minimum = U256::from(self.config.relay.min_balance_wei);
        let balances = self.checks.reads.balances.read(lanes.clone(), || self.balances_of(lanes)).await?;
        Ok(balances.into_iter().filter(|(_, balance)| *balance >= minimum).map(|(lane, _)| lane).collect())
    }

    /// Stage 8, budget: is any transaction still affordable at today's fee, in the budget and in
    /// the signer's and the client's shares? Returns the fees. (Read only: stage 12 reserves.)
    async fn budget_left(&self, checked: &Checked, client: &str) -> Result<Fees> {
        let (signer, client, now) = (checked.signer(), client.to_owned(), time::now());
        // The fee and the store's sums need nothing of each other: read at once.
        let (fees, spent) = tokio::join!(
            self.checks.reads.fees.read((), || self.chain.fees()),
            self.stores.db(move |store| store.budget_and_shares(signer, &client, now))
        );
        let (fees, (budget, by_signer, by_client)) = (fees?, spent?);
        let cheapest = MIN_TX_GAS.saturating_mul(fees.max_fee_per_gas);
        let limits = self.config.budget.limits();
        if limits.total_wei.saturating_sub(budget.used_wei) < cheapest {
            return Err(Error::BudgetExhausted);
        }
        if limits.signer_wei.saturating_sub(by_signer) < cheapest {
            return Err(Error::SignerShareExhausted(self.config.budget.signer_share_percent));
        }
        if limits.client_wei.saturating_sub(by_client) < cheapest {
            return Err(Error::ClientShareExhausted(self.config.budget.client_share_percent));
        }
        let pacing = self.config.budget.pacing();
        if pacing.open_wei(limits.total_wei, budget.window_start, now).saturating_sub(budget.used_wei)
            < cheapest
            && let Some(opens_at) = pacing.next_slice_at(budget.window_start, now)
        {
            return Err(Error::slice_spent(opens_at, now));
        }
        Ok(fees)
    }

    /// Stage 9a, room before the deadline, by the head block's clock (the forwarder's, which on
    /// a local chain can run days ahead of the wall clock): a request that expires before it is
    /// mined passes every check at the head and reverts on inclusion, at the relayer's cost,
    /// with its forwarder nonce unspent, so it could be signed again and again. The same for a
    /// registration's consents, whose deadline the registry checks at inclusion.
    fn deadline_room(&self, checked: &Checked, head_time: u64) -> Result<()> {
        let deadline: u64 = checked.body.request.deadline.to();
        let margin = self.config.relay.deadline_margin_secs;
        if deadline != 0 && deadline < head_time.saturating_add(margin) {
            return Err(Error::DeadlineTooNear {
                deadline,
                head: head_time,
                left: deadline.saturating_sub(head_time),
                margin,
            });
        }
        // A registration's consents have a deadline of their own, checked by the registry at
        // inclusion when a consent is signed (an empty one is the caller's own, with none).
        if let Ok(call) = AgentRegistry::registerAgentWithConsentCall::abi_decode(&checked.body.request.data)
            && !(call.walletConsent.is_empty() && call.liabilityConsent.is_empty())
        {
            let consents: u64 = call.deadline.saturating_to();
            if margin > 0 && consents < head_time.saturating_add(margin) {
                return Err(Error::ConsentDeadlineTooNear {
                    deadline: consents,
                    head: head_time,
                    left: consents.saturating_sub(head_time),
                    margin,
                });
            }
            // The registry's other bound, also checked at inclusion: a block's time only grows,
            // so a deadline within it at the head stays within it.
            let latest = consent::latest_deadline(head_time);
            if consents > latest {
                return Err(Error::ConsentDeadlineTooFar { deadline: consents, head: head_time, latest });
            }
        }
        Ok(())
    }

    /// Stage 9b, the forwarder's own check (nonce, deadline, signer). It, the simulation and the
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
            (checked.signer(), checked.nonce(), self.config.relay.rate_limit_per_signer, time::now());
        match self.stores.db(move |store| store.count_signer(key, nonce, per_signer, now)).await? {
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
}

/// What a request's first store call led to ([`Relayer::admit`]).
enum Admitted {
    /// This very signed request is held: its relay's answer.
    Held(Relayed),
    /// A request to check, with what the call found.
    Checking(Admission),
}

/// The keys a relay may be reserved on (stage 7).
struct Payers {
    /// The keys, in pool order.
    lanes: Vec<Address>,
    /// This daemon holds them (it sends the relay), or other daemons do (it hands it off).
    held: bool,
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
