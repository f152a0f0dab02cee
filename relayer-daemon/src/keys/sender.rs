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
use tokio::sync::Mutex;

use crate::{
    chain::RelayerChain,
    error::{Error, Result},
    rules::fees::Fees,
    rules::nonce::{self, AfterReplace, AfterSend, Answer, NextNonce, Question},
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
        }
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
    /// may not have the transaction.
    pub(crate) async fn send<Recorded: Future<Output = Result<()>>>(
        &self,
        outgoing: &Outgoing,
        record: impl Fn(Sent, Lease) -> Recorded,
    ) -> Result<Sent> {
        let mut next = self.next_nonce.lock().await;
        let lease = self.lease().ok_or(Error::LaneLost(self.address()))?;
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
        let mut resigned = false;
        loop {
            let (hash, raw) = self.sign(outgoing, nonce)?;
            let recording = std::time::Instant::now();
            record(Sent { hash, nonce }, lease).await?;
            // The record found the lease current with its margin left. A daemon frozen (or a
            // store slow) past that margin since may have lost the key meanwhile, and its next
            // holder may use this nonce: the transaction stays recorded but unsubmitted, as if
            // its answer were lost (the key's holder drops it: the node never had it).
            let (answer, message) = if recording.elapsed() < std::time::Duration::from_secs(lease.margin_secs)
            {
                self.submit(&raw).await
            } else {
                (
                    Answer::Lost,
                    "not submitted: the key's lease may have run out since it was recorded".to_owned(),
                )
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
            }
        }
    }

    /// Signs `outgoing` with the relayer nonce `nonce` that an earlier transaction of a relay
    /// holds (a fee replacement or a cancellation), has `record` store it under the key's lease,
    /// and submits it. The next nonce does not move; the sender's lock keeps this from
    /// interleaving with a send. When `record` refuses (the relay closed meanwhile, or the budget
    /// cannot cover the higher fees), nothing is submitted and its refusal is returned as it is.
    pub(crate) async fn replace<Refused, Recorded>(
        &self,
        outgoing: &Outgoing,
        nonce: u64,
        record: impl FnOnce(B256, Lease) -> Recorded,
    ) -> Result<(B256, std::result::Result<AfterReplace, Refused>)>
    where
        Recorded: Future<Output = Result<std::result::Result<(), Refused>>>,
    {
        let _next = self.next_nonce.lock().await;
        let lease = self.lease().ok_or(Error::LaneLost(self.address()))?;
        let (hash, raw) = self.sign(outgoing, nonce)?;
        if let Err(refused) = record(hash, lease).await? {
            return Ok((hash, Err(refused)));
        }
        let (answer, message) = self.submit(&raw).await;
        let step = nonce::after_replace(answer);
        if !matches!(step, AfterReplace::Sent) {
            tracing::info!(%hash, nonce, ?step, %message, "replacement not taken");
        }
        Ok((hash, Ok(step)))
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
