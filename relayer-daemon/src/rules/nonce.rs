//! The relayer account's nonce as a pure state machine: what the sender knows of its next
//! nonce, what it must ask the node before signing, and what each answer of the node to a
//! submission means. No I/O here: [`crate::keys::sender::Sender`] asks the node and feeds the answers
//! in, which keeps every case ("nonce too low", "already known", a lost answer, a replacement)
//! testable without a node.

use alloy::primitives::B256;

/// How the node answered a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It took the transaction.
    Taken,
    /// This exact transaction is already in the pool (taken before): success.
    AlreadyKnown,
    /// The nonce is used by a mined transaction ("nonce too low").
    NonceTooLow,
    /// Another transaction with this nonce is pending and pays as much or more.
    Underpriced,
    /// The key cannot pay the transaction's worst case ("insufficient funds for gas * price +
    /// value"): nothing was taken. Its balance fell since the relay's balance check (another
    /// daemon's sends on the key, a withdrawal), or `MIN_BALANCE` is below one relay's cost.
    Unfunded,
    /// Any other refusal (fees…): nothing was taken, the nonce state is unknown.
    Refused,
    /// No answer (timeout, dropped connection): the node may or may not have it.
    Lost,
}

impl Answer {
    /// Classifies the node's error message (a refusal).
    pub(crate) fn of_refusal(message: &str) -> Self {
        let message = message.to_ascii_lowercase();
        if message.contains("already known") || message.contains("already imported") {
            Self::AlreadyKnown
        } else if message.contains("nonce too low") || message.contains("nonce has already been used") {
            Self::NonceTooLow
        } else if message.contains("insufficient funds") {
            Self::Unfunded
        } else if message.contains("replacement transaction underpriced")
            || message.contains("replacement fee too low")
        {
            Self::Underpriced
        } else {
            Self::Refused
        }
    }
}

/// What the sender knows of its next nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextNonce {
    /// Ask the node for its pending count.
    Unknown,
    /// This one.
    Known(u64),
    /// The transaction `hash` was submitted with `nonce` but the answer was lost: if the node
    /// knows it, continue after it; otherwise ask for the pending count. A pending count read
    /// from a node behind a load balancer may not include it yet, and reusing its nonce would
    /// replace it.
    AfterLost { hash: B256, nonce: u64 },
}

/// What the sender must ask the node before it can pick a nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Question {
    /// Nothing: use this nonce.
    None(u64),
    /// The account's pending transaction count.
    PendingCount,
    /// Whether the node knows `hash`; if it does, the nonce is `nonce + 1`, else ask
    /// [`Question::PendingCount`].
    Knows { hash: B256, nonce: u64 },
}

impl NextNonce {
    /// What to ask before the next first send.
    pub(crate) fn question(self) -> Question {
        match self {
            Self::Known(nonce) => Question::None(nonce),
            Self::Unknown => Question::PendingCount,
            Self::AfterLost { hash, nonce } => Question::Knows { hash, nonce },
        }
    }
}

/// What to do after a relay's first transaction, signed with `nonce`, got an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterSend {
    /// Sent: the relay has its transaction.
    Sent,
    /// Another transaction took the nonce: read the pending count and sign again (once).
    Resign,
    /// Refused: nothing was taken.
    Refused,
    /// Refused because the key cannot pay: nothing was taken, and the relay is refused as a
    /// key below `MIN_BALANCE` is.
    Unfunded,
    /// The node may have it: keep the relay on the books.
    Unconfirmed,
}

/// The next state and the step after a first send with `nonce` (hash `hash`) got `answer`;
/// `resigned` says whether this was already the second try.
pub(crate) fn after_send(nonce: u64, hash: B256, answer: Answer, resigned: bool) -> (NextNonce, AfterSend) {
    match answer {
        Answer::Taken | Answer::AlreadyKnown => (NextNonce::Known(nonce + 1), AfterSend::Sent),
        Answer::Lost => (NextNonce::AfterLost { hash, nonce }, AfterSend::Unconfirmed),
        // Our view of the nonce was behind: someone used the wallet, or a lost send of ours
        // went through after all.
        Answer::NonceTooLow | Answer::Underpriced if !resigned => (NextNonce::Unknown, AfterSend::Resign),
        // Refused (funds, fees, a nonce still clashing): re-read the nonce next time rather
        // than trust a view the node just contradicted.
        Answer::NonceTooLow | Answer::Underpriced | Answer::Refused => {
            (NextNonce::Unknown, AfterSend::Refused)
        }
        Answer::Unfunded => (NextNonce::Unknown, AfterSend::Unfunded),
    }
}

/// What a transaction sent again at a relay's own nonce (fee replacement or cancellation) led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterReplace {
    /// The node has it.
    Sent,
    /// The nonce is mined already: by one of the relay's earlier transactions, most likely.
    /// The follower finds out from the receipts.
    NonceMined,
    /// A pending transaction at that nonce pays as much: bump the fees further next time.
    Underpriced,
    /// Refused for another reason.
    Refused,
    /// The node may have it.
    Unconfirmed,
    /// Recorded, not submitted: the key's lease may have run out while it was recorded (never
    /// an answer of the node's; the sender decides it before submitting).
    Withheld,
    /// Neither recorded nor submitted: sent again only while its nonce is free
    /// ([`Resend::IfFree`]), and it no longer is.
    NotFree,
}

