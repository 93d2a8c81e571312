//! What every scheme reads out of a request before any cryptography: a header's value, hex,
//! timestamps. Strict on purpose: a value a proxy could have altered or joined is refused.

use super::Rejection;
use axum::http::HeaderMap;
use axum::http::header::AsHeaderName;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// How a provider writes a signature's bytes in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Hex,
    Base64,
}

impl Encoding {
    pub fn decode(self, s: &str) -> Option<Vec<u8>> {
        match self {
            Encoding::Hex => decode_hex(s).ok(),
            Encoding::Base64 => STANDARD.decode(s).ok(),
        }
    }
    pub fn encode(self, b: &[u8]) -> String {
        match self {
            Encoding::Hex => const_hex::encode(b),
            Encoding::Base64 => STANDARD.encode(b),
        }
    }
}

/// The bytes of the one signature header `name` carries after `prefix` (`sha256=`, `v0=`, or
/// none); `None` when the header is absent. A value without the prefix, or that does not decode,
/// is malformed (400) in every scheme: only a well-formed signature can be a wrong one (401).
pub fn signature_header(
    headers: &HeaderMap,
    name: impl AsHeaderName,
    prefix: &str,
    encoding: Encoding,
) -> Result<Option<Vec<u8>>, Rejection> {
    let Some(value) = header_str(headers, name)? else {
        return Ok(None);
    };
    value
        .strip_prefix(prefix)
        .and_then(|v| encoding.decode(v))
        .map(Some)
        .ok_or(Rejection::Malformed("bad_signature_header"))
}

/// A required unix-seconds timestamp header: its text as sent (which the provider signs) and its
/// value.
pub fn unix_seconds_header(
    headers: &HeaderMap,
    name: impl AsHeaderName,
) -> Result<(&str, i64), Rejection> {
    let raw = header_str(headers, name)?.ok_or(Rejection::Malformed("missing_timestamp"))?;
    Ok((raw, parse_unix_seconds(raw)?))
}

/// Parses an RFC 3339 timestamp header value (Twitch) to unix seconds.
pub fn parse_rfc3339_seconds(s: &str) -> Result<i64, Rejection> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp())
        .map_err(|_| Rejection::Malformed("bad_timestamp"))
}

/// A header's value exactly as sent; `None` when absent, an error when present but not visible
/// ASCII, or when sent more than once.
pub fn header_str(headers: &HeaderMap, name: impl AsHeaderName) -> Result<Option<&str>, Rejection> {
    let mut lines = headers.get_all(name).iter();
    let Some(v) = lines.next() else {
        return Ok(None);
    };
    // Which of two lines counts would otherwise depend on the proxies on the way (one keeps the
    // first, one the last, one joins them), so a signed value is never taken from a pair.
    if lines.next().is_some() {
        return Err(Rejection::Malformed("repeated_header"));
    }
    v.to_str()
        .map(Some)
        .map_err(|_| Rejection::Malformed("non_ascii_header"))
}

/// Hex as providers send it: digits only. `const-hex` also reads a `0x` prefix, which no provider
/// sends; such a value is refused, as it was before hookgate used that crate.
pub fn decode_hex(s: impl AsRef<[u8]>) -> Result<Vec<u8>, const_hex::FromHexError> {
    refuse_0x(s.as_ref())?;
    const_hex::decode(s)
}

/// [`decode_hex`] into `out`, which must be half the digits' length.
pub fn decode_hex_to_slice(s: &[u8], out: &mut [u8]) -> Result<(), const_hex::FromHexError> {
    refuse_0x(s)?;
    const_hex::decode_to_slice(s, out)
}

fn refuse_0x(s: &[u8]) -> Result<(), const_hex::FromHexError> {
    match s {
        [b'0', c @ (b'x' | b'X'), ..] => Err(const_hex::FromHexError::InvalidHexCharacter {
            c: char::from(*c),
            index: 1,
        }),
        _ => Ok(()),
    }
}

