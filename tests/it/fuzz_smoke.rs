//! The CI smoke run of the fuzz targets: their exact bodies (tests/fuzz/fuzz_targets/common.rs)
//! over inputs from a seeded PRNG, in the ordinary test build. Not coverage-guided; the libFuzzer
//! runs (`tests/fuzz/run.sh [executions]`) are the long, on-demand version.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[path = "../fuzz/fuzz_targets/common.rs"]
#[allow(dead_code)]
mod common;

#[path = "../fuzz/fuzz_targets/check_fields.rs"]
mod check_fields;

#[path = "../fuzz/fuzz_targets/check_manifests.rs"]
mod check_manifests;

/// Fragments that steer random inputs into the parsers' interesting branches.
const PIECES: &[&[u8]] = &[
    b"t=",
    b"v1=",
    b"v0=",
    b"v1,",
    b"v1a,",
    b",",
    b" ",
    b"=",
    b"sha256=",
    b"sha1=",
    b"1700000000",
    b"-1",
    b"99999999999999999999",
    b"0",
    b"msg_1",
    b"whsec_",
    b"\xff",
    b"\x00",
    b"\x7f",
    b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    b"AAAA",
    b"==",
    b"{\"id\":\"evt_1\"}",
    b"\xc3\x28",
    b"ts=",
    b";h1=",
    b"bodySHA256=",
    b"hub.mode=subscribe&hub.verify_token=verify-token&hub.challenge=",
    b"&",
    b"%2B",
    b"2023-11-14T22:13:20Z",
    b"2023-11-14T22:13:20.123456789+01:00",
    b"{\"webhookTimestamp\":1700000000000}",
    b"{\"type\":1}",
    b"MEUCIQ",
];

fn input(rng: &mut StdRng) -> Vec<u8> {
    let mut data = Vec::new();
    for _ in 0..rng.random_range(0..24) {
        if rng.random_bool(0.6) {
            data.extend_from_slice(PIECES[rng.random_range(0..PIECES.len())]);
        } else {
            let n = rng.random_range(0..16);
            data.extend((0..n).map(|_| rng.random::<u8>()));
        }
    }
    data
}

#[test]
fn header_parsers_survive_random_and_structured_input() {
    let mut rng = StdRng::seed_from_u64(0x6b6f_6f6b);
    for _ in 0..20_000 {
        common::parse_headers(&input(&mut rng));
    }
}

#[test]
fn verifier_never_accepts_random_or_structured_input() {
    let mut rng = StdRng::seed_from_u64(0x7665_7269);
    for _ in 0..10_000 {
        common::verify_unsigned(&input(&mut rng));
    }
}

/// Object keys and pointer tokens: the names routes read, array indexes in the forms serde_json
/// takes and refuses, and keys that need a pointer's escapes.
const TOKENS: &[&str] = &[
    "id", "type", "data", "object", "0", "1", "01", "+1", "-0", "a/b", "m~n", "", "\u{e9}",
];

/// Scalars in the forms JSON allows (and `Value` refuses: `1e400`, a lone surrogate).
const SCALARS: &[&str] = &[
    "\"evt_1\"",
    "\"\"",
    "0",
    "-0",
    "1.5",
    "1e3",
    "1e400",
    "-1e-400",
    "18446744073709551616",
    "-9223372036854775809",
    "true",
    "false",
    "null",
    "\"\\ud800\"",
    "\"\\ud83d\\ude00\"",
    "\"\\u0041\"",
    "\"a\\/b\"",
    "\"caf\u{e9}\"",
];

fn json_key(rng: &mut StdRng) -> String {
    let key = TOKENS[rng.random_range(0..TOKENS.len())];
    // Sometimes spelled with an escape, which the reader must unescape to match.
    match key.as_bytes().first() {
        Some(b'i') if rng.random_bool(0.2) => format!("\"\\u0069{}\"", &key[1..]),
        _ => serde_json::to_string(key).expect("a string"),
    }
}