/// When a transaction at a relay's own nonce may be submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    /// Whatever the node holds at the nonce: a fee replacement or a cancellation outbids the
    /// relay's transaction there, or the node refuses it.
    Always,
    /// Only while the nonce is free ([`is_free`]): the relay's first transaction, which the node
    /// no longer has (dropped from its pool). Its nonce may have gone to another relay since (a
    /// send after the sender re-read the node's pending count), whose transaction one sent over
    /// it would knock out.
    IfFree {
        /// The node holds another relay's transaction at the nonce (the store's relays at that
        /// nonce on the key, asked of the node one by one).
        held_by_another: bool,
    },
}

/// Whether relayer nonce `nonce`, whose transaction the node no longer has, is free for it to
/// be sent again: the node's counts (`mined`: its mined transactions; `pending`: with those in
/// its pool that it can mine next) show no transaction at it, and the node holds no other
/// relay's. A pending count below it means an earlier nonce is missing from the node too: one
/// queued at this nonce behind that gap does not show in the counts, which is why another
/// relay's is asked of the node by its hash.
pub(crate) fn is_free(nonce: u64, mined: u64, pending: u64, held_by_another: bool) -> bool {
    mined <= nonce && pending <= nonce && !held_by_another
}

/// A replacement never moves the next nonce: it reuses a nonce the sender handed out before.
/// Only a lost answer changes nothing either: the relay's earlier transaction already holds the
/// nonce in the node's view.
pub(crate) fn after_replace(answer: Answer) -> AfterReplace {
    match answer {
        Answer::Taken | Answer::AlreadyKnown => AfterReplace::Sent,
        Answer::NonceTooLow => AfterReplace::NonceMined,
        Answer::Underpriced => AfterReplace::Underpriced,
        Answer::Refused | Answer::Unfunded => AfterReplace::Refused,
        Answer::Lost => AfterReplace::Unconfirmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: B256 = B256::repeat_byte(7);

    #[test]
    fn node_messages_are_classified() {
        assert_eq!(
            Answer::of_refusal("server returned an error response: error code -32003: nonce too low"),
            Answer::NonceTooLow
        );
        assert_eq!(Answer::of_refusal("Nonce too low"), Answer::NonceTooLow);
        assert_eq!(Answer::of_refusal("already known"), Answer::AlreadyKnown);
        assert_eq!(Answer::of_refusal("replacement transaction underpriced"), Answer::Underpriced);
        assert_eq!(Answer::of_refusal("insufficient funds for gas * price + value"), Answer::Unfunded);
        // anvil's words.
        assert_eq!(Answer::of_refusal("Insufficient funds for gas * price + value"), Answer::Unfunded);
        assert_eq!(after_send(4, HASH, Answer::Unfunded, false), (NextNonce::Unknown, AfterSend::Unfunded));
        assert_eq!(after_replace(Answer::Unfunded), AfterReplace::Refused);
        assert_eq!(Answer::of_refusal("max fee per gas less than block base fee"), Answer::Refused);
    }

    #[test]
    fn a_taken_or_already_known_send_moves_to_the_next_nonce() {
        assert_eq!(after_send(4, HASH, Answer::Taken, false), (NextNonce::Known(5), AfterSend::Sent));
        assert_eq!(after_send(4, HASH, Answer::AlreadyKnown, true), (NextNonce::Known(5), AfterSend::Sent));
        assert_eq!(NextNonce::Known(5).question(), Question::None(5));
    }

    #[test]
    fn nonce_too_low_re_reads_the_nonce_and_signs_again_once() {
        assert_eq!(after_send(4, HASH, Answer::NonceTooLow, false), (NextNonce::Unknown, AfterSend::Resign));
        assert_eq!(after_send(4, HASH, Answer::Underpriced, false), (NextNonce::Unknown, AfterSend::Resign));
        assert_eq!(after_send(6, HASH, Answer::NonceTooLow, true), (NextNonce::Unknown, AfterSend::Refused));
        assert_eq!(NextNonce::Unknown.question(), Question::PendingCount);
    }

    #[test]
    fn a_lost_answer_asks_the_node_for_that_transaction_first() {
        let (state, step) = after_send(4, HASH, Answer::Lost, false);
        assert_eq!(step, AfterSend::Unconfirmed);
        assert_eq!(state.question(), Question::Knows { hash: HASH, nonce: 4 });
        assert_eq!(after_send(4, HASH, Answer::Refused, false), (NextNonce::Unknown, AfterSend::Refused));
    }

    #[test]
    fn a_dropped_transactions_nonce_is_free_only_while_nothing_holds_it() {
        assert!(is_free(4, 4, 4, false), "dropped from the pool, nothing at its nonce: the key's next");
        assert!(is_free(4, 3, 4, false), "an earlier relay still pending before it");
        assert!(is_free(4, 3, 3, false), "an earlier nonce dropped too: it waits behind it");
        assert!(!is_free(4, 5, 5, false), "mined: by one of the relay's own, or another transaction");
        assert!(!is_free(4, 4, 5, false), "a transaction the node has holds it");
        assert!(!is_free(4, 4, 6, false), "…and later ones wait behind it");
        assert!(!is_free(4, 3, 3, true), "another relay's, queued behind the earlier gap");
        assert!(!is_free(4, 4, 4, true), "another relay's, as a node behind a load balancer tells it");
    }

    #[test]
    fn a_replacement_reads_its_answers_for_its_own_nonce() {
        assert_eq!(after_replace(Answer::Taken), AfterReplace::Sent);
        assert_eq!(after_replace(Answer::AlreadyKnown), AfterReplace::Sent);
        assert_eq!(after_replace(Answer::NonceTooLow), AfterReplace::NonceMined);
        assert_eq!(after_replace(Answer::Underpriced), AfterReplace::Underpriced);
        assert_eq!(after_replace(Answer::Lost), AfterReplace::Unconfirmed);
        assert_eq!(after_replace(Answer::Refused), AfterReplace::Refused);
    }
}
