//! The HTTP contract: every answer the receiver gives, with its status and JSON body.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Every outcome of one webhook request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Accepted,
    Duplicate,
    Ignored,
    TimestampOutsideWindow,
    Malformed,
    InvalidSignature,
    UnknownRoute,
    MethodNotAllowed,
    BodyTooLarge,
    RequestTimeout,
    RateLimited {
        retry_after_secs: u64,
    },
    InboxUnavailable,
    /// The listener's connection or in-flight cap is reached.
    Overloaded,
    /// Meta's subscription check carried the wrong verify token.
    InvalidVerifyToken,
    /// The client address is outside the route's `spec.sourceRanges`.
    SourceNotAllowed,
    /// The route has `spec.sourceRanges`, but the client address could not be worked out
    /// (`X-Forwarded-For` shorter than `--trusted-proxies`, or its client entry not an address).
    ClientAddressUnknown,
}

impl Reply {
    /// Short label for metrics and logs.
    pub fn outcome(&self) -> &'static str {
        match self {
            Reply::Accepted => "accepted",
            Reply::Duplicate => "duplicate",
            Reply::Ignored => "ignored",
            Reply::TimestampOutsideWindow => "timestamp_outside_window",
            Reply::Malformed => "malformed_request",
            Reply::InvalidSignature => "invalid_signature",
            Reply::UnknownRoute => "unknown_route",
            Reply::MethodNotAllowed => "method_not_allowed",
            Reply::BodyTooLarge => "body_too_large",
            Reply::RequestTimeout => "request_timeout",
            Reply::RateLimited { .. } => "rate_limited",
            Reply::InboxUnavailable => "inbox_unavailable",
            Reply::Overloaded => "overloaded",
            Reply::InvalidVerifyToken => "invalid_verify_token",
            Reply::SourceNotAllowed => "source_not_allowed",
            Reply::ClientAddressUnknown => "client_address_unknown",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Reply::Accepted | Reply::Duplicate | Reply::Ignored => StatusCode::OK,
            Reply::TimestampOutsideWindow | Reply::Malformed => StatusCode::BAD_REQUEST,
            Reply::InvalidSignature => StatusCode::UNAUTHORIZED,
            Reply::InvalidVerifyToken | Reply::SourceNotAllowed | Reply::ClientAddressUnknown => {
                StatusCode::FORBIDDEN
            }
            Reply::UnknownRoute => StatusCode::NOT_FOUND,
            Reply::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Reply::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Reply::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Reply::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Reply::InboxUnavailable | Reply::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Seconds a client should wait after a 503 before retrying.
const INBOX_RETRY_AFTER: u64 = 5;
/// An overload passes as soon as a slot frees: retry soon.
const OVERLOADED_RETRY_AFTER: u64 = 1;

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let body = match self {
            Reply::Accepted => json!({"received": true, "duplicate": false}),
            Reply::Duplicate => json!({"received": true, "duplicate": true}),
            Reply::Ignored => json!({"received": true, "ignored": "event_type"}),
            other => json!({"error": other.outcome()}),
        };
        let mut res = (self.status(), axum::Json(body)).into_response();
        let retry_after = match self {
            Reply::RateLimited { retry_after_secs } => Some(retry_after_secs.max(1)),
            Reply::InboxUnavailable => Some(INBOX_RETRY_AFTER),
            Reply::Overloaded => Some(OVERLOADED_RETRY_AFTER),
            _ => None,
        };
        if let Some(secs) = retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self == Reply::MethodNotAllowed {
            res.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        res
    }
}
