//! Fixtures shared by the scheme tests. Everything runs through [`Verifier::verify`] so a test
//! exercises the same envelope, key-ring and crypto path a real request takes.

use super::{
    Key, KeyMaterial, Rejection, Scheme, SignInput, SigningKey, Unverified, Verified, Verifier,
};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use chrono::{DateTime, Utc};
use ed25519_dalek::SigningKey as EdSigningKey;

/// A fixed clock: verification results must not depend on when the tests run.
pub const NOW_SECS: i64 = 1_700_000_000;
/// The key id every [`input`] is signed under.
pub const KEY_ID: &str = "k1";
pub const MISMATCH: Rejection = Rejection::InvalidSignature("signature_mismatch");

pub fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).expect("valid unix seconds")
}

pub fn now() -> DateTime<Utc> {
    at(NOW_SECS)
}

/// Builds a request's headers; names may be given in any case, as on the wire.
pub fn headers<N: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (N, V)>) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_ref().as_bytes()).expect("header name"),
            HeaderValue::from_str(value.as_ref()).expect("header value"),
        );
    }
    map
}

pub fn set(map: &mut HeaderMap, name: &'static str, value: &str) {
    map.insert(name, HeaderValue::from_str(value).expect("header value"));
}

/// Replaces the character at `idx` with another one valid in both hex and base64, so the header
/// still decodes but carries different bytes.
pub fn flip_at(s: &str, idx: usize) -> String {
    let mut out = s.to_string();
    let new = if &s[idx..=idx] == "0" { "1" } else { "0" };
    out.replace_range(idx..=idx, new);
    out
}

pub fn key(id: &str, material: KeyMaterial, not_after: Option<DateTime<Utc>>) -> Key {
    Key {
        id: id.to_string(),
        material,
        not_after,
    }
}

pub fn ed_signer(seed: u8) -> EdSigningKey {
    EdSigningKey::from_bytes(&[seed; 32])
}

pub fn input(body: &[u8]) -> SignInput<'_> {
    SignInput {
        key_id: KEY_ID,
        timestamp: NOW_SECS,
        event_id: "evt_1",
        event_type: Some("thing.created"),
        body,
    }
}

pub fn verify_at(
    v: &Verifier,
    headers: &HeaderMap,
    body: &[u8],
    now: DateTime<Utc>,
) -> Result<Verified, Rejection> {
    v.verify(
        Unverified {
            headers,
            query: None,
            body,
        },
        now,
    )
}

pub fn verify(v: &Verifier, headers: &HeaderMap, body: &[u8]) -> Result<Verified, Rejection> {
    verify_at(v, headers, body, now())
}

/// What a scheme must survive: its own signature verifies, and every tampering is refused.
pub struct RoundTrip {
    pub scheme: Scheme,
    pub signer: SigningKey,
    pub key: KeyMaterial,
    pub wrong: KeyMaterial,
    pub signature_header: &'static str,
    /// Alters the signature header value so it still parses but no longer matches.
    pub corrupt: fn(&str) -> String,
    /// Alters the signed timestamp; `None` for schemes that sign none.
    pub retime: Option<fn(&mut HeaderMap)>,
}

pub fn assert_round_trip(case: RoundTrip) {
    let body = br#"{"id":"evt_1","amount":100}"#;
    let signed = headers(case.scheme.sign(&case.signer, &input(body)).expect("signs"));
    let good = Verifier::new(case.scheme.clone(), vec![key(KEY_ID, case.key, None)]);

    let ok = verify(&good, &signed, body).expect("own signature verifies");
    assert_eq!(ok.key_id(), KEY_ID);
    assert_eq!(ok.timestamp(), case.retime.map(|_| NOW_SECS));

    assert_eq!(
        verify(&good, &signed, br#"{"id":"evt_1","amount":999}"#).unwrap_err(),
        MISMATCH
    );

    let mut h = signed.clone();
    let corrupted = (case.corrupt)(h[case.signature_header].to_str().unwrap());
    set(&mut h, case.signature_header, &corrupted);
    assert_eq!(
        verify(&good, &h, body).unwrap_err(),
        MISMATCH,
        "corrupted: {corrupted}"
    );

    if let Some(retime) = case.retime {
        let mut h = signed.clone();
        retime(&mut h);
        assert_eq!(verify(&good, &h, body).unwrap_err(), MISMATCH, "retimed");
    }

    let wrong = Verifier::new(case.scheme, vec![key(KEY_ID, case.wrong, None)]);
    assert_eq!(verify(&wrong, &signed, body).unwrap_err(), MISMATCH);
}
