//! The CI smoke run of the fuzz targets: their exact bodies (tests/fuzz/fuzz_targets/common.rs)
//! over inputs from a seeded PRNG, in the ordinary test build. Not coverage-guided; the libFuzzer
//! runs (`tests/fuzz/run.sh [executions]`) are the long, on-demand version.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[path = "../fuzz/fuzz_targets/common.rs"]
#[allow(dead_code)]
mod common;

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
