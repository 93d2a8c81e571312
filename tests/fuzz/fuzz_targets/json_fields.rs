#![no_main]
//! The receiver's one-pass reading of a body's fields against `serde_json::Value::pointer` on
//! arbitrary bodies and pointers: the same bodies are JSON, the same values are found.

use libfuzzer_sys::fuzz_target;

#[path = "check_fields.rs"]
mod check_fields;

fuzz_target!(|data: &[u8]| check_fields::compare(data));
