//! Which client a rate limit counts a request against.
//!
//! An IPv4 address is one client. An IPv6 address is not: a home or a server usually gets a
//! whole /64, so counting per /128 would hand one client 2^64 separate quotas. Both services key
//! their limits by [`network_of`] the peer.

use core::net::{IpAddr, Ipv6Addr};

/// The rate-limit identity of `ip`: IPv4 (and IPv4-mapped IPv6) as it is, IPv6 as its /64.
pub fn network_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network(text: &str) -> String {
        network_of(text.parse().unwrap()).to_string()
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
}
