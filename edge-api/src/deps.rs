//! What the `/api/v1` answers need from the request: the chain's endpoint and registry, the
//! request's time, and the cache's namespace.

use alloy_primitives::Address;

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
}

impl Deps<'_> {
    /// The cache key of `path` (starting with `/`).
    pub(crate) fn cache_key(&self, path: &str) -> String {
        crate::cache::key(self.origin, self.cache_tag, path)
    }
}
