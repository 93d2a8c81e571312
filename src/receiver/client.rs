//! Whose request is it: the client address that `spec.sourceRanges` is checked against.
//!
//! `X-Forwarded-For` is written by whoever sends the request, so only the entries appended by
//! proxies the operator runs can be believed. Each proxy appends the address it received the
//! request from, so with N trusted proxies in front, the N-th entry from the right is the
//! address the first of them saw: the client. Everything left of it came from the client and is
//! never read, so a forged leftmost entry changes nothing.

use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request};
use std::net::{IpAddr, SocketAddr};

/// `--trusted-proxies` when not given: no proxy, the peer is the client and `X-Forwarded-For`
/// is ignored.
pub const TRUSTED_PROXIES: u8 = 0;

/// Why no client address could be worked out; the request is refused rather than guessed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknown {
    /// The connection's peer address was not passed to the handler (a router served without
    /// the hookgate listener).
    NoPeer,
    /// Fewer `X-Forwarded-For` entries than trusted proxies: a proxy did not append, or
    /// `--trusted-proxies` counts more proxies than there are.
    TooFewEntries,
    /// The entry that names the client is not an address (`unknown`, an obfuscated id, a zone).
    Unparseable,
}

impl Unknown {
    /// Label for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Unknown::NoPeer => "no_peer_address",
            Unknown::TooFewEntries => "too_few_forwarded_entries",
            Unknown::Unparseable => "unparseable_forwarded_entry",
        }
    }
}

/// The peer address hookgate's listener recorded for `req`'s connection (`Router::oneshot` in
/// tests records none).
pub fn peer<B>(req: &Request<B>) -> Option<SocketAddr> {
    Some(req.extensions().get::<ConnectInfo<SocketAddr>>()?.0)
}

/// [`client_addr`] of a request as served: worked out once per request, for the source check
/// and the refusal log alike.
pub fn of_request<B>(req: &Request<B>, trusted_hops: u8) -> Result<IpAddr, Unknown> {
    let peer = peer(req).ok_or(Unknown::NoPeer)?;
    client_addr(peer, req.headers().get_all("x-forwarded-for"), trusted_hops)
}

/// The client's address: the peer's with no trusted proxy, else the `trusted_hops`-th entry
/// from the right of all `X-Forwarded-For` lines taken in order (as if joined with commas).
/// IPv4-mapped IPv6 addresses come back as IPv4.
pub fn client_addr<'a>(
    peer: SocketAddr,
    xff: impl IntoIterator<Item = &'a HeaderValue>,
    trusted_hops: u8,
) -> Result<IpAddr, Unknown> {
    let Some(from_right) = usize::from(trusted_hops).checked_sub(1) else {
        return Ok(peer.ip().to_canonical());
    };
    let lines: Vec<&[u8]> = xff.into_iter().map(HeaderValue::as_bytes).collect();
    // Bytes, not text: the client's own entries may be anything and are never parsed.
    let entry = lines
        .iter()
        .rev()
        .flat_map(|line| line.rsplit(|b| *b == b','))
        .nth(from_right)
        .ok_or(Unknown::TooFewEntries)?;
    parse_entry(entry.trim_ascii()).ok_or(Unknown::Unparseable)
}

