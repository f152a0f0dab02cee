//! When a follower looks at its relay's receipts again: a receipt appears only with a new block,
//! so a follower looks once the chain's head has moved past the head of its last look, not on a
//! timer of its own; and at the latest after a longest pause, so that a stuck transaction is
//! noticed (and a node whose head cannot be read is still asked) by the clock alone.

use std::time::Duration;

/// Longest pause between two looks at a followed relay, whatever the head does.
pub(crate) const FOLLOW_MAX_PAUSE: Duration = Duration::from_secs(2);

/// The last look at a followed relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LastLook {
    /// The head when it looked (or, before its first look, a block its transaction cannot be
    /// in: one read before it was sent). `None`: unknown (the node did not answer).
    pub(crate) head: Option<u64>,
    /// How long ago it looked.
    pub(crate) ago: Duration,
}

/// Whether to look again now, with the chain's head at `head` (`None`: not known now).
pub(crate) fn look_again(last: LastLook, head: Option<u64>) -> bool {
    if last.ago >= FOLLOW_MAX_PAUSE {
        return true;
    }
    match (last.head, head) {
        (Some(then), Some(now)) => now > then,
        // A head read now where none was at the last look: a block may have come meanwhile.
        (None, Some(_)) => true,
        (_, None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOON: Duration = Duration::from_millis(300);

    #[test]
    fn a_follower_looks_again_at_a_new_head_or_after_the_longest_pause() {
        let last = LastLook { head: Some(7), ago: SOON };
        assert!(!look_again(last, Some(7)), "no new block: no receipt can have appeared");
        assert!(!look_again(last, Some(6)), "a lagging node's head is no new block");
        assert!(look_again(last, Some(8)));
        assert!(!look_again(last, None), "the head unknown: wait for the longest pause");
        let long_ago = LastLook { head: Some(7), ago: FOLLOW_MAX_PAUSE };
        assert!(look_again(long_ago, Some(7)), "stuck transactions are noticed by the clock");
        assert!(look_again(long_ago, None));
        let unknown = LastLook { head: None, ago: SOON };
        assert!(look_again(unknown, Some(7)));
        assert!(!look_again(unknown, None));
    }
}
