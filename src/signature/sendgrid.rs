//! SendGrid (Twilio SendGrid signed event webhook): `X-Twilio-Email-Event-Webhook-Signature` is
//! base64 of a DER ECDSA P-256/SHA-256 signature over `{X-Twilio-Email-Event-Webhook-Timestamp}`
//! followed by the raw body; the key is the base64 DER public key SendGrid shows. The body is an
//! array of events, so the event id is the signature's digest.

use super::{
    Candidate, Encoding, Envelope, Rejection, SignInput, SigningKey, signature_header,
    unix_seconds_header,
};
use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

pub const SIGNATURE: &str = "x-twilio-email-event-webhook-signature";
pub const TIMESTAMP: &str = "x-twilio-email-event-webhook-timestamp";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let (ts, timestamp) = unix_seconds_header(headers, TIMESTAMP)?;
    let candidates = match signature_header(headers, SIGNATURE, "", Encoding::Base64)? {
        None => Vec::new(),
        Some(der) => {
            // Decodes but is not a DER ECDSA signature: it cannot be valid, so 401 like any other.
            let sig = p256::ecdsa::Signature::from_der(&der)
                .map_err(|_| Rejection::InvalidSignature("bad_signature_length"))?;
            vec![Candidate::EcdsaP256(sig)]
        }
    };
    let mut env = Envelope::signed(ts.as_bytes().to_vec(), candidates);
    env.timestamp = Some(timestamp);
    Ok(env)
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    use p256::ecdsa::signature::Signer;
    let SigningKey::EcdsaP256(private) = key else {
        return Err("sendgrid needs an ECDSA P-256 private key (--signing-key-file)".into());
    };
    let ts = input.timestamp.to_string();
    let message = [ts.as_bytes(), input.body].concat();
    let sig: p256::ecdsa::Signature = private.sign(&message);
    Ok(vec![
        (SIGNATURE.into(), STANDARD.encode(sig.to_der().as_bytes())),
        (TIMESTAMP.into(), ts),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Scheme, SigningKey, Verifier};
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;

    fn private(seed: u8) -> p256::ecdsa::SigningKey {
        p256::ecdsa::SigningKey::from_slice(&[seed; 32]).expect("scalar in range")
    }

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Sendgrid,
            signer: SigningKey::EcdsaP256(private(5)),
            key: KeyMaterial::EcdsaP256(*private(5).verifying_key()),
            wrong: KeyMaterial::EcdsaP256(*private(6).verifying_key()),
            signature_header: "x-twilio-email-event-webhook-signature",
            // Byte 10 of the DER is inside r: still DER, another signature.
            corrupt: |v| {
                let mut der = STANDARD.decode(v).unwrap();
                der[10] ^= 1;
                STANDARD.encode(der)
            },
            retime: Some(|h| set(h, "x-twilio-email-event-webhook-timestamp", "1700000001")),
        });
    }

    #[test]
    fn a_high_s_copy_of_a_signature_has_the_same_nonce() {
        let body = br#"[{"event":"delivered"}]"#;
        let signed = super::sign(&SigningKey::EcdsaP256(private(5)), &input(body)).unwrap();
        let h = headers(signed);
        let v = Verifier::new(
            Scheme::Sendgrid,
            vec![key(
                KEY_ID,
                KeyMaterial::EcdsaP256(*private(5).verifying_key()),
                None,
            )],
        );
        let first = verify(&v, &h, body).unwrap();
        let sig = p256::ecdsa::Signature::from_der(
            &STANDARD
                .decode(
                    h["x-twilio-email-event-webhook-signature"]
                        .to_str()
                        .unwrap(),
                )
                .unwrap(),
        )
        .unwrap();
        let (r, s) = sig.split_scalars();
        let flipped = p256::ecdsa::Signature::from_scalars(r, -*s).unwrap();
        let mut h2 = h.clone();
        set(
            &mut h2,
            "x-twilio-email-event-webhook-signature",
            &STANDARD.encode(flipped.to_der().as_bytes()),
        );
        let second = verify(&v, &h2, body).expect("the flipped form verifies too");
        assert_eq!(first.signature_digest(), second.signature_digest());
    }

    /// The vector pinned by SendGrid's SDK (sendgrid/sendgrid-python,
    /// test/unit/test_eventwebhook.py, for `EventWebhook.verify_signature`): the verification key
    /// as SendGrid shows it, a `dropped` event serialised compactly with sorted keys and the
    /// trailing CRLF SendGrid sends, its timestamp and signature.
    #[test]
    fn sendgrid_sdk_published_vector() {
        const PUBLIC_KEY: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==";
        const SIG: &str = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM=";
        // The SDK's test_verify_bad_signature: a well-formed signature of something else.
        const OTHER_SIG: &str = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH3j/0=";
        const BODY: &[u8] = b"[{\"email\":\"hello@world.com\",\"event\":\"dropped\",\"reason\":\"Bounced Address\",\
            \"sg_event_id\":\"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA\",\
            \"sg_message_id\":\"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0\",\
            \"smtp-id\":\"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>\",\"timestamp\":1600112492}]\r\n";
        let material = Scheme::Sendgrid.parse_key(PUBLIC_KEY.as_bytes()).unwrap();
        let v = Verifier::new(Scheme::Sendgrid, vec![key(KEY_ID, material, None)]);
        let h = headers([
            ("X-Twilio-Email-Event-Webhook-Signature", SIG),
            ("X-Twilio-Email-Event-Webhook-Timestamp", "1600112502"),
        ]);
        let ok = verify(&v, &h, BODY).expect("SendGrid's own example verifies");
        assert_eq!(ok.timestamp(), Some(1_600_112_502));

        let mut body = BODY.to_vec();
        *body.last_mut().unwrap() = b' ';
        assert_eq!(verify(&v, &h, &body).unwrap_err(), MISMATCH, "the final LF");
        let mut retimed = h.clone();
        set(
            &mut retimed,
            "x-twilio-email-event-webhook-timestamp",
            "1600112503",
        );
        assert_eq!(verify(&v, &retimed, BODY).unwrap_err(), MISMATCH);
        let mut other = h.clone();
        set(
            &mut other,
            "x-twilio-email-event-webhook-signature",
            OTHER_SIG,
        );
        assert_eq!(verify(&v, &other, BODY).unwrap_err(), MISMATCH);
    }
}
