#![no_main]
//! The verifier entry point with arbitrary headers and body against real keys: it never panics,
//! and it never accepts a signature nobody made (the fuzzer cannot forge HMAC or Ed25519).

use hookgate::receiver::verify::{Key, KeyMaterial, Unverified, Verifier};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    for (scheme, names) in common::schemes() {
        let material = match &scheme {
            hookgate::receiver::verify::Scheme::Ed25519(_) => {
                KeyMaterial::Ed25519(ed25519_public())
            }
            _ => KeyMaterial::Hmac(b"fuzz-secret-key".to_vec()),
        };
        let keys = vec![Key {
            id: "k1".into(),
            material,
            not_after: None,
        }];
        let verifier = Verifier::new(scheme, keys);
        let (headers, body) = common::headers(&names, data);
        let result = verifier.verify(
            Unverified {
                headers: &headers,
                body,
            },
            now,
        );
        assert!(result.is_err(), "a forged request verified");
    }
});

fn ed25519_public() -> ed25519_dalek::VerifyingKey {
    ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]).verifying_key()
}