/// A random JSON text, up to `depth` levels of objects and arrays (duplicate keys included).
fn json_text(rng: &mut StdRng, depth: u32) -> String {
    // A document is most often an object or an array; its members, a scalar a third of the time.
    let scalar = depth == 0 || (depth < 4 && rng.random_bool(0.34));
    match if scalar { 0 } else { rng.random_range(1..3) } {
        0 => SCALARS[rng.random_range(0..SCALARS.len())].to_string(),
        1 => {
            let members: Vec<String> = (0..rng.random_range(0..4))
                .map(|_| format!("{}: {}", json_key(rng), json_text(rng, depth - 1)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        _ => {
            let items: Vec<String> = (0..rng.random_range(0..4))
                .map(|_| json_text(rng, depth - 1))
                .collect();
            format!("[{}]", items.join(","))
        }
    }
}

/// A pointer of one or two tokens, escaped as RFC 6901 says (or, sometimes, not).
fn json_pointer(rng: &mut StdRng) -> String {
    if rng.random_bool(0.05) {
        return ["", "id", "~", "/~2"][rng.random_range(0..4)].to_string();
    }
    (0..rng.random_range(1..3))
        .map(|_| {
            let t = TOKENS[rng.random_range(0..TOKENS.len())];
            let escaped = t.replace('~', "~0").replace('/', "~1");
            format!(
                "/{}",
                if rng.random_bool(0.9) {
                    escaped
                } else {
                    t.to_string()
                }
            )
        })
        .collect()
}

#[test]
fn the_one_pass_field_reader_agrees_with_serde_json_on_random_documents() {
    let mut rng = StdRng::seed_from_u64(0x6a73_6f6e);
    let (mut json, mut found) = (0, 0);
    for _ in 0..40_000 {
        let mut data = Vec::new();
        let pointers: Vec<String> = (0..rng.random_range(1..4))
            .map(|_| json_pointer(&mut rng))
            .collect();
        for p in &pointers {
            data.extend_from_slice(p.as_bytes());
            data.push(0xff);
        }
        let mut body = json_text(&mut rng, 4).into_bytes();
        // A fifth are damaged: a byte changed, dropped or added, or text after the document.
        if rng.random_bool(0.2) && !body.is_empty() {
            let i = rng.random_range(0..body.len());
            match rng.random_range(0..4) {
                0 => body[i] = rng.random(),
                1 => drop(body.remove(i)),
                2 => body.insert(i, b"{}[]\",:\\"[rng.random_range(0..7)]),
                _ => body.extend_from_slice(b" {}"),
            }
        }
        if let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&body) {
            json += 1;
            found += usize::from(pointers.iter().any(|p| doc.pointer(p).is_some()));
        }
        data.extend_from_slice(&body);
        check_fields::compare(&data);
    }
    // The comparison means little unless many inputs are documents where a pointer finds something.
    assert!(
        json > 20_000 && found > 2_000,
        "{json} documents, {found} with a value found"
    );
}

/// The repository's examples (config/examples), each document a seed.
fn example_manifests() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/examples");
    let mut texts: Vec<String> = std::fs::read_dir(&dir)
        .expect("config/examples")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| std::fs::read_to_string(p).expect("readable"))
        .collect();
    texts.sort();
    assert!(texts.len() >= 10, "examples: {}", texts.len());
    texts
}

/// What replaces a value: the Secret marks in the shapes YAML reads as other than strings, and
/// values every field must refuse or take.
const MANIFEST_VALUES: &[&str] = &[
    "sekritvalue",
    "7391462055",
    "-7391462055",
    "7391462055.5",
    "0x7391462055",
    "[7391462055]",
    "{k: sekritvalue}",
    "\"sekritvalue!\"",
    "sekritvalue: 1",
    "!!binary c2Vrcml0dmFsdWU=",
    "~",
    "null",
    "true",
    "[]",
    "{}",
    "\"\"",
    "-1",
    "0",
    "1e400",
    "99999999999999999999",
    "0ms",
    "99999999999999999999d",
    "1d1h",
    "\"http://[::1\"",
    "\"https://x\"",
    "\"/\"",
    "\"*\"",
    "\"\\u0000\"",
    "&a x",
    "*a",
    "\"2026-13-45T99:99:99Z\"",
    "\"sha256=\"",
    "stripe",
    "standardWebhooks",
    "ed25519",
    "hex",
    "base64",
    "|\n  sekritvalue",
];

fn mutate(rng: &mut StdRng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..rng.random_range(1..4) {
        if lines.is_empty() {
            break;
        }
        let i = rng.random_range(0..lines.len());
        let value = MANIFEST_VALUES[rng.random_range(0..MANIFEST_VALUES.len())];
        match rng.random_range(0..10) {
            // Most often: a value replaced, where a line has one.
            0..=5 => {
                if let Some(at) = lines[i].find(": ") {
                    lines[i] = format!("{}: {value}", &lines[i][..at]);
                }
            }
            6 => drop(lines.remove(i)),
            7 => {
                let line = lines[i].clone();
                lines.insert(rng.random_range(0..=lines.len()), line);
            }
            8 => lines[i].push_str(value),
            _ => lines.truncate(i),
        }
    }
    lines.join("\n")
}

#[test]
fn manifests_load_or_are_refused_naming_the_file_without_secret_values() {
    let seeds = example_manifests();
    let mut rng = StdRng::seed_from_u64(0x6d61_6e69);
    let mut refused = 0;
    for _ in 0..3_000 {
        let seed = &seeds[rng.random_range(0..seeds.len())];
        let text = mutate(&mut rng, seed);
        let mut m = hookgate::manifest::Manifests::default();
        refused += usize::from(
            m.add_text(check_manifests::FILE, &text)
                .and_then(|()| m.route_table().map(drop))
                .is_err(),
        );
        check_manifests::load(text.as_bytes());
    }
    // Both outcomes must be common, or the mutations test little.
    assert!(
        (300..2_700).contains(&refused),
        "{refused} of 3,000 refused"
    );
}
