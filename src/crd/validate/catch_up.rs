//! Checks of `spec.catchUp`, which only the workers read.

use super::*;
use crate::crd::{CatchUpProvider, defaults};

/// The scheme a catch-up provider belongs to: catch-up stores events under the same dedupe key
/// as the webhook would, which only the provider's own scheme defines.
fn scheme_of(p: CatchUpProvider) -> SchemeType {
    match p {
        CatchUpProvider::Stripe => SchemeType::Stripe,
        CatchUpProvider::Github => SchemeType::Github,
        CatchUpProvider::Paddle => SchemeType::Paddle,
    }
}

/// Whether `url` may carry the API credential: TLS, or plain HTTP that never leaves the host
/// (a local stand-in such as stripe-mock). Anything else would send the key in clear.
pub fn api_base_url(field: &str, url: &str) -> Result<reqwest::Url, FieldError> {
    let u = reqwest::Url::parse(url)
        .map_err(|_| FieldError::new(field, "must be an absolute http(s) URL"))?;
    let host = u.host_str().unwrap_or_default();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let ok = match u.scheme() {
        "https" => u.host().is_some(),
        "http" => loopback,
        _ => false,
    };
    if !ok {
        return Err(FieldError::new(
            field,
            "must be https://…, or http:// to a loopback host (127.0.0.1, ::1, localhost): the credential is never sent in clear",
        ));
    }
    if !u.username().is_empty() || u.password().is_some() || u.query().is_some() {
        return Err(FieldError::new(
            field,
            "must carry no user, password or query; the credential comes from credentialRef",
        ));
    }
    Ok(u)
}

pub(super) fn catch_up(spec: &WebhookIntegrationSpec) -> Result<(), FieldError> {
    let Some(c) = &spec.catch_up else {
        return Ok(());
    };
    if scheme_of(c.provider) != spec.scheme.type_ {
        return Err(FieldError::new(
            "spec.catchUp.provider",
            "must be the integration's own scheme.type (stripe, github or paddle)",
        ));
    }
    if c.credential_ref.name.is_empty() || c.credential_ref.key.is_empty() {
        return Err(FieldError::new(
            "spec.catchUp.credentialRef",
            "name and key are required",
        ));
    }
    if let Some(i) = &c.interval {
        let d = duration("spec.catchUp.interval", i)?;
        if d < defaults::CATCH_UP_MIN_INTERVAL {
            return Err(FieldError::new(
                "spec.catchUp.interval",
                "must be at least 1m: providers rate-limit their APIs",
            ));
        }
    }
    let lookback = match &c.lookback {
        Some(l) => duration("spec.catchUp.lookback", l)?,
        None => defaults::CATCH_UP_LOOKBACK,
    };
    // An event pruned from the inbox (and so its dedupe key) but still listed by the provider
    // would be caught up again as new, and delivered twice.
    let dedupe = match spec.retention.as_ref().and_then(|r| r.dedupe.as_ref()) {
        Some(d) => duration("spec.retention.dedupe", d)?,
        None => defaults::RETENTION_DEDUPE,
    };
    if lookback > dedupe {
        return Err(FieldError::new(
            "spec.catchUp.lookback",
            format!(
                "must not exceed retention.dedupe ({}): events pruned from the inbox would be caught up again and delivered twice",
                limits::written(dedupe)
            ),
        ));
    }
    if let Some(u) = &c.api_base_url {
        api_base_url("spec.catchUp.apiBaseUrl", u)?;
    }
    // The id catch-up stores must be the one the receiver reads from the webhook.
    match (c.provider, &spec.event_id) {
        (CatchUpProvider::Github, Some(_)) => {
            return Err(FieldError::new(
                "spec.eventId",
                "with catchUp provider github, leave eventId unset: deliveries are matched by X-GitHub-Delivery",
            ));
        }
        (_, Some(s)) if s.json_pointer.is_none() => {
            return Err(FieldError::new(
                "spec.eventId",
                "with catchUp, the event id must come from the body (jsonPointer): an event listed by the API has no webhook headers",
            ));
        }
        _ => {}
    }
    match (c.provider, &c.github) {
        (CatchUpProvider::Github, None) => Err(FieldError::new(
            "spec.catchUp.github",
            "required for provider github: repository and hookId",
        )),
        (CatchUpProvider::Github, Some(g)) => {
            let parts: Vec<&str> = g.repository.split('/').collect();
            let valid = parts.len() == 2
                && parts.iter().all(|p| {
                    !p.is_empty()
                        && p.len() <= 100
                        && p.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
                });
            if !valid {
                return Err(FieldError::new(
                    "spec.catchUp.github.repository",
                    "must be owner/repo",
                ));
            }
            if g.hook_id == 0 || g.hook_id > i64::MAX as u64 {
                return Err(FieldError::new(
                    "spec.catchUp.github.hookId",
                    "must be a positive webhook id",
                ));
            }
            Ok(())
        }
        (_, Some(_)) => Err(FieldError::new(
            "spec.catchUp.github",
            "applies only to provider github",
        )),
        (_, None) => Ok(()),
    }
}
