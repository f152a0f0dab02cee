//! Which client a rate limit or a budget share counts a request against.
//!
//! An IPv4 address is one client. An IPv6 address is not: a home or a server usually gets a
//! whole /64, and a site or a small provider's customer a /48 (RFC 6177's recommendation), so
//! counting per /128 would hand one client 2^64 or 2^80 separate quotas.
//!
//! - [`network_of`] (IPv6 by /64) keys the read limits of both services: reads are cheap, and a
//!   /48 would put a whole office or campus behind one per-minute quota.
//! - [`relay_client_of`] (IPv6 by /48) keys what costs the relayer money, its hourly relay limit
//!   and the client's share of the daily budget: one /48 holds 65,536 /64s, each otherwise a
//!   fresh quota for whoever holds the /48.
//! - [`TrustedProxies`] finds the client behind a reverse proxy from `X-Forwarded-For`.

use core::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;

/// The read-limit identity of `ip`: IPv4 (and IPv4-mapped IPv6) as it is, IPv6 as its /64.
pub fn network_of(ip: IpAddr) -> IpAddr {
    masked(ip, 64)
}

/// The relay-limit identity of `ip`: IPv4 (and IPv4-mapped IPv6) as it is, IPv6 as its /48.
pub fn relay_client_of(ip: IpAddr) -> IpAddr {
    masked(ip, 48)
}

/// `ip` with IPv6 cut to its first `prefix` bits; IPv4 whole.
fn masked(ip: IpAddr, prefix: u32) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u128::MAX >> prefix))),
        },
    }
}

/// The reverse proxies whose `X-Forwarded-For` is believed (a `TRUSTED_PROXIES` list of CIDR
/// networks or single addresses). Empty: the TCP peer is the client and headers are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses a comma- or space-separated list such as `127.0.0.1/32, 10.0.0.0/8, ::1`.
    pub fn parse(list: &str) -> Result<Self, String> {
        list.split([',', ' ', '\t', '\n'])
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map(|net| net.trunc())
                    .map_err(|_| format!("{entry:?} is not an IP address or CIDR network"))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request from `peer` carrying these `X-Forwarded-For` values (each may
    /// list several hops, oldest first; several headers are one list in order).
    ///
    /// From a trusted peer, the hops are read right to left, skipping trusted proxies: the first
    /// untrusted one is the client, since only hops added by our own proxies can be believed and
    /// anything to its left the client may have written itself. If every hop is trusted, the
    /// left-most is the client. A hop that is not an address ends the walk at the proxy that
    /// wrote it. From an untrusted peer, or with no header, the peer is the client.
    pub fn client<'a>(&self, peer: IpAddr, forwarded_for: impl IntoIterator<Item = &'a str>) -> IpAddr {
        let peer = canonical(peer);
        if !self.trusts(peer) {
            return peer;
        }
        let hops: Vec<&str> =
            forwarded_for.into_iter().flat_map(|value| value.split(',')).map(str::trim).collect();
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Some(ip) = hop_address(hop) else { return client };
            client = canonical(ip);
            if !self.trusts(client) {
                return client;
            }
        }
        client
    }
}

/// An `X-Forwarded-For` hop as an address: `203.0.113.7`, `2001:db8::1`, and the bracketed or
/// port-carrying forms some proxies write (`[2001:db8::1]:443`, `203.0.113.7:5050`).
fn hop_address(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse() {
        return Some(ip);
    }
    if let Some(rest) = hop.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    let (host, port) = hop.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse().ok()
}

/// IPv4-mapped IPv6 (a dual-stack socket's view of an IPv4 peer) as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network(text: &str) -> String {
        network_of(text.parse().unwrap()).to_string()
    }

    fn relay_client(text: &str) -> String {
        relay_client_of(text.parse().unwrap()).to_string()
    }

    #[test]
    fn ipv4_is_one_client_and_ipv6_a_64() {
        assert_eq!(network("203.0.113.7"), "203.0.113.7");
        assert_eq!(network("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(network("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
        assert_eq!(network("2001:db8:1:2::1"), network("2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_ne!(network("2001:db8:1:2::1"), network("2001:db8:1:3::1"));
        assert_eq!(network("::1"), "::");
    }

    #[test]
    fn a_relay_client_is_an_ipv6_48() {
        assert_eq!(relay_client("203.0.113.7"), "203.0.113.7");
        assert_eq!(relay_client("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(relay_client("2001:db8:1:2:aaaa::1"), "2001:db8:1::");
        assert_eq!(relay_client("2001:db8:1:ffff::1"), relay_client("2001:db8:1:0::1"));
        assert_ne!(relay_client("2001:db8:1::1"), relay_client("2001:db8:2::1"));
    }

    fn proxies(list: &str) -> TrustedProxies {
        TrustedProxies::parse(list).unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn lists_parse_and_bad_entries_are_named() {
        let list = proxies("127.0.0.1, 10.0.0.0/8 ::1\t2001:db8::/32");
        assert_eq!(list.0.len(), 4);
        assert!(list.trusts(ip("10.200.3.4")) && list.trusts(ip("::ffff:127.0.0.1")));
        assert!(!list.trusts(ip("11.0.0.1")));
        assert!(TrustedProxies::parse("").unwrap().is_empty());
        let error = TrustedProxies::parse("10.0.0.0/8, proxy.local").unwrap_err();
        assert!(error.contains("\"proxy.local\""), "{error}");
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
    }

    #[test]
    fn without_a_trusted_peer_the_header_is_ignored() {
        assert_eq!(TrustedProxies::default().client(ip("198.51.100.1"), ["203.0.113.9"]), ip("198.51.100.1"));
        let list = proxies("127.0.0.1");
        assert_eq!(list.client(ip("198.51.100.1"), ["203.0.113.9"]), ip("198.51.100.1"));
    }

    #[test]
    fn behind_trusted_proxies_the_rightmost_untrusted_hop_is_the_client() {
        let list = proxies("127.0.0.1, 10.0.0.0/8");
        // The client wrote a fake first hop; the proxy appended the address it saw.
        assert_eq!(list.client(ip("127.0.0.1"), ["1.1.1.1, 203.0.113.9"]), ip("203.0.113.9"));
        // Two of our proxies in a row, and the header split over two lines.
        assert_eq!(list.client(ip("127.0.0.1"), ["6.6.6.6, 203.0.113.9", "10.1.2.3"]), ip("203.0.113.9"));
        // No header: the proxy itself.
        assert_eq!(list.client(ip("127.0.0.1"), []), ip("127.0.0.1"));
        // Every hop trusted: the left-most.
        assert_eq!(list.client(ip("127.0.0.1"), ["10.0.0.7, 10.0.0.8"]), ip("10.0.0.7"));
        // Garbage written by the client stops nothing; garbage at the right ends at the proxy.
        assert_eq!(list.client(ip("127.0.0.1"), ["unknown, 203.0.113.9"]), ip("203.0.113.9"));
        assert_eq!(list.client(ip("127.0.0.1"), ["203.0.113.9, garbage"]), ip("127.0.0.1"));
        // Ports, brackets and IPv4-mapped addresses.
        assert_eq!(list.client(ip("::ffff:127.0.0.1"), ["[2001:db8::5]:443"]), ip("2001:db8::5"));
        assert_eq!(list.client(ip("127.0.0.1"), ["203.0.113.9:5050"]), ip("203.0.113.9"));
        assert_eq!(list.client(ip("127.0.0.1"), ["::ffff:203.0.113.9"]), ip("203.0.113.9"));
    }
}
