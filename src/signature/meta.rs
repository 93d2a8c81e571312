//! Meta (WhatsApp Cloud API, Messenger, Instagram): `X-Hub-Signature-256: sha256=<hex>`,
//! HMAC-SHA256 with the app secret over the raw body. Meta signs no timestamp and no event id.
//! Subscribing the endpoint is an unsigned `GET ?hub.mode=subscribe&hub.verify_token=T&
//! hub.challenge=C`, answered with C when T is the verify token the app was configured with.

use super::{
    Candidate, Encoding, Envelope, Rejection, SignInput, SigningKey, Subscription, hmac_secret,
    hmac_sha256, signature_header,
};
use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub const SIGNATURE: &str = "x-hub-signature-256";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let candidates =
        signature_header(headers, SIGNATURE, "sha256=", Encoding::Hex)?.map(Candidate::HmacSha256);
    Ok(Envelope::signed(Vec::new(), candidates))
}

/// Meta's verification request. Parameters are read once each; a repeated one is malformed, as
/// a repeated header is.
pub fn subscribe(query: Option<&str>, verify_token: &[u8]) -> Subscription {
    let (mut mode, mut token, mut challenge) = (None, None, None);
    for (name, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        let slot = match name.as_ref() {
            "hub.mode" => &mut mode,
            "hub.verify_token" => &mut token,
            "hub.challenge" => &mut challenge,
            _ => continue,
        };
        if slot.replace(value).is_some() {
            return Subscription::Malformed;
        }
    }
    let (Some(mode), Some(challenge)) = (mode, challenge) else {
        return Subscription::Malformed;
    };
    if mode != "subscribe"
        || challenge.is_empty()
        || !challenge.bytes().all(|b| b.is_ascii_graphic())
    {
        return Subscription::Malformed;
    }
    // Equal-length digests: neither the token nor its length leaks through timing.
    let given = Sha256::digest(token.as_deref().unwrap_or("").as_bytes());
    if bool::from(
        given
            .as_slice()
            .ct_eq(Sha256::digest(verify_token).as_slice()),
    ) {
        Subscription::Challenge(challenge.into_owned())
    } else {
        Subscription::BadToken
    }
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "meta")?;
    let sig = hmac_sha256(secret, &[input.body]);
    Ok(vec![(
        SIGNATURE.into(),
        format!("sha256={}", const_hex::encode(sig)),
    )])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Scheme, SigningKey, Subscription, Verifier};

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Meta,
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: KeyMaterial::Hmac(b"right".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong".to_vec()),
            signature_header: "x-hub-signature-256",
            corrupt: |v| flip_at(v, "sha256=".len()),
            retime: None,
        });
    }

    /// Meta publishes no worked example. `X-Hub-Signature-256` is byte for byte the format
    /// GitHub documents with one ("Validating webhook deliveries", docs.github.com: secret
    /// "It's a Secret to Everybody", body "Hello, World!"), so that example pins Meta's parser too.
    #[test]
    fn same_format_published_vector() {
        const SIG: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        let v = Verifier::new(
            Scheme::Meta,
            vec![key(
                KEY_ID,
                Scheme::Meta
                    .parse_key(b"It's a Secret to Everybody")
                    .unwrap(),
                None,
            )],
        );
        let h = headers([("X-Hub-Signature-256", SIG)]);
        verify(&v, &h, b"Hello, World!").expect("the published example verifies");
        assert_eq!(verify(&v, &h, b"Hello, World?").unwrap_err(), MISMATCH);
        let mut flipped = h.clone();
        set(
            &mut flipped,
            "x-hub-signature-256",
            &flip_at(SIG, "sha256=".len()),
        );
        assert_eq!(
            verify(&v, &flipped, b"Hello, World!").unwrap_err(),
            MISMATCH
        );
    }

    #[test]
    fn subscription_answers_the_challenge_only_for_the_right_token() {
        let q = |s: &str| super::subscribe(Some(s), b"my-verify-token");
        assert_eq!(
            q("hub.mode=subscribe&hub.verify_token=my-verify-token&hub.challenge=1158201444"),
            Subscription::Challenge("1158201444".into())
        );
        assert_eq!(
            q("hub.mode=subscribe&hub.verify_token=my-verify-tokeN&hub.challenge=1"),
            Subscription::BadToken
        );
        assert_eq!(
            q("hub.mode=subscribe&hub.challenge=1"),
            Subscription::BadToken
        );
        assert_eq!(
            q("hub.mode=unsubscribe&hub.verify_token=my-verify-token&hub.challenge=1"),
            Subscription::Malformed
        );
        assert_eq!(
            q("hub.mode=subscribe&hub.verify_token=my-verify-token"),
            Subscription::Malformed
        );
        assert_eq!(
            q(
                "hub.mode=subscribe&hub.mode=subscribe&hub.verify_token=my-verify-token&hub.challenge=1"
            ),
            Subscription::Malformed
        );
        assert_eq!(super::subscribe(None, b"t"), Subscription::Malformed);
    }
}
