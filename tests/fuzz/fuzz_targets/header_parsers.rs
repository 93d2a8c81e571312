#![no_main]
//! Every scheme's header parser on arbitrary header values: it may refuse, never panic.

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    for (scheme, names) in common::schemes() {
        let (headers, _) = common::headers(&names, data);
        let _ = scheme.envelope(&headers);
    }
});
