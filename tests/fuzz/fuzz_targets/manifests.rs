#![no_main]
//! Arbitrary text as a manifest file: loaded and compiled or refused, never a panic; a refusal
//! names the file and never shows a Secret's value. `tests/fuzz/run.sh` seeds it with
//! config/examples.

use libfuzzer_sys::fuzz_target;

#[path = "check_manifests.rs"]
mod check_manifests;

fuzz_target!(|data: &[u8]| check_manifests::load(data));
