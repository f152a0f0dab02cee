//! Signs and submits the relayer's transactions with a locally managed account nonce.
//!
//! One async mutex covers "pick the nonce, sign, record, submit": concurrent relays get
//! consecutive nonces, and a nonce only advances once the node has taken the transaction, so a
//! refused submission leaves no gap. Each signed transaction is recorded (the caller's `record`)
//! before the node can see it, so no crash leaves a transaction on chain that the store does not
//! know by its hash. After an answer that leaves our view of the nonce in doubt, the next
//! submission re-reads the node's pending count instead of guessing; after a submission whose
//! answer was lost, it first asks the node for that transaction: a pending count read from a
//! node behind a load balancer may not include it yet, and reusing its nonce would replace it.

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::Encodable2718,
    network::TxSignerSync,
    primitives::{Address, B256, Bytes, TxKind, U256},
    signers::local::PrivateKeySigner,
};
use tokio::sync::Mutex;

use crate::{
    chain::{Fees, RelayerChain},
    error::{Error, Result},
};

/// A transaction to the forwarder, before nonce and signature.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    /// Gas limit.
    pub(crate) gas_limit: u64,
    /// Fees.
    pub(crate) fees: Fees,
    /// Calldata (`execute(req, signature)`).
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

/// How the node answered a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// This exact transaction is already in the pool: it was taken before, which is success.
    AlreadyKnown,
    /// The nonce is used (mined or pending) by a transaction we did not account for.
    NonceUsed,
    /// Anything else: the nonce state is unknown.
    Other,
}

fn classify(message: &str) -> Answer {
    let message = message.to_ascii_lowercase();
    if message.contains("already known") || message.contains("already imported") {
        Answer::AlreadyKnown
    } else if message.contains("nonce too low")
        || message.contains("replacement transaction underpriced")
        || message.contains("nonce has already been used")
    {
        Answer::NonceUsed
    } else {
        Answer::Other
    }
}

/// What the sender knows of its next nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NextNonce {
    /// Ask the node for its pending count.
    Unknown,
    /// This one.
    Known(u64),
    /// The transaction `hash` was submitted with `nonce` but the answer was lost: if the node
    /// knows it, continue after it; otherwise ask for the pending count.
    AfterLost { hash: B256, nonce: u64 },
}

/// The relayer's signer with its nonce.
#[derive(Debug)]
pub(crate) struct Sender {
    chain: RelayerChain,
    signer: PrivateKeySigner,
    chain_id: u64,
    forwarder: Address,
    /// The next nonce to use.
    next_nonce: Mutex<NextNonce>,
}

impl Sender {
    /// A sender for `signer` on `chain_id`, sending to `forwarder`.
    pub(crate) fn new(
        chain: RelayerChain,
        signer: PrivateKeySigner,
        chain_id: u64,
        forwarder: Address,
    ) -> Self {
        Self { chain, signer, chain_id, forwarder, next_nonce: Mutex::new(NextNonce::Unknown) }
    }

    /// The relayer's address.
    pub(crate) fn address(&self) -> Address {
        self.signer.address()
    }

    /// Signs `outgoing`, has `record` store its hash and nonce, then submits it (nothing is
    /// submitted if `record` fails). A "nonce too low" answer means another transaction took the
    /// nonce: the nonce is re-read from the node and the transaction re-signed (and recorded
    /// again) once with it. [`Error::Unconfirmed`] means the node may or may not have the
    /// transaction.
    pub(crate) async fn send<Recorded: Future<Output = Result<()>>>(
        &self,
        outgoing: &Outgoing,
        record: impl Fn(Sent) -> Recorded,
    ) -> Result<Sent> {
        let mut next = self.next_nonce.lock().await;
        let mut nonce = match *next {
            NextNonce::Known(nonce) => nonce,
            NextNonce::Unknown => self.chain.pending_nonce(self.address()).await?,
            NextNonce::AfterLost { hash, nonce } => {
                if self.chain.knows_transaction(hash).await? {
                    nonce + 1
                } else {
                    self.chain.pending_nonce(self.address()).await?
                }
            }
        };
        let mut resynced = false;
        loop {
            let (hash, raw) = self.sign(outgoing, nonce)?;
            record(Sent { hash, nonce }).await?;
            let failure = match self.chain.send_raw(&raw).await {
                Ok(()) => {
                    *next = NextNonce::Known(nonce + 1);
                    return Ok(Sent { hash, nonce });
                }
                Err(failure) => failure,
            };
            if !failure.node_answered {
                // The node may have taken it: look for it before the next send, and let the
                // caller keep the relay on the books.
                *next = NextNonce::AfterLost { hash, nonce };
                return Err(Error::Unconfirmed {
                    tx_hash: hash.to_string(),
                    nonce,
                    message: failure.message,
                });
            }
            let message = failure.message;
            match classify(&message) {
                Answer::AlreadyKnown => {
                    tracing::info!(%hash, nonce, "node already had the transaction");
                    *next = NextNonce::Known(nonce + 1);
                    return Ok(Sent { hash, nonce });
                }
                Answer::NonceUsed if !resynced => {
                    let fresh = self.chain.pending_nonce(self.address()).await?;
                    tracing::warn!(nonce, fresh, "relayer nonce already used; re-reading it from the node");
                    nonce = fresh;
                    resynced = true;
                }
                Answer::NonceUsed | Answer::Other => {
                    // Refused (funds, fees, a nonce still clashing): nothing was taken. Re-read
                    // the nonce next time rather than trust a view the node just contradicted.
                    *next = NextNonce::Unknown;
                    return Err(Error::Rpc(message));
                }
            }
        }
    }

    /// Forgets the local nonce, so the next send re-reads it from the node: the reconciler found
    /// a transaction of ours that the node no longer has, so nonces after it would stay stuck.
    pub(crate) async fn resync(&self) {
        *self.next_nonce.lock().await = NextNonce::Unknown;
    }

    fn sign(&self, outgoing: &Outgoing, nonce: u64) -> Result<(B256, Vec<u8>)> {
        let mut tx = TxEip1559 {
            chain_id: self.chain_id,
            nonce,
            gas_limit: outgoing.gas_limit,
            max_fee_per_gas: outgoing.fees.max_fee_per_gas,
            max_priority_fee_per_gas: outgoing.fees.max_priority_fee_per_gas,
            to: TxKind::Call(self.forwarder),
            value: U256::ZERO,
            access_list: Default::default(),
            input: outgoing.input.clone(),
        };
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
    use super::*;

    #[test]
    fn node_answers_are_classified() {
        assert_eq!(
            classify("server returned an error response: error code -32003: nonce too low"),
            Answer::NonceUsed
        );
        assert_eq!(classify("Nonce too low"), Answer::NonceUsed);
        assert_eq!(classify("already known"), Answer::AlreadyKnown);
        assert_eq!(classify("replacement transaction underpriced"), Answer::NonceUsed);
        assert_eq!(classify("insufficient funds for gas * price + value"), Answer::Other);
    }
}
