#![no_main]
//! Every scheme's header parser on arbitrary header values: it may refuse, never panic.

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::parse_headers(data));