/// `192.0.2.1`, `2001:db8::1`, and the forms some proxies write with a port: `192.0.2.1:4711`,
/// `[2001:db8::1]:4711`, `[2001:db8::1]`.
fn parse_entry(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(entry).ok()?;
    let ip = text
        .parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            let inner = text.strip_prefix('[')?.strip_suffix(']')?;
            inner.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6)
        })?;
    Some(ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "10.1.2.3:50000".parse().unwrap()
    }

    fn hv(lines: &[&str]) -> Vec<HeaderValue> {
        lines
            .iter()
            .map(|l| HeaderValue::from_str(l).unwrap())
            .collect()
    }

    fn addr(lines: &[&str], hops: u8) -> Result<IpAddr, Unknown> {
        client_addr(peer(), &hv(lines), hops)
    }

    fn ip(s: &str) -> Result<IpAddr, Unknown> {
        Ok(s.parse().unwrap())
    }

    #[test]
    fn without_trusted_proxies_forwarded_for_is_ignored() {
        assert_eq!(addr(&["192.0.2.1"], 0), ip("10.1.2.3"));
        assert_eq!(addr(&[], 0), ip("10.1.2.3"));
        assert_eq!(addr(&["garbage, ,"], 0), ip("10.1.2.3"));
        let mapped: SocketAddr = "[::ffff:192.0.2.7]:443".parse().unwrap();
        assert_eq!(client_addr(mapped, &hv(&[]), 0), ip("192.0.2.7"));
    }

    #[test]
    fn the_nth_entry_from_the_right_is_the_client_and_spoofed_left_entries_are_ignored() {
        // The client forged "198.51.100.1"; the one proxy appended the address it saw.
        let xff = ["198.51.100.1, 203.0.113.9"];
        assert_eq!(addr(&xff, 1), ip("203.0.113.9"));
        // Two proxies: the outer one appended the client, the inner one the outer proxy.
        let xff = ["198.51.100.1, 203.0.113.9, 10.0.0.5"];
        assert_eq!(addr(&xff, 2), ip("203.0.113.9"));
        assert_eq!(addr(&xff, 3), ip("198.51.100.1"));
        // Junk the client wrote, left of what is read, is never parsed.
        assert_eq!(addr(&["not an address, 203.0.113.9"], 1), ip("203.0.113.9"));
        let mut raw = hv(&[]);
        raw.push(HeaderValue::from_bytes(b"\xff\xfe, 203.0.113.9").unwrap());
        assert_eq!(client_addr(peer(), &raw, 1), ip("203.0.113.9"));
    }

    #[test]
    fn several_header_lines_are_one_list_in_order() {
        let xff = ["198.51.100.1", "203.0.113.9, 10.0.0.5", "10.0.0.6"];
        assert_eq!(addr(&xff, 1), ip("10.0.0.6"));
        assert_eq!(addr(&xff, 2), ip("10.0.0.5"));
        assert_eq!(addr(&xff, 3), ip("203.0.113.9"));
        assert_eq!(addr(&xff, 4), ip("198.51.100.1"));
    }

    #[test]
    fn too_few_entries_are_refused_never_the_leftmost_taken() {
        assert_eq!(addr(&[], 1), Err(Unknown::TooFewEntries));
        assert_eq!(addr(&["203.0.113.9"], 2), Err(Unknown::TooFewEntries));
        assert_eq!(
            addr(&["203.0.113.9", "10.0.0.5"], 3),
            Err(Unknown::TooFewEntries)
        );
        assert_eq!(addr(&["a, b"], 255), Err(Unknown::TooFewEntries));
    }

    #[test]
    fn an_unparseable_client_entry_is_refused() {
        for entry in [
            "unknown",
            "_hidden",
            "",
            "203.0.113.9.1",
            "fe80::1%eth0",
            "203.0.113.9:notaport",
            "[203.0.113.9]",
            "0203.0.113.9",
        ] {
            let line = format!("198.51.100.1, {entry}");
            assert_eq!(addr(&[&line], 1), Err(Unknown::Unparseable), "{entry:?}");
        }
        // An empty element between commas counts as an entry: it cannot shift the position.
        assert_eq!(
            addr(&["203.0.113.9,,10.0.0.5"], 2),
            Err(Unknown::Unparseable)
        );
    }

    #[test]
    fn whitespace_ports_and_ipv6_forms_are_read() {
        for (entry, want) in [
            ("  203.0.113.9\t", "203.0.113.9"),
            ("203.0.113.9:4711", "203.0.113.9"),
            ("2001:db8::1", "2001:db8::1"),
            ("[2001:db8::1]:4711", "2001:db8::1"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("::ffff:203.0.113.9", "203.0.113.9"),
            ("[::ffff:203.0.113.9]:80", "203.0.113.9"),
        ] {
            let line = format!("198.51.100.1,{entry}");
            assert_eq!(addr(&[&line], 1), ip(want), "{entry:?}");
        }
    }
}
