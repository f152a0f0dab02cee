//! What the `/api/v1` answers need from the request: the chain's endpoint and registry, the
//! request's time, the cache's namespace, and the Worker's bindings.

use alloy_primitives::Address;
use worker::Env;

use crate::rpc::Rpc;

/// What the endpoints need to answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deps<'a> {
    pub(crate) rpc: Rpc<'a>,
    pub(crate) registry: Address,
    /// Scheme and host of the request, the namespace of cache keys.
    pub(crate) origin: &'a str,
    /// The request's wall-clock time, Unix seconds.
    pub(crate) now: u64,
    /// Bytes the isolate's memory tier may hold.
    pub(crate) memory_budget: usize,
    /// The configuration's part of every cache key ([`crate::config::Config::cache_tag`]).
    pub(crate) cache_tag: &'a str,
    /// The Worker's bindings (the registry index's D1 database).
    pub(crate) env: &'a Env,
    /// Seconds after its last run the index stops answering (`INDEX_MAX_AGE_SECS`).
    pub(crate) index_max_age_secs: u64,
    /// Seconds an answer from the index is cached (`INDEX_ANSWER_TTL_SECS`).
    pub(crate) index_answer_ttl_secs: u64,
}

impl Deps<'_> {
    /// The cache key of `path` (starting with `/`).
    pub(crate) fn cache_key(&self, path: &str) -> String {
        crate::cache::key(self.origin, self.cache_tag, path)
    }
}
