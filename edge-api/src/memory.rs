//! The isolate's own cache, in front of the Cache API: a hot answer is served without a Cache API
//! call (and with one on `*.workers.dev`, where the Cache API stores nothing). Bounded by bytes,
//! oldest entries evicted first; entries expire exactly when their Cache API twins do.

use std::{
    cell::RefCell,
    collections::{HashMap, VecDeque},
    rc::Rc,
};

/// What the tier holds under a key, shared (`Rc`) so a hit copies nothing.
pub(crate) trait ByteSize {
    /// Bytes held, for the budget.
    fn size(&self) -> usize;
}

struct Entry<T> {
    value: Rc<T>,
    /// Unix seconds at which the value is no longer served.
    expires_at: u64,
    size: usize,
}

/// A byte-bounded map with expiry, oldest insertion evicted first.
pub(crate) struct MemoryTier<T> {
    entries: HashMap<String, Entry<T>>,
    order: VecDeque<String>,
    bytes: usize,
}

impl<T: ByteSize> MemoryTier<T> {
    pub(crate) fn new() -> Self {
        Self { entries: HashMap::new(), order: VecDeque::new(), bytes: 0 }
    }

    /// The value under `key` while `now` is before its expiry.
    pub(crate) fn get(&mut self, key: &str, now: u64) -> Option<(Rc<T>, u64)> {
        match self.entries.get(key) {
            Some(entry) if entry.expires_at > now => Some((Rc::clone(&entry.value), entry.expires_at)),
            Some(_) => {
                self.remove(key);
                None
            }
            None => None,
        }
    }

    /// Holds `value` under `key` until `expires_at`, evicting the oldest entries to stay within
    /// `budget` bytes; a value larger than the budget is not held.
    pub(crate) fn put(&mut self, key: &str, value: Rc<T>, expires_at: u64, budget: usize) {
        self.remove(key);
        let size = value.size() + key.len();
        if size > budget {
            return;
        }
        while self.bytes + size > budget {
            let Some(oldest) = self.order.pop_front() else { break };
            if let Some(entry) = self.entries.remove(&oldest) {
                self.bytes -= entry.size;
            }
        }
        self.bytes += size;
        self.order.push_back(key.to_owned());
        self.entries.insert(key.to_owned(), Entry { value, expires_at, size });
    }

    fn remove(&mut self, key: &str) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= entry.size;
            self.order.retain(|kept| kept != key);
        }
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }
}

thread_local! {
    static ANSWERS: RefCell<MemoryTier<crate::cache::CachedAnswer>> = RefCell::new(MemoryTier::new());
    static SNAPSHOTS: RefCell<MemoryTier<crate::snapshot::LoadedSnapshot>> = RefCell::new(MemoryTier::new());
}

/// The isolate's cached answers.
pub(crate) fn answers<R>(use_tier: impl FnOnce(&mut MemoryTier<crate::cache::CachedAnswer>) -> R) -> R {
    ANSWERS.with(|tier| use_tier(&mut tier.borrow_mut()))
}

/// The isolate's cached snapshot answers.
pub(crate) fn snapshots<R>(
    use_tier: impl FnOnce(&mut MemoryTier<crate::snapshot::LoadedSnapshot>) -> R,
) -> R {
    SNAPSHOTS.with(|tier| use_tier(&mut tier.borrow_mut()))
}

#[cfg(test)]
mod tests {
    use super::*;

    impl ByteSize for String {
        fn size(&self) -> usize {
            self.len()
        }
    }

    #[test]
    fn expires_exactly_and_stays_within_its_budget() {
        let mut tier = MemoryTier::new();
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
}
