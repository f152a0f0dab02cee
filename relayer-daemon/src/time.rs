//! Wall-clock time: Unix seconds now. Timestamps are formatted by `kya_core::api::time`, like the
//! edge API's.

/// Seconds since the Unix epoch.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}
