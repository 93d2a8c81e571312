//! What a worker needs to catch one integration up with its provider's API, compiled once with
//! the route: the provider, the endpoint, the credential (never printed) and the timing.

use super::Source;
use crate::crd::validate::{self, FieldError};
use crate::crd::{CatchUpProvider, WebhookIntegrationSpec, defaults};
use std::fmt;
use std::time::Duration;

/// The API credential. Its `Debug` never shows it, so no log line or error can carry it.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(String);

impl Credential {
    pub fn new(value: String) -> Self {
        Self(value)
    }
    /// The value, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// `text` with every occurrence of the credential replaced: provider error messages are
    /// shown in status and logs, and some providers echo (part of) the key they refused.
    pub fn scrub(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_string();
        }
        text.replace(&self.0, "[redacted]")
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential([redacted])")
    }
}

/// A repository webhook (GitHub).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubHook {
    pub owner: String,
    pub repo: String,
    pub hook_id: u64,
}

#[derive(Debug, Clone)]
pub struct CatchUpTarget {
    /// `namespace/name`
    pub integration: String,
    pub provider: CatchUpProvider,
    /// The scheme's name as the receiver stores it (`stripe`, `paddle`, `github`).
    pub scheme: &'static str,
    /// Base URL without a trailing slash.
    pub api_base_url: String,
    pub credential: Credential,
    /// `secret/key` of the credential, recorded with every event caught up (never the value).
    pub credential_name: String,
    pub interval: Duration,
    pub lookback: Duration,
    pub github: Option<GithubHook>,
    /// The route's own event id and type sources, applied to each listed event's JSON.
    pub event_id: Source,
    pub event_type: Source,
    /// `spec.events.allow`: a caught-up event of another type is stored `ignored`, as a webhook is.
    pub allow: super::EventFilter,
    /// `spec.events.versionPointer`: a caught-up event of another version is stored dead-lettered,
    /// as a webhook is.
    pub versions: Option<super::Versions>,
}

impl CatchUpTarget {
    /// Whether `event_type` passes `events.allow` (the receiver's rule).
    pub fn allows(&self, event_type: Option<&str>) -> bool {
        self.allow.allows(event_type)
    }
}

/// Compiles `spec.catchUp` of a validated spec; `None` without it. `credential` is the value of
/// `spec.catchUp.credentialRef`, read by the caller like every other Secret value.
pub fn compile(
    spec: &WebhookIntegrationSpec,
    integration: &str,
    scheme: &'static str,
    credential: Option<&[u8]>,
    event_id: &Source,
    event_type: &Source,
) -> Result<Option<CatchUpTarget>, FieldError> {
    let Some(c) = &spec.catch_up else {
        return Ok(None);
    };
    let field = "spec.catchUp.credentialRef";
    let credential = credential.ok_or_else(|| FieldError::new(field, "no value"))?;
    let credential = std::str::from_utf8(credential)
        .ok()
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| {
            FieldError::new(
                field,
                "the credential must be non-empty printable ASCII without spaces",
            )
        })?;
    let api_base_url = match &c.api_base_url {
        Some(u) => validate::api_base_url("spec.catchUp.apiBaseUrl", u)?
            .as_str()
            .trim_end_matches('/')
            .to_string(),
        None => defaults::catch_up_api(c.provider).to_string(),
    };
    let duration = |field: &str, v: &Option<String>, d: Duration| match v {
        Some(v) => validate::duration(field, v),
        None => Ok(d),
    };
    let github = c.github.as_ref().map(|g| {
        let (owner, repo) = g.repository.split_once('/').unwrap_or_default();
        GithubHook {
            owner: owner.to_string(),
            repo: repo.to_string(),
            hook_id: g.hook_id,
        }
    });
    Ok(Some(CatchUpTarget {
        integration: integration.to_string(),
        provider: c.provider,
        scheme,
        api_base_url,
        credential: Credential::new(credential.to_string()),
        credential_name: format!("{}/{}", c.credential_ref.name, c.credential_ref.key),
        interval: duration(
            "spec.catchUp.interval",
            &c.interval,
            defaults::CATCH_UP_INTERVAL,
        )?,
        lookback: duration(
            "spec.catchUp.lookback",
            &c.lookback,
            defaults::CATCH_UP_LOOKBACK,
        )?,
        github,
        event_id: event_id.clone(),
        event_type: event_type.clone(),
        allow: super::EventFilter::of(spec),
        versions: super::Versions::of(spec),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_never_prints_and_is_scrubbed_from_messages() {
        let c = Credential::new("sk_test_abcdef123456".into());
        assert_eq!(format!("{c:?}"), "Credential([redacted])");
        assert_eq!(
            c.scrub("Invalid API Key provided: sk_test_abcdef123456."),
            "Invalid API Key provided: [redacted]."
        );
    }
}
