//! Why a catch-up run failed. Messages never hold the credential: provider messages pass through
//! [`crate::route::catch_up::Credential::scrub`] before they become an error.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// 401: the credential is wrong, revoked or expired.
    #[error("the provider refused the credential (HTTP {status}): {message}")]
    Unauthorized { status: u16, message: String },
    /// 403 (not a rate limit): the credential lacks a permission.
    #[error("the credential lacks a permission (HTTP 403): {0}")]
    Forbidden(String),
    /// 429 or GitHub's rate-limit 403, still after the retries of this run.
    #[error("rate limited by the provider after {attempts} attempts")]
    RateLimited { attempts: u32 },
    /// 5xx after the retries of this run.
    #[error("the provider answered HTTP {status} after {attempts} attempts")]
    Unavailable { status: u16, attempts: u32 },
    /// Another 4xx: the request itself is wrong (a hook id that does not exist, a bad cursor).
    #[error("the provider refused the request (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
    /// No answer: DNS, connection, TLS, timeout.
    #[error("cannot reach the provider's API: {0}")]
    Network(String),
    /// An answer that is not the documented shape.
    #[error("unexpected answer from the provider: {0}")]
    BadResponse(String),
    /// The run took longer than it may.
    #[error("the run did not finish within {0:?}")]
    Timeout(std::time::Duration),
    #[error(transparent)]
    Inbox(#[from] InboxError),
}

/// The inbox's error, kept as text so that [`Error`] stays `Clone` and comparable in tests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{label}: {message}")]
pub struct InboxError {
    pub label: &'static str,
    pub message: String,
}

impl From<crate::inbox::Error> for Error {
    fn from(e: crate::inbox::Error) -> Self {
        Error::Inbox(InboxError {
            label: e.metric_label(),
            message: e.to_string(),
        })
    }
}

impl Error {
    /// Every value of [`Error::metric_label`], for series counted from zero.
    pub const METRIC_LABELS: [&'static str; 9] = [
        "unauthorized",
        "forbidden",
        "rate_limited",
        "provider_unavailable",
        "refused",
        "network",
        "bad_response",
        "timeout",
        "inbox",
    ];

    /// A fixed, snake_case name for logs, metrics and the status condition's reason.
    pub fn metric_label(&self) -> &'static str {
        let [
            unauthorized,
            forbidden,
            rate_limited,
            unavailable,
            refused,
            network,
            bad,
            timeout,
            inbox,
        ] = Self::METRIC_LABELS;
        match self {
            Error::Unauthorized { .. } => unauthorized,
            Error::Forbidden(_) => forbidden,
            Error::RateLimited { .. } => rate_limited,
            Error::Unavailable { .. } => unavailable,
            Error::Refused { .. } => refused,
            Error::Network(_) => network,
            Error::BadResponse(_) => bad,
            Error::Timeout(_) => timeout,
            Error::Inbox(_) => inbox,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_fixed_and_distinct() {
        let all = [
            Error::Unauthorized {
                status: 401,
                message: String::new(),
            },
            Error::Forbidden(String::new()),
            Error::RateLimited { attempts: 4 },
            Error::Unavailable {
                status: 503,
                attempts: 4,
            },
            Error::Refused {
                status: 404,
                message: String::new(),
            },
            Error::Network(String::new()),
            Error::BadResponse(String::new()),
            Error::Timeout(std::time::Duration::from_secs(1)),
            Error::from(crate::inbox::Error::Unavailable(String::new())),
        ];
        let mut labels: Vec<_> = all.iter().map(Error::metric_label).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), all.len());
    }
}
