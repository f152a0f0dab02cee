//! Signs and submits the relayer's transactions with a locally managed account nonce.
//!
//! One async mutex covers "pick the nonce, sign, record, submit": concurrent relays get
//! consecutive nonces, and a nonce only advances once the node has taken the transaction, so a
//! refused submission leaves no gap. Each signed transaction is recorded (the caller's `record`)
//! before the node can see it, so no crash leaves a transaction on chain that the store does not
//! know by its hash. After an answer that leaves our view of the nonce in doubt, the next
//! submission re-reads the node's pending count instead of guessing; after a submission whose
//! answer was lost, it first asks the node for that transaction (the rules are
//! [`crate::rules::nonce`]'s). Fee replacements and cancellations reuse a relay's nonce under the same
//! lock.
//!
//! A sender sends only while its daemon holds the key's lease ([`Lease`]): each record is made
//! under it, and a lease that is gone refuses the record, so nothing is submitted.

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::Encodable2718,
    network::TxSignerSync,
    primitives::{Address, B256, Bytes, TxKind, U256},
    signers::local::PrivateKeySigner,
};
use std::convert::Infallible;

use tokio::sync::Mutex;

use crate::{
    chain::RelayerChain,
    error::{Error, Result},
    keys::timings::{Phase, Timings},
    rules::fees::Fees,
    rules::nonce::{self, AfterReplace, AfterSend, Answer, NextNonce, Question, Resend},
    store::Lease,
};

/// A transaction of the relayer, before nonce and signature.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    /// Recipient: the forwarder for a relay, the relayer itself for a cancellation.
    pub(crate) to: Address,
    /// Gas limit.
    pub(crate) gas_limit: u64,
    /// Fees.
    pub(crate) fees: Fees,
    /// Calldata (`execute(req, signature)`; empty for a cancellation).
    pub(crate) input: Bytes,
}

/// A transaction the node accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    /// Its hash.
    pub(crate) hash: B256,
    /// The relayer-account nonce it used.
    pub(crate) nonce: u64,
}

/// What became of a transaction recorded under the key's lease.
#[derive(Debug)]
enum Submission {
    /// Submitted: the node's answer, classified, with its message.
    Answered(Answer, String),
    /// Not submitted: the lease's margin passed while it was recorded.
    Withheld,
}

/// Why a recorded transaction was not submitted, for the log.
const WITHHELD: &str = "recorded but not submitted: the key's lease may have run out while it was recorded";

/// The relayer's signer with its nonce.
#[derive(Debug)]
pub(crate) struct Sender {
    chain: RelayerChain,
    signer: PrivateKeySigner,
    chain_id: u64,
    /// The next nonce to use.
    next_nonce: Mutex<NextNonce>,
    /// This daemon's lease on the key, while it holds one.
    lease: std::sync::Mutex<Option<Lease>>,
    /// Where its sends spent their time.
    timings: Timings,
}

impl Sender {
    /// A sender for `signer` on `chain_id`.
    pub(crate) fn new(chain: RelayerChain, signer: PrivateKeySigner, chain_id: u64) -> Self {
        Self {
            chain,
            signer,
            chain_id,
            next_nonce: Mutex::new(NextNonce::Unknown),
            lease: std::sync::Mutex::new(None),
            timings: Timings::default(),
        }
    }

    /// Where this key's sends spent their time.
    pub(crate) fn timings(&self) -> &Timings {
        &self.timings
    }

    /// The lease this daemon holds on the key, if any.
    pub(crate) fn lease(&self) -> Option<Lease> {
        *self.lease_slot()
    }

    /// The lease's slot. A panic cannot leave an `Option<Lease>` half-written, so a poisoned
    /// lock is reused.
    fn lease_slot(&self) -> std::sync::MutexGuard<'_, Option<Lease>> {
        self.lease.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts sending under `lease`, just taken. The next nonce is read from the node again:
    /// another daemon may have sent on the key since this one last did.
    pub(crate) async fn hold(&self, lease: Lease) {
        let mut next = self.next_nonce.lock().await;
        *next = NextNonce::Unknown;
        *self.lease_slot() = Some(lease);
    }

    /// Stops sending at once: the lease was lost (another daemon holds the key now).
    pub(crate) fn lose(&self) {
        *self.lease_slot() = None;
    }

