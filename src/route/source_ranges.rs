//! `spec.sourceRanges`, compiled: which client addresses may call a route at all.

use ipnet::IpNet;
use std::net::IpAddr;

/// The networks a route accepts requests from. Empty: every address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceRanges(Vec<IpNet>);

impl SourceRanges {
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self(nets)
    }

    /// No ranges: the route takes requests from anywhere, and the client address is never
    /// worked out.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `client` may call the route. An IPv4-mapped IPv6 peer (`::ffff:192.0.2.1`, what a
    /// dual-stack socket reports for an IPv4 client) is matched as the IPv4 address it is, so an
    /// IPv4 range admits it; the ranges themselves are never IPv4-mapped (validation refuses).
    pub fn allows(&self, client: IpAddr) -> bool {
        let client = client.to_canonical();
        self.0.is_empty() || self.0.iter().any(|net| net.contains(&client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(entries: &[&str]) -> SourceRanges {
        SourceRanges::new(entries.iter().map(|e| e.parse().unwrap()).collect())
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn empty_allows_every_address() {
        let all = SourceRanges::default();
        assert!(all.is_empty());
        assert!(all.allows(ip("203.0.113.9")) && all.allows(ip("2001:db8::1")));
    }

    #[test]
    fn containment_is_per_family_and_exact_at_the_edges() {
        let r = ranges(&["192.0.2.0/24", "2001:db8::/32", "198.51.100.7/32"]);
        for (addr, allowed) in [
            ("192.0.2.0", true),
            ("192.0.2.255", true),
            ("192.0.3.0", false),
            ("192.0.1.255", false),
            ("198.51.100.7", true),
            ("198.51.100.8", false),
            ("2001:db8:ffff::1", true),
            ("2001:db9::1", false),
            // IPv4-mapped peers are their IPv4 address.
            ("::ffff:192.0.2.44", true),
            ("::ffff:192.0.3.1", false),
            // The IPv4-compatible form (deprecated) is not mapped: an IPv6 address outside.
            ("::192.0.2.44", false),
        ] {
            assert_eq!(r.allows(ip(addr)), allowed, "{addr}");
        }
    }

    #[test]
    fn an_ipv6_catch_all_does_not_admit_ipv4_clients() {
        let r = ranges(&["::/0"]);
        assert!(r.allows(ip("2001:db8::1")));
        assert!(!r.allows(ip("192.0.2.1")) && !r.allows(ip("::ffff:192.0.2.1")));
    }
}
