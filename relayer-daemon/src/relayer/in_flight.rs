//! The requests this process is working on right now: a relay handler from its checks to its
//! send, a follower replacing a transaction, the hand-off sender sending one. The reconciler
//! leaves their records alone, and the hand-off sender does not send one twice.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use alloy::primitives::{Address, U256};

use crate::concurrency::lock;

/// A signed request: its signer and forwarder nonce.
pub(crate) type Request = (Address, U256);

/// The requests being worked on, with how many hold each (a handler and a replacement may hold
/// the same one).
#[derive(Debug, Default, Clone)]
pub(crate) struct InFlight(Arc<Mutex<HashMap<Request, usize>>>);

impl InFlight {
    /// Holds `request` until the guard is dropped.
    pub(crate) fn hold(&self, request: Request) -> InFlightGuard {
        *lock(&self.0).entry(request).or_default() += 1;
        InFlightGuard { set: self.clone(), request }
    }

    /// Holds `request` unless someone holds it already (`None`), decided under one lock.
    pub(crate) fn hold_if_free(&self, request: Request) -> Option<InFlightGuard> {
        let mut held = lock(&self.0);
        if held.contains_key(&request) {
            return None;
        }
        held.insert(request, 1);
        Some(InFlightGuard { set: self.clone(), request })
    }

    /// The `items` whose request (`request_of`) nobody holds, all decided at one look at the set.
    pub(crate) fn idle<T>(&self, items: Vec<T>, request_of: impl Fn(&T) -> Request) -> Vec<T> {
        let held = lock(&self.0);
        items.into_iter().filter(|item| !held.contains_key(&request_of(item))).collect()
    }
}

/// Holds a request in [`InFlight`] until dropped.
pub(crate) struct InFlightGuard {
    set: InFlight,
    request: Request,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut set = lock(&self.set.0);
        if let Some(count) = set.get_mut(&self.request) {
            *count -= 1;
            if *count == 0 {
                set.remove(&self.request);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_held_until_its_last_guard_drops() {
        let (in_flight, request) = (InFlight::default(), (Address::repeat_byte(1), U256::from(7)));
        let handler = in_flight.hold(request);
        let replacement = in_flight.hold(request);
        drop(handler);
        assert!(in_flight.hold_if_free(request).is_none(), "the replacement still holds it");
        assert_eq!(
            in_flight.idle(vec![request, (Address::ZERO, U256::ZERO)], |r| *r),
            vec![(Address::ZERO, U256::ZERO)]
        );
        drop(replacement);
        assert_eq!(in_flight.idle(vec![request], |r| *r), vec![request]);
        let sender = in_flight.hold_if_free(request).expect("free once the last guard dropped");
        assert!(in_flight.hold_if_free(request).is_none(), "held by the sender");
        drop(sender);
        assert_eq!(in_flight.idle(vec![request], |r| *r), vec![request]);
    }
}