    /// Stops sending and waits for a send or replacement under way to finish (it was recorded
    /// under the lease, so it must reach the node before the lease is given back); returns the
    /// lease to give back.
    pub(crate) async fn give_up(&self) -> Option<Lease> {
        let lease = self.lease_slot().take();
        let _sends_done = self.next_nonce.lock().await;
        lease
    }

    /// The relayer's address.
    pub(crate) fn address(&self) -> Address {
        self.signer.address()
    }

    /// Signs `outgoing` with the next nonce, has `record` store its hash and nonce under the
    /// key's lease, then submits it (nothing is submitted if `record` fails, nor without a lease:
    /// [`Error::LaneLost`]). A "nonce too low" answer means another
    /// transaction took the nonce: the nonce is re-read from the node and the transaction
    /// re-signed (and recorded again) once with it. [`Error::Unconfirmed`] means the node may or
    /// may not have the transaction; [`Error::Withheld`], that it was recorded but not submitted
    /// ([`Sender::record_then_submit`]): the caller takes the record back.
    pub(crate) async fn send<Recorded: Future<Output = Result<()>>>(
        &self,
        outgoing: &Outgoing,
        record: impl Fn(Sent, Lease) -> Recorded,
    ) -> Result<Sent> {
        let asked = std::time::Instant::now();
        let mut next = self.next_nonce.lock().await;
        self.timings.add(Phase::Waiting, asked.elapsed());
        self.timings.sent();
        let lease = self.lease().ok_or(Error::LaneLost(self.address()))?;
        let asking = std::time::Instant::now();
        let mut nonce = match next.question() {
            Question::None(nonce) => nonce,
            Question::PendingCount => self.chain.pending_nonce(self.address()).await?,
            Question::Knows { hash, nonce } => {
                if self.chain.knows_transaction(hash).await? {
                    nonce + 1
                } else {
                    self.chain.pending_nonce(self.address()).await?
                }
            }
        };
        self.timings.add(Phase::Nonce, asking.elapsed());
        let mut resigned = false;
        loop {
            let (hash, raw) = self.sign(outgoing, nonce)?;
            let recorded = async { record(Sent { hash, nonce }, lease).await.map(Ok::<(), Infallible>) };
            let (answer, message) = match self.record_then_submit(&raw, lease, recorded).await? {
                Ok(Submission::Answered(answer, message)) => (answer, message),
                Ok(Submission::Withheld) => {
                    // The node never had it: the next send reads the nonce from the node again.
                    *next = NextNonce::Unknown;
                    return Err(Error::Withheld { tx_hash: hash, nonce });
                }
                Err(never) => match never {},
            };
            let (state, step) = nonce::after_send(nonce, hash, answer, resigned);
            *next = state;
            match step {
                AfterSend::Sent => {
                    if answer == Answer::AlreadyKnown {
                        tracing::info!(%hash, nonce, "node already had the transaction");
                    }
                    return Ok(Sent { hash, nonce });
                }
                AfterSend::Unconfirmed => {
                    return Err(Error::Unconfirmed { tx_hash: hash.to_string(), nonce, message });
                }
                AfterSend::Resign => {
                    let fresh = self.chain.pending_nonce(self.address()).await?;
                    tracing::warn!(nonce, fresh, "relayer nonce already used; re-reading it from the node");
                    nonce = fresh;
                    resigned = true;
                }
                AfterSend::Refused => return Err(Error::Rpc(message)),
                AfterSend::Unfunded => {
                    tracing::warn!(lane = %self.address(), nonce, %message, "the node refused the send: the key cannot pay it");
                    return Err(Error::BalanceTooLow);
                }
            }
        }
    }

