//! GitLab: `X-Gitlab-Token` carries the webhook's secret token itself. It proves the sender knows
//! the token, not that the body is GitLab's: there is no signature over the body and no signed
//! timestamp. Replay protection is the event UUID (`X-Gitlab-Event-UUID`), the dedupe key.

use super::{Candidate, Envelope, Rejection, SignInput, SigningKey, header_str, hmac_secret};
use axum::http::HeaderMap;

pub const TOKEN: &str = "x-gitlab-token";
pub const EVENT_UUID: &str = "x-gitlab-event-uuid";
pub const EVENT: &str = "x-gitlab-event";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let candidates = match header_str(headers, TOKEN)? {
        None => Vec::new(),
        Some(v) => vec![Candidate::Token(v.as_bytes().to_vec())],
    };
    let uuid = header_str(headers, EVENT_UUID)?.ok_or(Rejection::Malformed("missing_event_id"))?;
    let mut env = Envelope::signed(Vec::new(), candidates);
    // Vouched for by the token alone; what matters is that it is the nonce, not a digest of the
    // token (which is the same on every request).
    env.signed_id = Some(uuid.to_string());
    Ok(env)
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "gitlab")?;
    let token = std::str::from_utf8(secret).map_err(|_| "a GitLab token is text")?;
    let mut out = vec![
        (TOKEN.into(), token.to_string()),
        (EVENT_UUID.into(), input.event_id.into()),
    ];
    if let Some(t) = input.event_type {
        out.push((EVENT.into(), t.into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Rejection, Scheme, SigningKey, Verifier};

    fn verifier() -> Verifier {
        Verifier::new(
            Scheme::Gitlab,
            vec![key(KEY_ID, KeyMaterial::Hmac(b"glt-right".to_vec()), None)],
        )
    }

    #[test]
    fn the_token_is_compared_and_the_uuid_is_the_nonce() {
        let body = br#"{"object_kind":"push"}"#;
        let h =
            headers(super::sign(&SigningKey::Hmac(b"glt-right".to_vec()), &input(body)).unwrap());
        let ok = verify(&verifier(), &h, body).unwrap();
        assert_eq!(ok.signed_id(), Some("evt_1"));
        let mut other = h.clone();
        set(&mut other, "x-gitlab-event-uuid", "evt_2");
        let ok2 = verify(&verifier(), &other, body).unwrap();
        assert_ne!(
            ok.signature_digest(),
            ok2.signature_digest(),
            "nonce follows the uuid"
        );
        for bad in ["glt-righT", "glt-righ", "glt-right2", ""] {
            let mut h = h.clone();
            set(&mut h, "x-gitlab-token", bad);
            assert_eq!(
                verify(&verifier(), &h, body).unwrap_err(),
                MISMATCH,
                "{bad:?}"
            );
        }
        let mut no_uuid = h.clone();
        no_uuid.remove("x-gitlab-event-uuid");
        assert_eq!(
            verify(&verifier(), &no_uuid, body).unwrap_err(),
            Rejection::Malformed("missing_event_id")
        );
    }
}
