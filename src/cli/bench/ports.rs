//! Loopback ports for the child processes the bench starts (and the test harnesses, which start
//! theirs the same way).
//!
//! A child is told its port on the command line and binds it a moment later, so the port must
//! stay free in between. Two things took such ports before:
//! - this process itself: a probe's port is free again once the probe is dropped, so two calls
//!   could give one port to two children (the split-delivering pipeline's worker got the
//!   standalone's listen port as its admin port that way, and bound it first: CI, 2026-12-07);
//! - the kernel: a `bind(…:0)` or an outgoing connection anywhere on the machine draws from the
//!   ephemeral range, and could take the port before the child binds it.
//!
//! So a port is drawn at random from below the ephemeral range, where the kernel never hands one
//! out by itself, checked to be free, and never handed out twice by one process.

use std::collections::BTreeSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::ops::Range;
use std::sync::Mutex;

/// The lowest port drawn from: above the well-known and most registered services' ports.
const LOWEST: u16 = 10_000;
/// Draws before giving up: far more than a run needs while ports below the range are mostly free.
const ATTEMPTS: usize = 100_000;
const EPHEMERAL_RANGE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// A loopback address whose port is free right now, outside the kernel's ephemeral range when
/// the kernel says where that is, and never handed out before by this process.
pub fn free_port() -> io::Result<SocketAddr> {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let below = below_ephemeral(std::fs::read_to_string(EPHEMERAL_RANGE).ok().as_deref());
    for _ in 0..ATTEMPTS {
        let port = match &below {
            Some(range) => rand::random_range(range.clone()),
            // Unknown range (not Linux): let the kernel pick; the set still keeps ports apart.
            None => TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
                .local_addr()?
                .port(),
        };
        // A port tried once is not tried again, whether it was free or taken.
        if !GIVEN.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            continue;
        }
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok((Ipv4Addr::LOCALHOST, port).into());
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no free loopback port found in {ATTEMPTS} draws"),
    ))
}

/// The ports from [`LOWEST`] up to the ephemeral range's first, given the kernel's
/// `ip_local_port_range` ("32768\t60999"); `None` when it is unknown or leaves fewer than a
/// thousand ports below it.
fn below_ephemeral(range: Option<&str>) -> Option<Range<u16>> {
    let low: u16 = range?.split_whitespace().next()?.parse().ok()?;
    (low >= LOWEST + 1_000).then_some(LOWEST..low)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Far more ports than chance would keep distinct: Python's probe by `bind(0)` gave 2,691
    /// distinct of 3,000 here.
    #[test]
    fn no_port_is_handed_out_twice() {
        let ports: Vec<u16> = (0..3000).map(|_| free_port().unwrap().port()).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
    }

    #[test]
    fn ports_come_from_below_the_kernels_ephemeral_range() {
        let Some(range) = below_ephemeral(std::fs::read_to_string(EPHEMERAL_RANGE).ok().as_deref())
        else {
            return; // not Linux: the kernel picks, and nothing else is promised
        };
        for _ in 0..200 {
            let port = free_port().unwrap().port();
            assert!(range.contains(&port), "{port} is outside {range:?}");
        }
    }

    #[test]
    fn the_range_below_is_read_from_the_kernels_setting() {
        assert_eq!(
            below_ephemeral(Some("32768\t60999\n")),
            Some(10_000..32_768)
        );
        assert_eq!(below_ephemeral(Some("49152 65535")), Some(10_000..49_152));
        // Too little room below, or nothing readable: the kernel picks.
        assert_eq!(below_ephemeral(Some("10500 60999")), None);
        assert_eq!(below_ephemeral(Some("")), None);
        assert_eq!(below_ephemeral(Some("many")), None);
        assert_eq!(below_ephemeral(None), None);
    }

    #[test]
    fn a_port_someone_holds_is_not_handed_out() {
        // Ports this process never handed out, held by listeners: only the bind check keeps
        // them from being drawn.
        let Some(range) = below_ephemeral(std::fs::read_to_string(EPHEMERAL_RANGE).ok().as_deref())
        else {
            return;
        };
        let held: Vec<TcpListener> = range
            .step_by(50)
            .filter_map(|p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).ok())
            .collect();
        let held_ports: BTreeSet<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        assert!(
            held_ports.len() > 100,
            "held only {} ports",
            held_ports.len()
        );
        for _ in 0..1000 {
            let port = free_port().unwrap().port();
            assert!(!held_ports.contains(&port), "{port} is held by a listener");
        }
    }
}
