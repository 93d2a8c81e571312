//! `spec.sourceRanges`: each entry parsed exactly, so that what an entry allows is never a
//! guess. The CRD pattern (`limits::SOURCE_RANGE_PATTERN`) catches the obvious typos at apply
//! time; this is the exact check, run at load (standalone) and before compiling (controller).

use super::{FieldError, limits};
use ipnet::IpNet;
use std::net::IpAddr;

const EXAMPLE: &str = "e.g. 192.0.2.0/24, 2001:db8::/32 or 192.0.2.10";

/// The entries as networks, or the first bad entry, named by its index and quoted.
pub fn source_ranges(entries: &[String]) -> Result<Vec<IpNet>, FieldError> {
    if entries.len() > limits::MAX_SOURCE_RANGES {
        return Err(FieldError::new(
            "spec.sourceRanges",
            format!("at most {} entries", limits::MAX_SOURCE_RANGES),
        ));
    }
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| range(e).map_err(|m| FieldError::new(format!("spec.sourceRanges[{i}]"), m)))
        .collect()
}

/// One entry: `addr/prefix` or a bare address (a /32 or /128).
fn range(entry: &str) -> Result<IpNet, String> {
    let bad = || format!("{entry:?} is not an IP address or CIDR ({EXAMPLE})");
    if entry.len() as u64 > limits::SOURCE_RANGE_MAX_LENGTH {
        return Err(format!(
            "at most {} characters",
            limits::SOURCE_RANGE_MAX_LENGTH
        ));
    }
    let (addr, prefix) = match entry.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (entry, None),
    };
    // std's parser, not ipnet's: ipnet reads `010.0.0.1` as 10.0.0.1, which other tools read as
    // octal (8.0.0.1). An entry that means two things is refused.
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    if let IpAddr::V6(v6) = addr
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!(
            "{entry:?} is an IPv4-mapped IPv6 range: write the IPv4 form; IPv4 clients are \
             matched against IPv4 ranges only"
        ));
    }
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(p) => {
            // Digits only, no sign, no leading zero: one spelling per prefix, as the CRD pattern.
            let digits = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
            if !digits || (p.len() > 1 && p.starts_with('0')) {
                return Err(bad());
            }
            p.parse::<u8>().ok().filter(|n| *n <= max).ok_or_else(bad)?
        }
    };
    let net = IpNet::new(addr, prefix).map_err(|_| bad())?;
    if net.trunc() != net {
        // `10.0.0.1/8` may mean the /8 or the one address: the difference is the whole point of
        // an allowlist, so the writer chooses.
        return Err(format!(
            "{entry:?} has host bits set: write {} for the whole range, or {addr}/{max} for \
             the one address",
            net.trunc()
        ));
    }
    Ok(net)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(entry: &str) -> String {
        range(entry)
            .unwrap_or_else(|e| panic!("{entry:?}: {e}"))
            .to_string()
    }

    #[test]
    fn cidrs_and_bare_addresses_of_both_families_parse() {
        for (entry, net) in [
            ("10.0.0.0/8", "10.0.0.0/8"),
            ("192.0.2.10", "192.0.2.10/32"),
            ("0.0.0.0/0", "0.0.0.0/0"),
            ("2001:DB8::/32", "2001:db8::/32"),
            ("::1", "::1/128"),
            ("::/0", "::/0"),
            ("127.0.0.0/8", "127.0.0.0/8"),
        ] {
            assert_eq!(ok(entry), net, "{entry}");
        }
    }

    #[test]
    fn every_bad_entry_is_refused_with_a_reason() {
        for (entry, fragment) in [
            (
                "10.0.0.1/8",
                "host bits set: write 10.0.0.0/8 for the whole range, or 10.0.0.1/32",
            ),
            ("2001:db8::1/32", "host bits set"),
            ("10.0.0.0/33", "is not an IP address or CIDR"),
            ("::/129", "is not an IP address or CIDR"),
            ("10.0.0.0/08", "is not an IP address or CIDR"),
            ("10.0.0.0/+8", "is not an IP address or CIDR"),
            ("10.0.0.0/", "is not an IP address or CIDR"),
            ("010.0.0.0/8", "is not an IP address or CIDR"),
            (" 10.0.0.0/8", "is not an IP address or CIDR"),
            ("10.0.0.0 /8", "is not an IP address or CIDR"),
            ("10.0.0.0/8/8", "is not an IP address or CIDR"),
            ("10.0.0.0-10.0.0.255", "is not an IP address or CIDR"),
            ("hooks.stripe.com", "is not an IP address or CIDR"),
            ("fe80::1%eth0/64", "is not an IP address or CIDR"),
            ("", "is not an IP address or CIDR"),
            (
                "::ffff:10.0.0.0/104",
                "IPv4-mapped IPv6 range: write the IPv4 form",
            ),
            ("::ffff:10.0.0.1", "IPv4-mapped"),
        ] {
            let e = range(entry).expect_err(entry);
            assert!(e.contains(fragment), "{entry:?}: {e}");
        }
        assert!(range(&"1".repeat(65)).unwrap_err().contains("at most 64"));
    }

    #[test]
    fn the_list_names_the_index_of_the_first_bad_entry_and_bounds_its_length() {
        let entries = ["10.0.0.0/8".to_string(), "10.0.0.300".to_string()];
        let e = source_ranges(&entries).unwrap_err();
        assert_eq!(e.field, "spec.sourceRanges[1]");
        assert!(e.message.contains("\"10.0.0.300\""), "{e}");
        let many = vec!["10.0.0.0/8".to_string(); limits::MAX_SOURCE_RANGES + 1];
        assert_eq!(
            source_ranges(&many).unwrap_err(),
            FieldError::new("spec.sourceRanges", "at most 256 entries")
        );
        assert_eq!(source_ranges(&[]).unwrap(), vec![]);
    }
}
