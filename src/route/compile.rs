//! `compile`: one integration and its Secrets into a `CompiledRoute`, or the first field error.

use super::json_pointers::Pointers;
use super::{CompiledRoute, Secrets, Source, Versions};
use crate::crd::validate::{self, FieldError};
use crate::crd::{SchemeType, SignatureEncoding, WebhookIntegration, defaults};
use crate::signature::{Encoding, GenericScheme, Key, Scheme, Template, Verifier};
use governor::Quota;
use kube::ResourceExt;
use std::num::NonZeroU32;
use std::sync::Arc;

fn lower(h: &str) -> String {
    h.to_ascii_lowercase()
}

fn generic(spec: &crate::crd::SchemeSpec, default_encoding: Encoding) -> GenericScheme {
    let optional = |v: &Option<String>, d: &str| {
        let v = v.as_deref().unwrap_or(d);
        (!v.is_empty()).then(|| lower(v))
    };
    GenericScheme {
        signature_header: lower(
            spec.signature_header
                .as_deref()
                .unwrap_or(defaults::SIGNATURE_HEADER),
        ),
        timestamp_header: optional(&spec.timestamp_header, defaults::TIMESTAMP_HEADER),
        event_id_header: optional(&spec.event_id_header, defaults::EVENT_ID_HEADER),
        key_id_header: optional(&spec.key_id_header, defaults::KEY_ID_HEADER),
        template: Template::parse(
            spec.signed_payload
                .as_deref()
                .unwrap_or(defaults::SIGNED_PAYLOAD),
        )
        .expect("validated before compile"),
        encoding: match spec.encoding {
            Some(SignatureEncoding::Hex) => Encoding::Hex,
            Some(SignatureEncoding::Base64) => Encoding::Base64,
            None => default_encoding,
        },
        signature_prefix: spec.signature_prefix.clone().unwrap_or_default(),
    }
}

/// The verifier scheme an integration's spec describes (validated spec only).
pub fn scheme(spec: &crate::crd::SchemeSpec) -> Scheme {
    match spec.type_ {
        SchemeType::Stripe => Scheme::Stripe,
        SchemeType::Github => Scheme::Github,
        SchemeType::StandardWebhooks => Scheme::StandardWebhooks,
        SchemeType::Slack => Scheme::Slack,
        SchemeType::Shopify => Scheme::Shopify,
        SchemeType::HmacSha256 => Scheme::HmacSha256(generic(spec, Encoding::Hex)),
        SchemeType::Ed25519 => Scheme::Ed25519(generic(spec, Encoding::Base64)),
        SchemeType::Discord => Scheme::Discord,
        SchemeType::Twilio => Scheme::Twilio {
            public_url: spec.public_url.clone().unwrap_or_default(),
        },
        SchemeType::Twitch => Scheme::Twitch,
        SchemeType::Zoom => Scheme::Zoom,
        SchemeType::Meta => Scheme::Meta,
        SchemeType::Gitlab => Scheme::Gitlab,
        SchemeType::Paddle => Scheme::Paddle,
        SchemeType::Square => Scheme::Square {
            public_url: spec.public_url.clone().unwrap_or_default(),
        },
        SchemeType::Sendgrid => Scheme::Sendgrid,
        SchemeType::Linear => Scheme::Linear,
    }
}

/// A scheme's default sources: the first present wins.
fn defaulted(sources: Vec<defaults::DefaultSource>) -> Source {
    use defaults::DefaultSource as D;
    let mut all: Vec<Source> = sources
        .into_iter()
        .map(|d| match d {
            D::Header(h) => Source::Headers(vec![lower(&h)]),
            D::Pointer(p) => Source::Pointer(p.into()),
            D::Form(f) => Source::Form(f.into()),
            D::SignatureDigest => Source::SignatureDigest,
        })
        .collect();
    // Header names in a row are one lookup: the first present wins either way.
    if all.len() > 1 && all.iter().all(|s| matches!(s, Source::Headers(_))) {
        let names = all
            .into_iter()
            .flat_map(|s| match s {
                Source::Headers(n) => n,
                _ => unreachable!("all headers"),
            })
            .collect();
        return Source::Headers(names);
    }
    match all.len() {
        1 => all.remove(0),
        _ => Source::FirstOf(all),
    }
}

fn source(s: &crate::crd::FieldSource) -> Source {
    match (&s.header, &s.json_pointer) {
        (Some(h), _) => Source::Headers(vec![lower(h)]),
        (None, Some(p)) => Source::Pointer(p.clone()),
        (None, None) => unreachable!("validated: exactly one of header or jsonPointer"),
    }
}

/// One value of a referenced Secret; the error names `field` and never shows a value.
pub(super) fn secret_value<'s>(
    secrets: &'s Secrets,
    namespace: &str,
    field: &str,
    r: &crate::crd::SecretKeyRef,
) -> Result<&'s [u8], FieldError> {
    let data = secrets
        .get(&(namespace.to_string(), r.name.clone()))
        .ok_or_else(|| {
            FieldError::new(
                format!("{field}.name"),
                format!("Secret {namespace}/{} not found", r.name),
            )
        })?;
    data.get(&r.key).map(Vec::as_slice).ok_or_else(|| {
        FieldError::new(
            format!("{field}.key"),
            format!("Secret {namespace}/{} has no key {:?}", r.name, r.key),
        )
    })
}

