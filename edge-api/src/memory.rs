//! The isolate's own cache, in front of the Cache API: a hot answer is served without a Cache API
//! call (and with one on `*.workers.dev`, where the Cache API stores nothing). Answers and
//! snapshots share one byte budget (`MEMORY_CACHE_BYTES`), the least recently used evicted
//! first; entries expire exactly when their Cache API twins do.

use std::{
    cell::RefCell,
    collections::{HashMap, VecDeque},
    rc::Rc,
};

use crate::{cache::CachedAnswer, snapshot::LoadedSnapshot};

/// What the tier holds under a key, shared (`Rc`) so a hit copies nothing.
pub(crate) trait ByteSize {
    /// Bytes held, for the budget.
    fn size(&self) -> usize;
}

struct Entry<T> {
    value: T,
    /// Unix seconds at which the value is no longer served.
    expires_at: u64,
    size: usize,
    /// The tier's tick when it was last put or served: its place in the eviction order.
    used: u64,
    /// Its key, shared with the map and `order`, so serving a hit allocates nothing.
    key: Rc<str>,
}

/// A byte-bounded map with expiry, the least recently used entry evicted first (a registry
/// snapshot in use outlasts a flood of one-off answers).
pub(crate) struct MemoryTier<T> {
    entries: HashMap<Rc<str>, Entry<T>>,
    /// Keys by the tick they were used at, oldest first. A use pushes a new item rather than
    /// moving the old one: an item whose tick is no longer its entry's is stale and skipped,
    /// and the queue is compacted when stale items outnumber live ones.
    order: VecDeque<(Rc<str>, u64)>,
    bytes: usize,
    tick: u64,
}

impl<T: ByteSize + Clone> MemoryTier<T> {
    pub(crate) fn new() -> Self {
        Self { entries: HashMap::new(), order: VecDeque::new(), bytes: 0, tick: 0 }
    }

    /// The value under `key` while `now` is before its expiry.
    pub(crate) fn get(&mut self, key: &str, now: u64) -> Option<(T, u64)> {
        let entry = self.entries.get_mut(key)?;
        if entry.expires_at <= now {
            self.remove(key);
            return None;
        }
        self.tick += 1;
        entry.used = self.tick;
        self.order.push_back((Rc::clone(&entry.key), self.tick));
        let hit = (entry.value.clone(), entry.expires_at);
        self.compact();
        Some(hit)
    }

    /// Holds `value` under `key` until `expires_at`, evicting the least recently used entries to
    /// stay within `budget` bytes; a value larger than the budget is not held.
    pub(crate) fn put(&mut self, key: &str, value: T, expires_at: u64, budget: usize) {
        self.remove(key);
        let size = value.size() + key.len();
        if size > budget {
            return;
        }
        while self.bytes + size > budget {
            let Some((oldest, used)) = self.order.pop_front() else { break };
            if self.entries.get(&oldest).is_some_and(|entry| entry.used == used) {
                self.remove(&oldest);
            }
        }
        self.tick += 1;
        let key: Rc<str> = Rc::from(key);
        self.bytes += size;
        self.order.push_back((Rc::clone(&key), self.tick));
        self.entries.insert(Rc::clone(&key), Entry { value, expires_at, size, used: self.tick, key });
        self.compact();
    }

    /// Drops `key`'s entry; its items in `order` go stale.
    fn remove(&mut self, key: &str) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= entry.size;
        }
    }

    /// Drops the stale items of `order` once they outnumber the live ones (amortised O(1)).
    fn compact(&mut self) {
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order.retain(|(key, used)| entries.get(key).is_some_and(|entry| entry.used == *used));
        }
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// An entry of the isolate's tier: a cached answer, or a registry snapshot's answers.
#[derive(Clone)]
pub(crate) enum Held {
    Answer(Rc<CachedAnswer>),
    Snapshot(Rc<LoadedSnapshot>),
}

impl ByteSize for Held {
    fn size(&self) -> usize {
        match self {
            Self::Answer(answer) => answer.size(),
            Self::Snapshot(snapshot) => snapshot.size(),
        }
    }
}

thread_local! {
    static HELD: RefCell<MemoryTier<Held>> = RefCell::new(MemoryTier::new());
}

fn held<R>(use_tier: impl FnOnce(&mut MemoryTier<Held>) -> R) -> R {
    HELD.with(|tier| use_tier(&mut tier.borrow_mut()))
}

/// The answer cached under `key`, while fresh at `now`.
pub(crate) fn answer(key: &str, now: u64) -> Option<Rc<CachedAnswer>> {
    match held(|tier| tier.get(key, now))? {
        (Held::Answer(answer), _) => Some(answer),
        (Held::Snapshot(_), _) => None,
    }
}

/// The snapshot cached under `key`, while fresh at `now`.
pub(crate) fn snapshot(key: &str, now: u64) -> Option<Rc<LoadedSnapshot>> {
    match held(|tier| tier.get(key, now))? {
        (Held::Snapshot(snapshot), _) => Some(snapshot),
        (Held::Answer(_), _) => None,
    }
}

