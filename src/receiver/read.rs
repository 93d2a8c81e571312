//! Reading a request's parts: the body within the route's size and time limits, a value from
//! where the route says it is (a header, the JSON body, a form field, the signature), and the
//! headers kept with the event.

use crate::http::reply::Reply;
use crate::inbox::StoredHeaders;
use crate::route::Source;
use crate::route::json_pointers::Fields;
use crate::signature::Verified;
use axum::body::Body;
use axum::http::HeaderMap;

pub(super) async fn read_body(
    body: Body,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<axum::body::Bytes, Reply> {
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(Reply::RequestTimeout),
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            Err(if too_large {
                Reply::BodyTooLarge
            } else {
                Reply::Malformed
            })
        }
    }
}

/// What a value is read from, after verification.
pub(super) struct Read<'a> {
    pub headers: &'a HeaderMap,
    pub json: Option<&'a Fields<'a>>,
    pub body: &'a [u8],
    pub verified: &'a Verified,
}

impl Read<'_> {
    /// Strings are taken as they are, numbers in decimal.
    pub(super) fn value(&self, source: &Source) -> Option<String> {
        match source {
            Source::Headers(names) => names
                .iter()
                .find_map(|n| self.headers.get(n.as_str()))
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            Source::Pointer(p) => self.json?.at(p)?.text(),
            Source::Form(name) => form_urlencoded::parse(self.body)
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.into_owned()),
            Source::SignatureDigest => Some(const_hex::encode(self.verified.signature_digest())),
            Source::FirstOf(all) => all.iter().find_map(|s| self.value(s)),
        }
    }
}

/// Request headers kept with the event, minus signatures and credentials: a database reader
/// should not be able to lift a valid signature or a token from the inbox.
pub(super) fn stored_headers(headers: &HeaderMap, signature_headers: &[&str]) -> StoredHeaders {
    StoredHeaders::of(
        headers
            .iter()
            .filter(|(name, _)| {
                let n = name.as_str();
                !crate::redact::NEVER_STORED_HEADERS.contains(&n) && !signature_headers.contains(&n)
            })
            .map(|(name, value)| (name.as_str(), String::from_utf8_lossy(value.as_bytes()))),
    )
}
