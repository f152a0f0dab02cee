//! What travels on the webhooks' queues, and the rules that need no I/O: how a receiver's events
//! are cut into messages, how they are grouped into `sendBatch` calls, and the pause before an
//! attempt is made again.

use kya_core::feed::{Cursor, Event};
use serde::{Deserialize, Serialize};

/// The most bytes of one message's JSON: under a Queue message's 128 KB (with its ~100 bytes of
/// metadata), and near the 64 KB a Queue operation is billed by when a run's events are few.
pub(crate) const MESSAGE_BYTES: usize = 100_000;

/// The most messages and bytes one `sendBatch` takes (Queues: 100 messages, 256 KB).
const SEND_MESSAGES: usize = 100;
const SEND_BYTES: usize = 250_000;

/// A receiver's next events, handed from an index run to its sender (`kya-webhooks` queue).
///
/// A receiver's handoffs form a chain: each names the last event of the one before (`after`),
/// so its sender can put them back in feed order whatever order the queue delivers them in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Handoff {
    pub(crate) receiver: String,
    /// The last event of this receiver's previous handoff; `None` for its first.
    pub(crate) after: Option<Cursor>,
    /// Its events, in feed order: at least one.
    pub(crate) events: Vec<Event>,
}

impl Handoff {
    /// Its last event's id: where the next handoff of its receiver starts.
    pub(crate) fn last(&self) -> Option<Cursor> {
        self.events.last().map(|event| event.id)
    }
}

/// An event its sender gave up on (`kya-webhooks-dead` queue), and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeadLetter {
    pub(crate) receiver: String,
    pub(crate) event: Event,
    pub(crate) attempts: u32,
    /// The last attempt's error (a status, a timeout, a connection error; never a URL).
    pub(crate) last_error: String,
}

/// What the dead-letter queue holds: an event a sender gave up on, or a handoff the queue could
/// not hand to its sender within its retries.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub(crate) enum Dead {
    Letter(Box<DeadLetter>),
    Handoff(Handoff),
}

/// How far a receiver's chain of handoffs is whole: from `accepted` (the last event of the
/// handoffs taken in order so far; `None` before the first), following `links` (each handoff
/// that arrived and is not taken yet, as its `after` and its last event). Returns where the
/// chain now ends and which links it took. A first handoff (`after: None`) starts the chain,
/// or starts it again after the outlet lost its record of it; the chain never moves back.
pub(crate) fn follow_chain(
    accepted: Option<Cursor>,
    links: &[(Option<Cursor>, Cursor)],
) -> (Option<Cursor>, Vec<usize>) {
    let mut through = accepted;
    let mut taken = Vec::new();
    while let Some(next) = (0..links.len())
        .find(|index| !taken.contains(index) && (links[*index].0.is_none() || links[*index].0 == through))
    {
        let last = links[next].1;
        through = Some(through.map_or(last, |through| through.max(last)));
        taken.push(next);
    }
    (through, taken)
}

/// `events` (a receiver's selection of one run, in feed order) as handoffs of at most
/// [`MESSAGE_BYTES`] each, chained from `after`. None when nothing was selected.
pub(crate) fn handoffs(receiver: &str, after: Option<Cursor>, events: &[Event]) -> Vec<Handoff> {
    let mut handoffs: Vec<Handoff> = Vec::new();
    let envelope = receiver.len() + 100;
    let mut bytes = envelope;
    for event in events {
        let size = event.to_json().len() + 1;
        let full =
            handoffs.last().is_some_and(|last| bytes + size > MESSAGE_BYTES && !last.events.is_empty());
        if handoffs.is_empty() || full {
            let after = handoffs.last().and_then(Handoff::last).or(after);
            handoffs.push(Handoff { receiver: receiver.to_owned(), after, events: Vec::new() });
            bytes = envelope;
        }
        handoffs.last_mut().expect("pushed above").events.push(*event);
        bytes += size;
    }
    handoffs
}

/// Messages (their JSON texts) grouped into `sendBatch` calls within Queues' limits.
pub(crate) fn send_groups(messages: Vec<String>) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut bytes = 0;
    for message in messages {
        let full = groups
            .last()
            .is_none_or(|group| group.len() == SEND_MESSAGES || bytes + message.len() > SEND_BYTES);
        if full {
            groups.push(Vec::new());
            bytes = 0;
        }
        bytes += message.len();
        groups.last_mut().expect("pushed above").push(message);
    }
    groups
}

