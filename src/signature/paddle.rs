//! Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>`, HMAC-SHA256 with the notification
//! destination's secret over `{ts}:{body}`. While a secret rotates Paddle sends several `h1`.

use super::{
    Candidate, Envelope, Rejection, SignInput, SigningKey, header_str, hmac_secret, hmac_sha256,
    parse_unix_seconds,
};
use axum::http::HeaderMap;

pub const SIGNATURE: &str = "paddle-signature";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let Some(value) = header_str(headers, SIGNATURE)? else {
        // Paddle's timestamp travels in the signature header, as Stripe's does: no header is no
        // signature (401), as it is for Stripe.
        return Ok(Envelope::signed(Vec::new(), Vec::new()));
    };
    let mut ts = None;
    let mut candidates = Vec::new();
    for part in value.split(';') {
        match part.split_once('=') {
            Some(("ts", v)) if ts.is_none() => ts = Some(v),
            Some(("ts", _)) => return Err(Rejection::Malformed("bad_signature_header")),
            // An h1 that is not hex cannot match; the others stay usable.
            Some(("h1", v)) => candidates.extend(hex::decode(v).ok().map(Candidate::HmacSha256)),
            _ => {}
        }
    }
    let ts = ts.ok_or(Rejection::Malformed("missing_timestamp"))?;
    let mut env = Envelope::signed(format!("{ts}:").into_bytes(), candidates);
    env.timestamp = Some(parse_unix_seconds(ts)?);
    Ok(env)
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "paddle")?;
    let ts = input.timestamp.to_string();
    let sig = hmac_sha256(secret, &[ts.as_bytes(), b":", input.body]);
    Ok(vec![(
        SIGNATURE.into(),
        format!("ts={ts};h1={}", hex::encode(sig)),
    )])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Scheme, SigningKey};

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Paddle,
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: KeyMaterial::Hmac(b"right".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong".to_vec()),
            signature_header: "paddle-signature",
            corrupt: |v| flip_at(v, "ts=1700000000;h1=".len()),
            retime: Some(|h| {
                let v = h["paddle-signature"].to_str().unwrap().replace("ts=1700000000", "ts=1700000001");
                set(h, "paddle-signature", &v)
            }),
        });
    }
}
