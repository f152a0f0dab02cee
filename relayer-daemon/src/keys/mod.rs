//! The keys: the pool of the relayer's keys (one nonce lane each) and the sender that signs and
//! submits on one of them, recording each transaction before the node sees it.

pub(crate) mod lanes;
pub(crate) mod sender;
pub(crate) mod timings;
