//! The HTTP surface: where it listens, who its clients are behind proxies, how often they may
//! read, and the operator's metrics listener.

use std::net::{IpAddr, SocketAddr};

use super::reader::Settings;
use crate::error::{Error, Result};

/// Default per-IP limit of the read endpoints: generous for a client polling its nonce, small
/// enough that one caller cannot flood the node through the relayer.
pub(crate) const DEFAULT_READ_RATE_LIMIT_PER_MINUTE: u32 = 120;
/// Default port of the metrics listener (the Prometheus exporters' range).
pub(crate) const DEFAULT_METRICS_PORT: u16 = 9464;
/// Default port of the public listener.
const DEFAULT_PORT: u16 = 3001;
/// Both listeners default to loopback.
const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// The listeners and the read limit.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Listening address (`RELAYER_HOST`, default 127.0.0.1).
    pub host: IpAddr,
    /// Listening port (`RELAYER_PORT`, default 3001).
    pub port: u16,
    /// Read requests (`/status`, `/nonce`, `/domain`) per IP per minute, in memory
    /// (`READ_RATE_LIMIT_PER_MINUTE`, default 120).
    pub read_rate_limit_per_minute: std::num::NonZeroU32,
    /// Reverse proxies whose `X-Forwarded-For` names the client (`TRUSTED_PROXIES`, CIDR list;
    /// default none: the TCP peer is the client).
    pub trusted_proxies: kya_core::api::client_ip::TrustedProxies,
    /// Where `/metrics` is served (`METRICS_HOST`, `METRICS_PORT`; default 127.0.0.1:9464), apart
    /// from the public listener.
    pub metrics_address: SocketAddr,
}

impl ServerConfig {
    pub(crate) fn read(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Self> {
        Ok(Self {
            host: settings.ip("RELAYER_HOST", LOOPBACK)?,
            port: settings.port("RELAYER_PORT", DEFAULT_PORT)?,
            read_rate_limit_per_minute: std::num::NonZeroU32::new(
                settings.limit("READ_RATE_LIMIT_PER_MINUTE", DEFAULT_READ_RATE_LIMIT_PER_MINUTE)?,
            )
            .ok_or_else(|| Error::Config("READ_RATE_LIMIT_PER_MINUTE must be at least 1".into()))?,
            trusted_proxies: settings
                .text("TRUSTED_PROXIES")
                .map_or(Ok(Default::default()), |list| kya_core::api::client_ip::TrustedProxies::parse(&list))
                .map_err(|error| Error::Config(format!("TRUSTED_PROXIES: {error}")))?,
            metrics_address: SocketAddr::new(
                settings.ip("METRICS_HOST", LOOPBACK)?,
                settings.port("METRICS_PORT", DEFAULT_METRICS_PORT)?,
            ),
        })
    }
}