/// Meta's verify token, trimmed like keys are. An empty one is refused: it would accept
/// `hub.verify_token=` from anyone.
fn verify_token(
    secrets: &Secrets,
    namespace: &str,
    r: &crate::crd::SecretKeyRef,
) -> Result<super::VerifyToken, FieldError> {
    const FIELD: &str = "spec.scheme.verifyTokenRef";
    let raw = secret_value(secrets, namespace, FIELD, r)?;
    let token = crate::signature::keys::trim_newline(raw);
    if token.is_empty() {
        return Err(FieldError::new(
            format!("{FIELD}.key"),
            format!("Secret {namespace}/{} key {:?} is empty", r.name, r.key),
        ));
    }
    Ok(super::VerifyToken(token.to_vec()))
}

/// Validates `wi` and compiles it with key material from `secrets`. Errors name the field.
pub fn compile(wi: &WebhookIntegration, secrets: &Secrets) -> Result<CompiledRoute, FieldError> {
    let spec = &wi.spec;
    validate::spec(spec)?;
    if spec.keys.is_empty() {
        // Only `rotation.generate` allows this, and then the controller adds the keys it owns.
        return Err(FieldError::new(
            "spec.keys",
            "no keys: with rotation.generate the controller adds them; hookgate standalone needs spec.keys",
        ));
    }
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let name = wi.name_any();
    let scheme = scheme(&spec.scheme);
    let generic_id_header = match &scheme {
        Scheme::HmacSha256(g) | Scheme::Ed25519(g) => g.event_id_header.clone(),
        _ => None,
    };

    let mut keys = Vec::with_capacity(spec.keys.len());
    for (i, k) in spec.keys.iter().enumerate() {
        let field = format!("spec.keys[{i}].secretRef");
        let raw = secret_value(secrets, &namespace, &field, &k.secret_ref)?;
        // The parse error describes the format problem; it never contains the key bytes.
        let material = scheme.parse_key(raw).map_err(|e| {
            FieldError::new(
                field.clone(),
                format!("key {:?} is unusable for {}: {e}", k.id, scheme.name()),
            )
        })?;
        keys.push(Key {
            id: k.id.clone(),
            material,
            not_after: k.retire_at,
        });
    }

    let event_id = match &spec.event_id {
        Some(s) => source(s),
        None => defaulted(defaults::event_id(
            spec.scheme.type_,
            generic_id_header.as_deref(),
        )),
    };
    let event_type = match &spec.event_type {
        Some(s) => source(s),
        None => defaulted(defaults::event_type(spec.scheme.type_)),
    };
    let verify_token = match &spec.scheme.verify_token_ref {
        Some(r) => Some(verify_token(secrets, &namespace, r)?),
        None => None,
    };
    let integration = format!("{namespace}/{name}");
    let delivery = crate::route::target::compile(
        spec,
        &namespace,
        &integration,
        secrets,
        &scheme.signature_headers(),
    )?;
    let credential = match &spec.catch_up {
        Some(c) => Some(secret_value(
            secrets,
            &namespace,
            "spec.catchUp.credentialRef",
            &c.credential_ref,
        )?),
        None => None,
    };
    let catch_up = super::catch_up::compile(
        spec,
        &integration,
        scheme.name(),
        credential,
        &event_id,
        &event_type,
    )?;
    let replay = spec.replay.clone().unwrap_or_default();
    let tolerance = match &replay.tolerance {
        Some(t) => validate::duration("spec.replay.tolerance", t)?,
        None => defaults::tolerance(spec.scheme.type_),
    };
    let nonce_retention = match &replay.nonce_retention {
        Some(t) => validate::duration("spec.replay.nonceRetention", t)?,
        None => defaults::NONCE_RETENTION,
    };
    let limits = spec.limits.clone().unwrap_or_default();
    let rate = limits
        .requests_per_second
        .and_then(NonZeroU32::new)
        .map(|rps| {
            let burst = limits.burst.and_then(NonZeroU32::new).unwrap_or(rps);
            Quota::per_second(rps).allow_burst(burst)
        });
    let versions = super::Versions::of(spec);
    let json = json_pointers(&event_id, &event_type, versions.as_ref());
    Ok(CompiledRoute {
        integration,
        path: spec
            .path
            .clone()
            .unwrap_or_else(|| defaults::path(&namespace, &name)),
        verifier: Verifier::new(scheme, keys),
        verify_token,
        event_id,
        event_type,
        tolerance,
        nonce_retention,
        allow: super::EventFilter::of(spec),
        versions,
        json,
        max_body_bytes: limits.max_body_bytes.unwrap_or(defaults::MAX_BODY_BYTES) as usize,
        rate,
        delivery: Arc::new(delivery),
        source_ranges: super::SourceRanges::new(validate::source_ranges(&spec.source_ranges)?),
        catch_up: catch_up.map(Arc::new),
    })
}

/// Every pointer the route reads from a JSON body, so that one pass over the body finds them all.
fn json_pointers(event_id: &Source, event_type: &Source, versions: Option<&Versions>) -> Pointers {
    let mut pointers = Vec::new();
    event_id.pointers(&mut pointers);
    event_type.pointers(&mut pointers);
    pointers.extend(versions.map(|v| v.pointer.as_str()));
    Pointers::new(pointers)
}
