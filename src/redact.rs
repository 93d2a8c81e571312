//! What never leaves in clear: credentials in URLs and request headers. One place, so that a log
//! line, an error message, the inbox and a delivery all apply the same rule.

/// Request headers the inbox never stores, so that no database reader can lift a credential
/// from it and no delivery can forward one.
pub const NEVER_STORED_HEADERS: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

/// `postgres://user:pass@host/db` -> `postgres://user:***@host/db`, for error messages.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Only `scheme://host:port` of a URL, for logs: paths and queries often carry tokens.
pub fn url_origin(url: &str) -> String {
    reqwest::Url::parse(url)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_else(|_| "<invalid url>".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_a_url_is_masked() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db:5432/hooks"),
            "postgres://app:***@db:5432/hooks"
        );
        assert_eq!(redact_url("sqlite://x.db"), "sqlite://x.db");
    }

    #[test]
    fn an_origin_drops_credentials_path_and_query() {
        assert_eq!(
            url_origin("https://u:p@example.com:8443/hook?token=abc"),
            "https://example.com:8443"
        );
        assert_eq!(url_origin("not a url"), "<invalid url>");
    }
}