    /// Signs `outgoing` with the relayer nonce `nonce` that an earlier transaction of a relay
    /// holds (a fee replacement or a cancellation), has `record` store it under the key's lease,
    /// and submits it. The next nonce does not move; the sender's lock keeps this from
    /// interleaving with a send. When `record` refuses (the relay closed meanwhile, or the budget
    /// cannot cover the higher fees), nothing is submitted and its refusal is returned as it is;
    /// past the lease's margin it is recorded but not submitted ([`AfterReplace::Withheld`]).
    /// With [`Resend::IfFree`], the node's counts are read first, under the same lock (so no
    /// send takes the nonce between them and the submission): unless the nonce is free, nothing
    /// is recorded or submitted ([`AfterReplace::NotFree`]).
    pub(crate) async fn replace<Refused, Recorded>(
        &self,
        outgoing: &Outgoing,
        nonce: u64,
        when: Resend,
        record: impl FnOnce(B256, Lease) -> Recorded,
    ) -> Result<(B256, std::result::Result<AfterReplace, Refused>)>
    where
        Recorded: Future<Output = Result<std::result::Result<(), Refused>>>,
    {
        let _next = self.next_nonce.lock().await;
        let lease = self.lease().ok_or(Error::LaneLost(self.address()))?;
        let (hash, raw) = self.sign(outgoing, nonce)?;
        if let Resend::IfFree { held_by_another } = when
            && !self.is_free(nonce, held_by_another).await?
        {
            return Ok((hash, Ok(AfterReplace::NotFree)));
        }
        let (step, message) = match self.record_then_submit(&raw, lease, record(hash, lease)).await? {
            Err(refused) => return Ok((hash, Err(refused))),
            Ok(Submission::Answered(answer, message)) => (nonce::after_replace(answer), message),
            Ok(Submission::Withheld) => (AfterReplace::Withheld, WITHHELD.to_owned()),
        };
        if !matches!(step, AfterReplace::Sent) {
            tracing::info!(%hash, nonce, ?step, %message, "replacement not taken");
        }
        Ok((hash, Ok(step)))
    }

    /// Whether `nonce` is free in the node ([`nonce::is_free`]). The mined count is read first:
    /// a transaction mined between the two reads then shows in the pending count, never in
    /// neither.
    async fn is_free(&self, nonce: u64, held_by_another: bool) -> Result<bool> {
        let mined = self.chain.mined_nonce(self.address()).await?;
        let pending = self.chain.pending_nonce(self.address()).await?;
        let free = nonce::is_free(nonce, mined, pending, held_by_another);
        if !free {
            let lane = self.address();
            tracing::debug!(%lane, nonce, mined, pending, held_by_another, "the nonce is taken: not sent again");
        }
        Ok(free)
    }

    /// Has `record` store a signed transaction under `lease`, then submits `raw`, unless `record`
    /// refused it or the lease's margin passed while it recorded: the one rule for every
    /// transaction a sender submits (first sends, fee replacements, cancellations). The record
    /// found the lease current with its margin left; a daemon frozen (or a store slow) past that
    /// margin since may have lost the key meanwhile, and its next holder may use the nonce, so
    /// the transaction is withheld: the caller takes its record back (nobody else has its bytes).
    async fn record_then_submit<Refused>(
        &self,
        raw: &[u8],
        lease: Lease,
        record: impl Future<Output = Result<std::result::Result<(), Refused>>>,
    ) -> Result<std::result::Result<Submission, Refused>> {
        let recording = std::time::Instant::now();
        let recorded = record.await;
        let recorded_in = recording.elapsed();
        self.timings.add(Phase::Recording, recorded_in);
        if let Err(refused) = recorded? {
            return Ok(Err(refused));
        }
        if recorded_in >= std::time::Duration::from_secs(lease.margin_secs) {
            tracing::warn!(lane = %lease.lane, "{WITHHELD}");
            return Ok(Ok(Submission::Withheld));
        }
        let submitting = std::time::Instant::now();
        let (answer, message) = self.submit(raw).await;
        self.timings.add(Phase::Submitting, submitting.elapsed());
        Ok(Ok(Submission::Answered(answer, message)))
    }

    /// Forgets the local nonce, so the next send re-reads it from the node: the reconciler found
    /// a transaction of ours that the node no longer has, so nonces after it would stay stuck.
    pub(crate) async fn resync(&self) {
        *self.next_nonce.lock().await = NextNonce::Unknown;
    }

    /// Submits `raw`; the node's answer, classified, with its message.
    async fn submit(&self, raw: &[u8]) -> (Answer, String) {
        match self.chain.send_raw(raw).await {
            Ok(()) => (Answer::Taken, String::new()),
            Err(failure) if !failure.node_answered => (Answer::Lost, failure.message),
            Err(failure) => (Answer::of_refusal(&failure.message), failure.message),
        }
    }

