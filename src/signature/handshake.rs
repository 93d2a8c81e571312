//! Endpoint handshakes: the requests a provider sends to check an endpoint before (or while) it
//! delivers events. Each scheme recognises its own after the signature verified; the answer is
//! data here and becomes a response in the receiver. A handshake is never stored or delivered.

/// The answer a provider expects to its handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// 200 `application/json` with this body.
    Json(String),
    /// 200 `text/plain` with this body.
    Text(String),
    /// 204, no body.
    NoContent,
}

impl Handshake {
    /// Short label for the metric and the log line.
    pub fn kind(&self) -> &'static str {
        match self {
            Handshake::Json(_) => "json",
            Handshake::Text(_) => "text",
            Handshake::NoContent => "no_content",
        }
    }
}

/// The outcome of an unsigned subscription check (Meta's `GET ?hub.mode=subscribe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    /// 200 `text/plain` with the challenge.
    Challenge(String),
    /// 403 `invalid_verify_token`.
    BadToken,
    /// 400: not a subscription request (no `hub.mode=subscribe` or no challenge).
    Malformed,
}
