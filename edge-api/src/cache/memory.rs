//! The isolate's own cache tier, in front of the Cache API: a hot answer is served without a
//! Cache API call (and with one on `*.workers.dev`, where the Cache API stores nothing). Every
//! kind of value (answers, registry snapshots) shares one byte budget (`MEMORY_CACHE_BYTES`) in
//! one [`Lru`]; a key holds one kind, told apart by its type, so this tier knows none of them.

use std::{any::Any, cell::RefCell, rc::Rc};

use super::lru::Lru;

thread_local! {
    static HELD: RefCell<Lru<Rc<dyn Any>>> = RefCell::new(Lru::new());
}

/// The value of type `T` under `key`, while fresh at `now`; a value of another type is a miss.
pub(crate) fn get<T: 'static>(key: &str, now: u64) -> Option<Rc<T>> {
    let (held, _) = HELD.with(|tier| tier.borrow_mut().get(key, now))?;
    held.downcast::<T>().ok()
}

/// Holds `value` (about `size` bytes) under `key` until `expires_at`, within `budget` bytes for
/// everything held.
pub(crate) fn keep<T: 'static>(key: &str, value: Rc<T>, size: usize, expires_at: u64, budget: usize) {
    HELD.with(|tier| tier.borrow_mut().put(key, value, size, expires_at, budget));
}

#[cfg(test)]
fn bytes() -> usize {
    HELD.with(|tier| tier.borrow().bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of two kinds count against one budget: holding one that leaves no room evicts the
    /// older of the other kind, so the isolate never holds twice `MEMORY_CACHE_BYTES`.
    #[test]
    fn kinds_share_one_budget_and_keys_hold_one_kind() {
        let answer = Rc::new("x".repeat(500));
        let snapshot = Rc::new(vec![7u8; 300]);
        // Room for either, one byte short of both.
        let budget = (500 + "answer".len()) + (300 + "snapshot".len()) - 1;
        keep("answer", Rc::clone(&answer), 500, 100, budget);
        assert_eq!(get::<String>("answer", 99).map(|hit| hit.len()), Some(500));
        keep("snapshot", snapshot, 300, 100, budget);
        assert!(get::<String>("answer", 0).is_none(), "evicted: both would pass the budget");
        assert_eq!(get::<Vec<u8>>("snapshot", 99).map(|hit| hit.len()), Some(300));
        assert!(get::<String>("snapshot", 0).is_none(), "a key holds one kind");
        assert!(bytes() <= budget);
    }
}