    /// `outgoing` as the unsigned transaction an OP Stack `GasPriceOracle` quotes the L1 data fee
    /// of (EIP-2718: the type byte, then the RLP of the fields). Its nonce is picked only when it
    /// is signed, so this has the largest, the most bytes a nonce takes: the quote never falls
    /// short for the nonce's sake.
    pub(crate) fn unsigned(&self, outgoing: &Outgoing) -> Vec<u8> {
        self.transaction(outgoing, u64::MAX).encoded_for_signing()
    }

    fn transaction(&self, outgoing: &Outgoing, nonce: u64) -> TxEip1559 {
        TxEip1559 {
            chain_id: self.chain_id,
            nonce,
            gas_limit: outgoing.gas_limit,
            max_fee_per_gas: outgoing.fees.max_fee_per_gas,
            max_priority_fee_per_gas: outgoing.fees.max_priority_fee_per_gas,
            to: TxKind::Call(outgoing.to),
            value: U256::ZERO,
            access_list: Default::default(),
            input: outgoing.input.clone(),
        }
    }

    fn sign(&self, outgoing: &Outgoing, nonce: u64) -> Result<(B256, Vec<u8>)> {
        let mut tx = self.transaction(outgoing, nonce);
        let signature = self
            .signer
            .sign_transaction_sync(&mut tx)
            .map_err(|error| Error::Rpc(format!("signing the transaction: {error}")))?;
        let envelope: TxEnvelope = tx.into_signed(signature).into();
        Ok((*envelope.tx_hash(), envelope.encoded_2718()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::rules::fees::Fees;

    /// A lease whose margin is one second: a record taking longer passes it.
    const LEASE: Lease = Lease { lane: Address::ZERO, fence: 1, margin_secs: 1 };
    const PAST_THE_MARGIN: Duration = Duration::from_millis(1_100);

    /// A sender whose node is a closed port on loopback: anything it submits has its answer lost.
    fn sender() -> Sender {
        let chain = RelayerChain::connect("http://127.0.0.1:1", Address::ZERO).unwrap();
        let sender = Sender::new(chain, PrivateKeySigner::random(), 31_337);
        *sender.lease_slot() = Some(LEASE);
        sender
    }

    fn outgoing() -> Outgoing {
        let fees = Fees { max_fee_per_gas: 10, max_priority_fee_per_gas: 1 };
        Outgoing { to: Address::ZERO, gas_limit: 21_000, fees, input: Bytes::new() }
    }

    /// The margin rule is one path for every transaction: a first send, a fee replacement and a
    /// cancellation recorded past the lease's margin are all withheld, never submitted; recorded
    /// in time, they are submitted (here the node's answer is lost, so the sender knows it tried).
    #[tokio::test]
    async fn every_transaction_recorded_past_the_leases_margin_is_withheld() {
        let sender = sender();
        *sender.next_nonce.lock().await = NextNonce::Known(4);
        let slow = |_, _| async {
            tokio::time::sleep(PAST_THE_MARGIN).await;
            Ok(())
        };
        let withheld = sender.send(&outgoing(), slow).await.unwrap_err();
        assert!(matches!(withheld, Error::Withheld { nonce: 4, .. }), "{withheld:?}");
        assert_eq!(*sender.next_nonce.lock().await, NextNonce::Unknown, "read from the node next");

        let cancellation = Outgoing { to: sender.address(), ..outgoing() };
        let fee_bump = Outgoing { input: Bytes::from(vec![1, 2, 3]), ..outgoing() };
        for (kind, outgoing) in [("a fee replacement", fee_bump), ("a cancellation", cancellation)] {
            let slow = |_, _| async {
                tokio::time::sleep(PAST_THE_MARGIN).await;
                Ok(Ok::<(), ()>(()))
            };
            let (_, step) = sender.replace(&outgoing, 4, Resend::Always, slow).await.unwrap();
            assert_eq!(step, Ok(AfterReplace::Withheld), "{kind}");
        }

        let quick = |_, _| async { Ok(Ok::<(), ()>(())) };
        let (_, step) = sender.replace(&outgoing(), 4, Resend::Always, quick).await.unwrap();
        assert_eq!(step, Ok(AfterReplace::Unconfirmed), "submitted: its answer lost");
        *sender.next_nonce.lock().await = NextNonce::Known(4);
        let submitted = sender.send(&outgoing(), |_, _| async { Ok(()) }).await.unwrap_err();
        assert!(matches!(submitted, Error::Unconfirmed { nonce: 4, .. }), "{submitted:?}");
    }
}