/// Parses a unix-seconds timestamp header value: digits only (no sign, no spaces).
pub fn parse_unix_seconds(s: &str) -> Result<i64, Rejection> {
    let bad = Rejection::Malformed("bad_timestamp");
    // Up to 18 digits cannot overflow an i64, so they are checked and read in one pass (a real
    // timestamp has 10); longer values, with leading zeros perhaps, take the checked parse.
    match s.len() {
        0 => Err(bad),
        1..=18 => s.bytes().try_fold(0i64, |n, b| {
            let digit = b.wrapping_sub(b'0');
            (digit < 10).then(|| n * 10 + i64::from(digit)).ok_or(bad)
        }),
        _ if s.bytes().all(|b| b.is_ascii_digit()) => s.parse::<i64>().map_err(|_| bad),
        _ => Err(bad),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn hex_is_digits_only_without_a_0x_prefix() {
        assert_eq!(decode_hex("0aFf").unwrap(), [0x0a, 0xff]);
        for prefixed in ["0x0aff", "0X0aff"] {
            assert!(decode_hex(prefixed).is_err(), "{prefixed}");
            assert!(decode_hex_to_slice(prefixed.as_bytes(), &mut [0; 2]).is_err());
        }
        assert!(decode_hex("0g").is_err());
        assert!(decode_hex("abc").is_err(), "odd length");
        let mut out = [0; 2];
        decode_hex_to_slice(b"0aff", &mut out).unwrap();
        assert_eq!(out, [0x0a, 0xff]);
        assert!(
            decode_hex_to_slice(b"0aff", &mut [0; 3]).is_err(),
            "wrong length"
        );
    }

    #[test]
    fn unix_seconds_are_digits_only_and_fit_an_i64() {
        let ok = |s: &str, n: i64| assert_eq!(parse_unix_seconds(s), Ok(n), "{s:?}");
        ok("0", 0);
        ok("1700000000", 1_700_000_000);
        ok("01700000000", 1_700_000_000);
        ok(&"9".repeat(18), 999_999_999_999_999_999);
        ok("9223372036854775807", i64::MAX);
        ok(&format!("{}1700000000", "0".repeat(15)), 1_700_000_000);
        for bad in [
            "",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1.5",
            "1e9",
            "12x",
            "/",
            ":",
            "١٢",
            "9223372036854775808",
            &"9".repeat(40),
            &format!("{}x", "1".repeat(18)),
        ] {
            assert_eq!(
                parse_unix_seconds(bad),
                Err(Rejection::Malformed("bad_timestamp")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_header_is_read_once_as_visible_ascii() {
        let mut h = HeaderMap::new();
        assert_eq!(header_str(&h, "x-sig"), Ok(None));
        h.append("x-sig", HeaderValue::from_static("abc"));
        assert_eq!(header_str(&h, "x-sig"), Ok(Some("abc")));
        h.append("x-sig", HeaderValue::from_static("abc"));
        assert_eq!(
            header_str(&h, "x-sig"),
            Err(Rejection::Malformed("repeated_header")),
            "even two identical lines"
        );
        h.insert("x-sig", HeaderValue::from_bytes(b"ab\xff").unwrap());
        assert_eq!(
            header_str(&h, "x-sig"),
            Err(Rejection::Malformed("non_ascii_header"))
        );
    }

    #[test]
    fn a_signature_header_is_its_prefix_then_the_encoded_bytes() {
        let malformed = Err(Rejection::Malformed("bad_signature_header"));
        let read = |value: &str, prefix: &str, encoding: Encoding| {
            let mut h = HeaderMap::new();
            h.insert("x-sig", HeaderValue::from_str(value).unwrap());
            signature_header(&h, "x-sig", prefix, encoding)
        };
        assert_eq!(
            signature_header(&HeaderMap::new(), "x-sig", "", Encoding::Hex),
            Ok(None)
        );
        assert_eq!(
            read("sha256=0aff", "sha256=", Encoding::Hex),
            Ok(Some(vec![0x0a, 0xff]))
        );
        assert_eq!(
            read("0aff", "sha256=", Encoding::Hex),
            malformed,
            "prefix missing"
        );
        assert_eq!(read("sha256=0x0aff", "sha256=", Encoding::Hex), malformed);
        assert_eq!(
            read("Cv8=", "", Encoding::Base64),
            Ok(Some(vec![0x0a, 0xff]))
        );
        assert_eq!(read("not base64!", "", Encoding::Base64), malformed);
    }

    #[test]
    fn a_timestamp_header_is_required_and_kept_as_sent() {
        let mut h = HeaderMap::new();
        assert_eq!(
            unix_seconds_header(&h, "x-ts"),
            Err(Rejection::Malformed("missing_timestamp"))
        );
        h.insert("x-ts", HeaderValue::from_static("0001700000000"));
        assert_eq!(
            unix_seconds_header(&h, "x-ts"),
            Ok(("0001700000000", 1_700_000_000))
        );
        h.insert("x-ts", HeaderValue::from_static("-1"));
        assert_eq!(
            unix_seconds_header(&h, "x-ts"),
            Err(Rejection::Malformed("bad_timestamp"))
        );
    }
}