/// The pause after the `attempts`-th failed attempt: `first` doubled for each failure before,
/// at most `max` (seconds).
pub(crate) fn backoff_secs(attempts: u32, first: u64, max: u64) -> u64 {
    let doublings = attempts.saturating_sub(1).min(40);
    first.saturating_mul(1 << doublings).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::B256;
    use kya_core::feed::{EventBlock, testing::attested};

    fn event(batch: u64, index: u32) -> Event {
        attested(Cursor { batch, index }, 7, EventBlock { number: batch, hash: B256::ZERO, time: 1 })
    }

    #[test]
    fn handoffs_are_chained_and_bounded() {
        assert!(handoffs("ops", None, &[]).is_empty());
        let events: Vec<Event> = (1..=600).map(|index| event(3, index)).collect();
        let after = Some(Cursor { batch: 2, index: 9 });
        let cut = handoffs("ops", after, &events);
        assert!(cut.len() > 1, "{} handoffs", cut.len());
        assert_eq!(cut[0].after, after);
        for pair in cut.windows(2) {
            assert_eq!(pair[1].after, pair[0].last(), "each names the one before");
        }
        for handoff in &cut {
            let json = serde_json::to_string(handoff).unwrap();
            assert!(json.len() <= MESSAGE_BYTES, "{} bytes", json.len());
            assert_eq!(serde_json::from_str::<Handoff>(&json).unwrap(), *handoff);
        }
        let rejoined: Vec<Event> = cut.into_iter().flat_map(|handoff| handoff.events).collect();
        assert_eq!(rejoined, events, "every event once, in order");
    }

    /// Every order of arrival, copies included, releases each handoff's events only once every
    /// handoff before it arrived, and the whole chain in the end.
    #[test]
    fn the_chain_is_whole_in_any_order_of_arrival() {
        let cursor = |batch| Cursor { batch, index: 0 };
        // Four handoffs: after None → 1, 1 → 2, 2 → 3, 3 → 4.
        let chain: Vec<(Option<Cursor>, Cursor)> =
            (1..=4).map(|last| ((last > 1).then(|| cursor(last - 1)), cursor(last))).collect();
        let arrivals: Vec<usize> = vec![0, 1, 2, 3, 2];
        // Every permutation of the arrivals.
        let mut orders: Vec<Vec<usize>> = vec![Vec::new()];
        for _ in 0..arrivals.len() {
            let mut longer = Vec::new();
            for order in &orders {
                for index in (0..arrivals.len()).filter(|index| !order.contains(index)) {
                    longer.push([order.as_slice(), &[index]].concat());
                }
            }
            orders = longer;
        }
        assert_eq!(orders.len(), 120);
        for order in orders {
            let (mut accepted, mut waiting): (Option<Cursor>, Vec<(Option<Cursor>, Cursor)>) =
                (None, Vec::new());
            let mut arrived = Vec::new();
            for &arrival in &order {
                let link = chain[arrivals[arrival]];
                arrived.push(arrivals[arrival]);
                if accepted.is_some_and(|accepted| link.1 <= accepted) {
                    continue; // a copy
                }
                waiting.push(link);
                let (through, taken) = follow_chain(accepted, &waiting);
                waiting = waiting
                    .into_iter()
                    .enumerate()
                    .filter(|(index, _)| !taken.contains(index))
                    .map(|(_, link)| link)
                    .collect();
                accepted = through;
                // Released through the longest run of handoffs that all arrived.
                let whole = (0..chain.len()).take_while(|handoff| arrived.contains(handoff)).last();
                assert_eq!(accepted, whole.map(|handoff| chain[handoff].1), "order {order:?}");
            }
            assert_eq!(accepted, Some(cursor(4)), "order {order:?}");
        }
    }

    #[test]
    fn send_groups_stay_within_queues_limits() {
        let groups = send_groups(vec!["x".repeat(90_000); 7]);
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 2, 1]);
        let groups = send_groups(vec!["x".to_owned(); 250]);
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), [100, 100, 50]);
    }

    #[test]
    fn backoff_doubles_to_its_cap() {
        let pauses: Vec<u64> = (1..=6).map(|attempts| backoff_secs(attempts, 5, 60)).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 60, 60]);
        assert_eq!(backoff_secs(500, 5, 3_600), 3_600);
    }

    #[test]
    fn dead_letters_of_both_kinds_decode() {
        let letter = DeadLetter {
            receiver: "ops".into(),
            event: event(1, 0),
            attempts: 3,
            last_error: "HTTP 500".into(),
        };
        let json = serde_json::to_string(&letter).unwrap();
        assert_eq!(serde_json::from_str::<Dead>(&json).unwrap(), Dead::Letter(Box::new(letter)));
        let handoff = Handoff { receiver: "ops".into(), after: None, events: vec![event(1, 0)] };
        let json = serde_json::to_string(&handoff).unwrap();
        assert_eq!(serde_json::from_str::<Dead>(&json).unwrap(), Dead::Handoff(handoff));
    }
}
