//! The relayer's rules, pure: no I/O type is imported here. Time, block data, balances and
//! the store's facts are passed in; each rule returns a value or a decision that the pipeline
//! ([`crate::relayer`]) carries out. Their tests feed values and check what comes out.

pub(crate) mod fees;
pub(crate) mod follow;
pub(crate) mod lanes;
pub(crate) mod nonce;
pub(crate) mod pacing;
pub(crate) mod reconcile;
pub(crate) mod request;
pub(crate) mod status;
pub(crate) mod stuck;
