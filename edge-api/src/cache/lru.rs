//! A generic least-recently-used map bounded in bytes, with expiry: the structure of the
//! isolate's memory tier ([`super::memory`]). It knows nothing of what it holds but its size.

use std::{
    collections::{HashMap, VecDeque},
    rc::Rc,
};

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
pub(crate) struct Lru<T> {
    entries: HashMap<Rc<str>, Entry<T>>,
    /// Keys by the tick they were used at, oldest first. A use pushes a new item rather than
    /// moving the old one: an item whose tick is no longer its entry's is stale and skipped,
    /// and the queue is compacted when stale items outnumber live ones.
    order: VecDeque<(Rc<str>, u64)>,
    bytes: usize,
    tick: u64,
}

impl<T: Clone> Lru<T> {
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

    /// Holds `value` (`size` bytes) under `key` until `expires_at`, evicting the least recently
    /// used entries to stay within `budget` bytes; a value larger than the budget is not held.
    pub(crate) fn put(&mut self, key: &str, value: T, size: usize, expires_at: u64, budget: usize) {
        self.remove(key);
        let size = size + key.len();
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

    /// Bytes held, keys included.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_exactly_and_stays_within_its_budget() {
        let mut tier = Lru::<Rc<String>>::new();
        tier.put("a", Rc::new("x".repeat(40)), 40, 100, 100);
        assert_eq!(tier.get("a", 99).map(|(value, at)| (value.len(), at)), Some((40, 100)));
        assert!(tier.get("a", 100).is_none(), "gone at its expiry");
        assert_eq!(tier.bytes(), 0);

        tier.put("a", Rc::new("x".repeat(40)), 40, 200, 100);
        tier.put("b", Rc::new("y".repeat(40)), 40, 200, 100);
        tier.put("c", Rc::new("z".repeat(40)), 40, 200, 100);
        assert!(tier.get("a", 0).is_none(), "the oldest was evicted");
        assert!(tier.get("b", 0).is_some() && tier.get("c", 0).is_some());
        assert!(tier.bytes() <= 100);
        tier.put("huge", Rc::new("h".repeat(200)), 200, 200, 100);
        assert!(tier.get("huge", 0).is_none(), "larger than the budget: not held");
        tier.put("b", Rc::new("w".repeat(10)), 10, 300, 100);
        assert_eq!(tier.get("b", 250).map(|(value, _)| value.len()), Some(10), "replaced");
        assert_eq!(tier.bytes(), 41 + 11);
    }

    /// A served entry is used again: the least recently used one goes first, and however often
    /// entries are served, the eviction queue stays in proportion to them.
    #[test]
    fn the_least_recently_used_goes_first_and_the_queue_stays_small() {
        let mut tier = Lru::<Rc<String>>::new();
        tier.put("a", Rc::new("x".repeat(40)), 40, 100, 100);
        tier.put("b", Rc::new("y".repeat(40)), 40, 100, 100);
        assert!(tier.get("a", 0).is_some(), "a used after b");
        tier.put("c", Rc::new("z".repeat(40)), 40, 100, 100);
        assert!(tier.get("b", 0).is_none(), "b, the least recently used, was evicted");
        assert!(tier.get("a", 0).is_some() && tier.get("c", 0).is_some());
        assert_eq!(tier.bytes(), 82);
        for _ in 0..10_000 {
            assert!(tier.get("a", 0).is_some());
        }
        assert!(tier.order.len() <= 2 * tier.entries.len() + 64, "{} queued", tier.order.len());
        tier.put("d", Rc::new("w".repeat(40)), 40, 100, 100);
        assert!(tier.get("c", 0).is_none() && tier.get("a", 0).is_some(), "c was the older");
        assert_eq!(tier.bytes(), 82);
    }
}
