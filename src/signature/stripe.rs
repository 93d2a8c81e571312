//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, HMAC-SHA256 over `{t}.{body}`.
//! Stripe sends several `v1` values while an endpoint secret is being rolled, so each is a candidate.

use super::{
    Candidate, Envelope, Rejection, SignInput, SigningKey, header_str, hmac_sha256,
    parse_unix_seconds,
};
use axum::http::{HeaderMap, HeaderName};

const SIGNATURE: &str = "stripe-signature";
/// Parsed once: a lookup by `&str` parses and validates the name on every request.
static SIGNATURE_HEADER: HeaderName = HeaderName::from_static(SIGNATURE);

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    // Stripe sends one v1, or two while a secret rolls.
    let mut env = Envelope::signed(Vec::new(), Vec::with_capacity(2));
    let Some(value) = header_str(headers, &SIGNATURE_HEADER)? else {
        return Ok(env);
    };
    let mut t = None;
    // One SIMD search per item: a `str` pattern search costs more than these short items do.
    let mut rest = Some(value);
    while let Some(items) = rest {
        let item = match memchr::memchr(b',', items.as_bytes()) {
            Some(comma) => {
                rest = Some(&items[comma + 1..]);
                &items[..comma]
            }
            None => {
                rest = None;
                items
            }
        };
        let item = item.trim_ascii();
        let Some(eq) = item.bytes().position(|b| b == b'=') else {
            continue;
        };
        match (&item[..eq], &item[eq + 1..]) {
            // Two timestamps would leave it ambiguous which one was signed.
            ("t", _) if t.is_some() => {
                return Err(Rejection::Malformed("bad_signature_header"));
            }
            ("t", v) => t = Some(v),
            // A v1 that is not hex cannot match; skipping it keeps the other v1 values usable.
            ("v1", v) => {
                if let Ok(sig) = super::decode_hex(v) {
                    env.candidates.push(Candidate::HmacSha256(sig));
                }
            }
            // v0 is Stripe's test-mode scheme with a different secret; other schemes are unknown.
            _ => {}
        }
    }
    let t = t.ok_or(Rejection::Malformed("missing_timestamp"))?;
    env.timestamp = Some(parse_unix_seconds(t)?);
    // The raw header text is what Stripe signed, so it is used rather than the parsed number.
    let mut prefix = Vec::with_capacity(t.len() + 1);
    prefix.extend_from_slice(t.as_bytes());
    prefix.push(b'.');
    env.prefix = prefix;
    Ok(env)
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = super::hmac_secret(key, "stripe")?;
    let t = input.timestamp.to_string();
    let sig = hmac_sha256(secret, &[t.as_bytes(), b".", input.body]);
    Ok(vec![(
        SIGNATURE.into(),
        format!("t={t},v1={}", const_hex::encode(sig)),
    )])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Rejection, Scheme, SigningKey, Verifier, hmac_sha256};
    use axum::http::HeaderMap;

    fn verifier(secret: &[u8]) -> Verifier {
        let material = Scheme::Stripe.parse_key(secret).unwrap();
        Verifier::new(Scheme::Stripe, vec![key("whsec", material, None)])
    }

    fn check(header: &str, body: &[u8]) -> Result<(), Rejection> {
        let v = verifier(b"whsec_test\n");
        verify(&v, &headers([("Stripe-Signature", header)]), body).map(|_| ())
    }

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Stripe,
            signer: SigningKey::Hmac(b"whsec_right".to_vec()),
            key: KeyMaterial::Hmac(b"whsec_right".to_vec()),
            wrong: KeyMaterial::Hmac(b"whsec_wrong".to_vec()),
            signature_header: "stripe-signature",
            corrupt: |v| flip_at(v, v.find("v1=").unwrap() + 3),
            retime: Some(|h| {
                let v = h["stripe-signature"]
                    .to_str()
                    .unwrap()
                    .replace("t=1700000000", "t=1700000001");
                set(h, "stripe-signature", &v);
            }),
        });
    }

    /// stripe/stripe-dotnet, src/StripeTests/Services/Events/EventUtilityTest.cs: secret
    /// `webhook_secret`, t=1533204620, body = src/StripeTests/Resources/event_test_signature.json
    /// (484 bytes, LF line endings, trailing newline). The header also carries a v0 to be ignored.
    #[test]
    fn stripe_dotnet_published_vector() {
        const BODY: &str = concat!(
            "{\n  \"id\": \"evt_123\",\n  \"object\": \"event\",\n  \"account\": \"acct_123\",\n",
            "  \"api_version\": \"2017-05-25\",\n  \"created\": 1533204620,\n  \"data\": {\n",
            "    \"object\": {\n      \"id\": \"cus_123\",\n      \"object\": \"customer\",\n",
            "      \"created\": 123456789,\n      \"email\": \"test@stripe.com\",\n",
            "      \"livemode\": false,\n      \"metadata\": {}\n    }\n  },\n  \"livemode\": false,\n",
            "  \"pending_webhooks\": 1,\n  \"request\": {\n    \"id\": \"req_123\",\n",
            "    \"idempotency_key\": \"idempotency-key-123\"\n  },\n  \"type\": \"customer.created\"\n}\n",
        );
        const HEADER: &str = "t=1533204620,\
            v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,\
            v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef";
        assert_eq!(BODY.len(), 484);
        let h = headers([("Stripe-Signature", HEADER)]);
        let run = |secret: &[u8], body: &str| {
            let now = at(1_533_204_700);
            verify_at(&verifier(secret), &h, body.as_bytes(), now).map(|v| v.timestamp())
        };
        assert_eq!(run(b"webhook_secret", BODY), Ok(Some(1_533_204_620)));
        assert_eq!(
            run(b"webhook_secret", &BODY.replace("cus_123", "cus_124")),
            Err(MISMATCH)
        );
        assert_eq!(run(b"whsec_other", BODY), Err(MISMATCH));
    }

    #[test]
    fn any_v1_may_match_during_secret_rotation() {
        let signed = super::sign(&SigningKey::Hmac(b"whsec_test".to_vec()), &input(b"{}")).unwrap();
        let good = signed[0].1.split_once(",v1=").unwrap().1;
        let header = format!("t={NOW_SECS},v1={},v1={good},v0=abc,v9=zz", "0".repeat(64));
        assert_eq!(check(&header, b"{}"), Ok(()));
        // A v1 that is not hex is skipped, not fatal.
        assert_eq!(
            check(&format!("t={NOW_SECS},v1=not-hex,v1={good}"), b"{}"),
            Ok(())
        );
        // Items may carry spaces around them; empty items and items without `=` are skipped.
        assert_eq!(
            check(&format!(" t={NOW_SECS} ,, v1 ,\tv1={good} "), b"{}"),
            Ok(())
        );
        // The timestamp is the text between `t=` and the comma: a space inside it is not trimmed.
        assert_eq!(
            check(&format!("t= {NOW_SECS},v1={good}"), b"{}"),
            Err(Rejection::Malformed("bad_timestamp"))
        );
    }

    #[test]
    fn signed_timestamp_is_the_raw_header_text() {
        let sig = const_hex::encode(hmac_sha256(b"whsec_test", &[b"01700000000.", b"{}"]));
        assert_eq!(check(&format!("t=01700000000,v1={sig}"), b"{}"), Ok(()));
    }

    #[test]
    fn header_shape_decides_400_or_401() {
        fn malformed(r: &'static str) -> Result<(), Rejection> {
            Err(Rejection::Malformed(r))
        }
        assert_eq!(check("v1=00", b""), malformed("missing_timestamp"));
        assert_eq!(check("t=12x,v1=00", b""), malformed("bad_timestamp"));
        assert_eq!(check("t=,v1=00", b""), malformed("bad_timestamp"));
        assert_eq!(
            check("t=1,t=2,v1=00", b""),
            malformed("bad_signature_header")
        );
        let missing: Result<(), Rejection> = Err(Rejection::InvalidSignature("missing_signature"));
        assert_eq!(check("t=1700000000", b""), missing);
        assert_eq!(check("t=1700000000,v0=00", b""), missing);
        assert_eq!(check("t=1700000000,v1=zz", b""), missing);
        let v = verifier(b"whsec_test");
        assert_eq!(verify(&v, &HeaderMap::new(), b"").map(|_| ()), missing);
    }
}
