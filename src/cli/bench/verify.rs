//! Verification cost: hookgate's whole `Verifier::verify` (header parsing, key selection,
//! constant-time compare, signature digest) against the bare primitive on the same bytes. For
//! HMAC, the keyed HMAC alone is timed in the same rounds, to show how much of the target the
//! primitive itself takes.

use super::rounds::{alternate, alternate_all, median_ratio};
use super::stats::Run;
use crate::signature::{Scheme, SignInput, SigningKey, Unverified, Verifier};
use anyhow::Context;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use base64::Engine;
use sha2::Digest;
use std::hint::black_box;

pub struct Case {
    pub name: String,
    pub hookgate: Run,
    pub baseline_name: String,
    pub baseline: Run,
    pub ratio_name: String,
    pub target: f64,
    /// The primitive hookgate calls, alone, timed in the same rounds: how much of the target
    /// the primitive itself uses before any of hookgate's own work.
    pub floor: Option<Floor>,
}

pub struct Floor {
    pub name: String,
    pub run: Run,
    pub ratio_name: String,
}

impl Floor {
    /// The primitive alone over the case's baseline: the median of the rounds' ratios.
    pub fn ratio(&self, case: &Case) -> f64 {
        median_ratio(&self.run, &case.baseline)
    }
}

impl Case {
    /// hookgate over the baseline: the median of the rounds' ratios.
    pub fn ratio(&self) -> f64 {
        median_ratio(&self.hookgate, &self.baseline)
    }
}

/// The headers `scheme` puts on `body` signed with `key` at `now`.
fn signed(
    scheme: &Scheme,
    key: &SigningKey,
    body: &[u8],
    now: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<HeaderMap> {
    let input = SignInput {
        key_id: "v1",
        timestamp: now.timestamp(),
        event_id: "evt_1",
        event_type: None,
        body,
    };
    let mut h = HeaderMap::new();
    for (k, v) in scheme.sign(key, &input).map_err(anyhow::Error::msg)? {
        h.insert(HeaderName::try_from(k)?, HeaderValue::try_from(v)?);
    }
    Ok(h)
}

fn body(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| b"abcdefghijklmnopqrstuvwxyz{}:,\"0123456789"[i % 41])
        .collect()
}

fn stripe(len: usize, iters: usize) -> anyhow::Result<Case> {
    let secret = b"whsec_bench_only_0123456789abcdef".to_vec();
    let scheme = Scheme::Stripe;
    let key = scheme.parse_key(&secret).map_err(anyhow::Error::msg)?;
    let verifier = Verifier::new(
        scheme.clone(),
        vec![crate::signature::Key {
            id: "v1".into(),
            material: key,
            not_after: None,
        }],
    );
    let body = body(len);
    let now = chrono::Utc::now();
    let h = signed(&scheme, &SigningKey::Hmac(secret.clone()), &body, now)?;
    let req = Unverified {
        query: None,
        headers: &h,
        body: &body,
    };
    // What the verifier cannot do without: the HMAC over `{t}.{body}` from a state keyed once
    // (as a route build keys it), the outer block included, and nothing else.
    let keyed = <hmac::Hmac<sha2::Sha256> as hmac::KeyInit>::new_from_slice(&secret)?;
    let prefix = format!("{}.", now.timestamp());
    let mac_tag = || {
        let mut mac = black_box(&keyed).clone();
        hmac::Mac::update(&mut mac, prefix.as_bytes());
        hmac::Mac::update(&mut mac, black_box(&body[..]));
        hmac::Mac::finalize(mac).into_bytes()
    };
    // The floor must be the verifier's own computation: the tag it makes is the one signed.
    let header = h
        .get("stripe-signature")
        .context("the Stripe signer sets Stripe-Signature")?
        .to_str()?;
    anyhow::ensure!(
        header.ends_with(&format!("v1={}", const_hex::encode(mac_tag()))),
        "the HMAC timed alone is not the one the request was signed with"
    );
    let mut verify = || verifier.verify(black_box(req), now).is_ok();
    let mut hmac_alone = || {
        black_box(mac_tag());
        true
    };
    let mut raw_sha = || {
        black_box(sha2::Sha256::digest(black_box(&body[..])));
        true
    };
    let [ours, floor, raw] = alternate_all(iters, [&mut verify, &mut hmac_alone, &mut raw_sha]);
    let kib = len / 1024;
    Ok(Case {
        name: format!("verify HMAC-SHA256 (Stripe), {kib} KiB"),
        hookgate: ours,
        baseline_name: format!("raw SHA-256 of the same {kib} KiB"),
        baseline: raw,
        ratio_name: format!("HMAC verify / raw SHA-256, {kib} KiB"),
        target: 1.2,
        floor: Some(Floor {
            name: format!("HMAC-SHA256 alone, keyed once, {kib} KiB"),
            run: floor,
            ratio_name: format!("HMAC alone / raw SHA-256, {kib} KiB"),
        }),
    })
}

fn ed25519(len: usize, iters: usize) -> anyhow::Result<Case> {
    let private = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let public = private.verifying_key();
    let yaml = format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: k, namespace: bench}}
stringData:
  v1: {}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: partner, namespace: bench}}
spec:
  scheme: {{type: ed25519, signatureHeader: X-Signature, timestampHeader: X-Timestamp, signedPayload: "{{timestamp}}.{{body}}", encoding: base64}}
  keys: [{{id: v1, secretRef: {{name: k, key: v1}}}}]
  delivery: {{url: "http://127.0.0.1:1/"}}
"#,
        base64::engine::general_purpose::STANDARD.encode(public.to_bytes())
    );
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("ed25519.yaml");
    std::fs::write(&path, yaml)?;
    let table = crate::manifest::load(&[path])?.route_table()?;
    let route = table.iter().next().context("ed25519 route compiled")?;
    let body = body(len);
    let now = chrono::Utc::now();
    let signing = SigningKey::Ed25519(private.clone());
    let h = signed(route.verifier.scheme(), &signing, &body, now)?;
    let message = [format!("{}.", now.timestamp()).as_bytes(), &body[..]].concat();
    let sig = ed25519_dalek::Signer::sign(&private, &message);
    let req = Unverified {
        query: None,
        headers: &h,
        body: &body,
    };
    let (ours, raw) = alternate(
        iters,
        || route.verifier.verify(black_box(req), now).is_ok(),
        || public.verify_strict(black_box(&message), &sig).is_ok(),
    );
    Ok(Case {
        name: format!("verify Ed25519, {} KiB", len / 1024),
        hookgate: ours,
        baseline_name: "ed25519-dalek verify_strict, same message".into(),
        baseline: raw,
        ratio_name: "Ed25519 verify / ed25519-dalek".into(),
        target: 1.1,
        // The baseline is the primitive itself.
        floor: None,
    })
}

/// Sized so each case takes about a second in a release build; `divisor` shrinks them further.
pub fn run(divisor: usize) -> anyhow::Result<Vec<Case>> {
    let scale = divisor * if cfg!(debug_assertions) { 10 } else { 1 };
    let mut cases = vec![
        stripe(1024, (20_000 / scale).max(1))?,
        stripe(16 * 1024, (2_000 / scale).max(1))?,
        ed25519(1024, (1_000 / scale).max(1))?,
    ];
    // The receiver's other work on the request's bytes before it stores them.
    cases.extend(super::fields::run(scale));
    Ok(cases)
}
