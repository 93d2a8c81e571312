//! Slack: `X-Slack-Signature: v0=<hex>`, HMAC-SHA256 over `v0:{X-Slack-Request-Timestamp}:{body}`.

use super::{
    Candidate, Encoding, Envelope, Rejection, SignInput, SigningKey, hmac_secret, hmac_sha256,
    signature_header, unix_seconds_header,
};
use axum::http::HeaderMap;

const SIGNATURE: &str = "x-slack-signature";
const TIMESTAMP: &str = "x-slack-request-timestamp";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    v0_envelope(headers, SIGNATURE, TIMESTAMP)
}

/// Slack's `v0` format, which Zoom uses too under its own header names: `v0=<hex>` over
/// `v0:{timestamp}:{body}`.
pub(super) fn v0_envelope(
    headers: &HeaderMap,
    signature: &str,
    timestamp: &str,
) -> Result<Envelope, Rejection> {
    // The timestamp is checked first, as for the generic schemes, so a request carrying neither
    // header gets the same answer from every timestamped scheme.
    let (ts, seconds) = unix_seconds_header(headers, timestamp)?;
    let candidates =
        signature_header(headers, signature, "v0=", Encoding::Hex)?.map(Candidate::HmacSha256);
    // Raw header text, since that is what the provider put in the base string.
    let mut env = Envelope::signed(format!("v0:{ts}:").into_bytes(), candidates);
    env.timestamp = Some(seconds);
    Ok(env)
}

/// Events API `url_verification`: answered `{"challenge":C}`.
pub fn handshake(body: &[u8]) -> Option<super::Handshake> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    if json.get("type")?.as_str()? != "url_verification" {
        return None;
    }
    let challenge = json.get("challenge")?.as_str()?;
    Some(super::Handshake::Json(
        serde_json::json!({ "challenge": challenge }).to_string(),
    ))
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    Ok(v0_sign(
        hmac_secret(key, "slack")?,
        input,
        SIGNATURE,
        TIMESTAMP,
    ))
}

/// The headers of [`v0_envelope`]'s format.
pub(super) fn v0_sign(
    secret: &[u8],
    input: &SignInput,
    signature: &str,
    timestamp: &str,
) -> Vec<(String, String)> {
    let ts = input.timestamp.to_string();
    let sig = hmac_sha256(secret, &[b"v0:", ts.as_bytes(), b":", input.body]);
    vec![
        (signature.into(), format!("v0={}", const_hex::encode(sig))),
        (timestamp.into(), ts),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Rejection, Scheme, SigningKey, Verifier};

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Slack,
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: KeyMaterial::Hmac(b"right".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong".to_vec()),
            signature_header: "x-slack-signature",
            corrupt: |v| flip_at(v, "v0=".len()),
            retime: Some(|h| set(h, "x-slack-request-timestamp", "1700000001")),
        });
    }

    /// Slack's "Verifying requests from Slack" worked example
    /// (https://api.slack.com/authentication/verifying-requests-from-slack), as pinned by
    /// slackapi/java-slack-sdk slack-app-backend/src/test/java/test_locally/app_backend/SlackSignatureTest.java.
    #[test]
    fn slack_docs_published_vector() {
        const SECRET: &[u8] = b"8f742231b10e8888abcd99yyyzzz85a5";
        const BODY: &[u8] =
            b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow\
            &channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner\
            &command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands\
            %2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN\
            &trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        const SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        let v = Verifier::new(
            Scheme::Slack,
            vec![key("slack", Scheme::Slack.parse_key(SECRET).unwrap(), None)],
        );
        let h = headers([
            ("X-Slack-Signature", SIG),
            ("X-Slack-Request-Timestamp", "1531420618"),
        ]);
        let ok = verify_at(&v, &h, BODY, at(1_531_420_620)).unwrap();
        assert_eq!(ok.timestamp(), Some(1_531_420_618));
        let mut retimed = h.clone();
        set(&mut retimed, "x-slack-request-timestamp", "1531420619");
        assert_eq!(
            verify_at(&v, &retimed, BODY, at(1_531_420_620)).unwrap_err(),
            MISMATCH
        );
    }

    #[test]
    fn url_verification_is_answered_with_its_challenge() {
        let body = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        assert_eq!(
            super::handshake(body),
            Some(super::super::Handshake::Json(
                r#"{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}"#.into()
            ))
        );
        assert_eq!(
            super::handshake(br#"{"type":"event_callback","challenge":"x"}"#),
            None
        );
    }

    #[test]
    fn header_shape_decides_400_or_401() {
        let v = Verifier::new(
            Scheme::Slack,
            vec![key("s", KeyMaterial::Hmac(b"s".to_vec()), None)],
        );
        let check =
            |pairs: &[(&str, &str)]| verify(&v, &headers(pairs.iter().copied()), b"x").map(|_| ());
        let malformed = |r| Err::<(), _>(Rejection::Malformed(r));
        assert_eq!(
            check(&[("x-slack-signature", "v0=00")]),
            malformed("missing_timestamp")
        );
        let ts = ("x-slack-request-timestamp", "1700000000");
        assert_eq!(
            check(&[
                ("x-slack-request-timestamp", "soon"),
                ("x-slack-signature", "v0=00")
            ]),
            malformed("bad_timestamp")
        );
        assert_eq!(
            check(&[ts, ("x-slack-signature", "00")]),
            malformed("bad_signature_header")
        );
        assert_eq!(
            check(&[ts, ("x-slack-signature", "v0=nothex")]),
            malformed("bad_signature_header")
        );
        let err = check(&[ts]).unwrap_err();
        assert_eq!(err, Rejection::InvalidSignature("missing_signature"));
    }
}