/// Holds `value` under `key` until `expires_at`, within `budget` bytes for everything held.
pub(crate) fn keep(key: &str, value: Held, expires_at: u64, budget: usize) {
    held(|tier| tier.put(key, value, expires_at, budget));
}

#[cfg(test)]
mod tests {
    use super::*;

    impl ByteSize for Rc<String> {
        fn size(&self) -> usize {
            self.len()
        }
    }

    #[test]
    fn expires_exactly_and_stays_within_its_budget() {
        let mut tier = MemoryTier::<Rc<String>>::new();
        tier.put("a", Rc::new("x".repeat(40)), 100, 100);
        assert_eq!(tier.get("a", 99).map(|(value, at)| (value.len(), at)), Some((40, 100)));
        assert!(tier.get("a", 100).is_none(), "gone at its expiry");
        assert_eq!(tier.bytes(), 0);

        tier.put("a", Rc::new("x".repeat(40)), 200, 100);
        tier.put("b", Rc::new("y".repeat(40)), 200, 100);
        tier.put("c", Rc::new("z".repeat(40)), 200, 100);
        assert!(tier.get("a", 0).is_none(), "the oldest was evicted");
        assert!(tier.get("b", 0).is_some() && tier.get("c", 0).is_some());
        assert!(tier.bytes() <= 100);
        tier.put("huge", Rc::new("h".repeat(200)), 200, 100);
        assert!(tier.get("huge", 0).is_none(), "larger than the budget: not held");
        tier.put("b", Rc::new("w".repeat(10)), 300, 100);
        assert_eq!(tier.get("b", 250).map(|(value, _)| value.len()), Some(10), "replaced");
        assert_eq!(tier.bytes(), 41 + 11);
    }

    /// A served entry is used again: the least recently used one goes first, and however often
    /// entries are served, the eviction queue stays in proportion to them.
    #[test]
    fn the_least_recently_used_goes_first_and_the_queue_stays_small() {
        let mut tier = MemoryTier::<Rc<String>>::new();
        tier.put("a", Rc::new("x".repeat(40)), 100, 100);
        tier.put("b", Rc::new("y".repeat(40)), 100, 100);
        assert!(tier.get("a", 0).is_some(), "a used after b");
        tier.put("c", Rc::new("z".repeat(40)), 100, 100);
        assert!(tier.get("b", 0).is_none(), "b, the least recently used, was evicted");
        assert!(tier.get("a", 0).is_some() && tier.get("c", 0).is_some());
        assert_eq!(tier.bytes(), 82);
        for _ in 0..10_000 {
            assert!(tier.get("a", 0).is_some());
        }
        assert!(tier.order.len() <= 2 * tier.entries.len() + 64, "{} queued", tier.order.len());
        tier.put("d", Rc::new("w".repeat(40)), 100, 100);
        assert!(tier.get("c", 0).is_none() && tier.get("a", 0).is_some(), "c was the older");
        assert_eq!(tier.bytes(), 82);
    }

    /// The snapshot and the answers count against one budget: holding a snapshot that leaves
    /// no room evicts the older answer, so the isolate never holds twice `MEMORY_CACHE_BYTES`.
    #[test]
    fn answers_and_snapshots_share_one_budget() {
        use alloy_primitives::Address;
        use kya_core::{BlockRef, Snapshot, SnapshotAnswers};

        let block = BlockRef { number: 7, timestamp: 1_700_000_000 };
        let empty = Snapshot { block, agents: vec![], revenue: vec![], revenue_unreadable: vec![] };
        let loaded = Rc::new(LoadedSnapshot {
            answers: SnapshotAnswers::render(&empty, &Address::ZERO, ""),
            read_at: 0,
        });
        let cached = Rc::new(CachedAnswer {
            answer: crate::http::Answer { body: "x".repeat(500), block, read_at: 0 },
            etag: "\"e\"".into(),
            expires_at: 100,
        });
        // Room for either, one byte short of both.
        let (answer_bytes, snapshot_bytes) =
            (cached.size() + "answer".len(), loaded.size() + "snapshot".len());
        let budget = answer_bytes + snapshot_bytes - 1;
        keep("answer", Held::Answer(Rc::clone(&cached)), 100, budget);
        assert_eq!(answer("answer", 99).map(|hit| hit.answer.body.len()), Some(500));
        keep("snapshot", Held::Snapshot(Rc::clone(&loaded)), 100, budget);
        assert!(answer("answer", 0).is_none(), "evicted: both would pass the budget");
        assert!(snapshot("snapshot", 99).is_some());
        assert!(answer("snapshot", 0).is_none() && snapshot("answer", 0).is_none(), "a key holds one kind");
        assert!(held(|tier| tier.bytes()) <= budget);
    }
}
