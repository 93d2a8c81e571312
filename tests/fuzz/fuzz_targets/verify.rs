#![no_main]
//! The verifier entry point with arbitrary headers and body against real keys: it never panics,
//! and it never accepts a signature nobody made (the fuzzer cannot forge HMAC or Ed25519).

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::verify_unsigned(data));
