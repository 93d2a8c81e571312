//! The `json_fields` target's body, shared with the CI smoke run: the receiver's one-pass reading
//! of a body's fields (`route::json_pointers`, round 11 of docs/performance.md) must call the same
//! bodies JSON and find the same values as the whole body parsed into a `serde_json::Value` and
//! read with `Value::pointer`, which it replaced.

use hookgate::route::json_pointers::{Found, find};
use serde_json::Value;

/// The pointers a route reads when the input names none.
const DEFAULT_POINTERS: [&str; 3] = ["/id", "/type", "/data/object/id"];

/// serde_json's marker for a raw value: `Value` refuses a document with it as a key (the module
/// documents this one deliberate difference).
const RAW_VALUE_MARKER: &[u8] = b"$serde_json::private::RawValue";

/// `data` is up to three pointers, each ended by a 0xff byte, then the body; without a 0xff
/// byte, all of it is the body and the pointers are a route's usual three.
pub fn compare(data: &[u8]) {
    let mut parts: Vec<&[u8]> = data.splitn(4, |b| *b == 0xff).collect();
    let body = parts.pop().unwrap_or_default();
    let named: Vec<String> = parts
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let pointers: Vec<&str> = if named.is_empty() {
        DEFAULT_POINTERS.to_vec()
    } else {
        named.iter().map(String::as_str).collect()
    };
    let one_pass = find(body, &pointers);
    if body
        .windows(RAW_VALUE_MARKER.len())
        .any(|w| w == RAW_VALUE_MARKER)
    {
        return;
    }
    let through_value = serde_json::from_slice::<Value>(body).ok().map(|doc| {
        pointers
            .iter()
            .map(|p| doc.pointer(p).map(Found::from))
            .collect::<Vec<_>>()
    });
    assert_eq!(
        one_pass,
        through_value,
        "pointers {pointers:?} in {:?}",
        String::from_utf8_lossy(body)
    );
}
