//! No spec value can panic a role: seeded random and boundary values (zero, the documented
//! maxima, `Duration::MAX`, chrono's first and last instants) through the manifest compiler and
//! every time computation: retries, attempt limits, orphans, nonce expiry, key phases, generated
//! key schedules and the janitor's cut-offs. Each case must return, whatever it returns.

use chrono::{DateTime, Utc};
use hookgate::controller::{generated, phases};
use hookgate::crd::{KeySpec, KeyStatus, SecretKeyRef, limits};
use hookgate::worker::retry;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;
use std::time::Duration;

fn durations(rng: &mut StdRng) -> Vec<Duration> {
    let mut d = vec![
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::MAX,
        Duration::from_secs(u64::MAX / 2),
        Duration::from_secs(i64::MAX as u64),
    ];
    d.extend(limits::DURATIONS.iter().map(|(_, max)| *max));
    d.extend((0..8).map(|_| Duration::from_millis(rng.random())));
    d
}

fn instants(rng: &mut StdRng) -> Vec<DateTime<Utc>> {
    let mut t = vec![
        DateTime::<Utc>::MIN_UTC,
        DateTime::<Utc>::MAX_UTC,
        DateTime::UNIX_EPOCH,
        Utc::now(),
    ];
    let (lo, hi) = (
        DateTime::<Utc>::MIN_UTC.timestamp(),
        DateTime::<Utc>::MAX_UTC.timestamp(),
    );
    t.extend((0..8).map(|_| DateTime::from_timestamp(rng.random_range(lo..=hi), 0).unwrap()));
    t
}

#[test]
fn time_computations_saturate_for_any_duration_and_instant() {
    let mut rng = StdRng::seed_from_u64(12);
    let (ds, ts) = (durations(&mut rng), instants(&mut rng));
    for &t in &ts {
        for &d in &ds {
            let later = hookgate::time::after(t, d);
            let earlier = hookgate::time::before(t, d);
            assert!(earlier <= t && t <= later);
            for &u in &ts {
                let _ = retry::orphaned(t, u, d);
            }
        }
    }
    for &d in &ds {
        for &lease in &ds {
            assert!(retry::attempt_timeout(d, lease) <= d);
        }
        for attempt in [0, 1, 2, 31, 32, 33, u32::MAX] {
            for jitter in [-1.0, 0.0, 1.0, f64::MAX, f64::NAN] {
                let _ = retry::retry_delay(attempt, &[d, Duration::MAX, d], jitter);
            }
        }
    }
}

fn key(id: &str, retire_at: Option<DateTime<Utc>>) -> KeySpec {
    KeySpec {
        id: id.into(),
        secret_ref: SecretKeyRef {
            name: "k".into(),
            key: id.into(),
        },
        retire_at,
    }
}

#[test]
fn key_phases_and_generated_schedules_survive_extreme_times() {
    let mut rng = StdRng::seed_from_u64(34);
    let (ds, ts) = (durations(&mut rng), instants(&mut rng));
    for &now in &ts {
        for &retire in &ts {
            let keys = [key("a", Some(retire)), key("b", None)];
            let previous = [KeyStatus {
                id: "a".into(),
                phase: "Retiring".into(),
                since: Some(retire.to_rfc3339()),
                retire_at: Some("not a time".into()),
                last_used_at: None,
            }];
            let used = HashMap::from([("b".to_string(), retire)]);
            for &d in ds.iter().step_by(3) {
                let _ = phases::plan_keys(&keys, &previous, &used, d, d, now);
            }
        }
        for ids in [
            vec![generated::key_id(now)],
            vec!["g-99991231-235959".into(), "g-00000101-000000".into()],
            vec!["g-garbage".into()],
        ] {
            let owned = generated::Owned::new(ids, None);
            for &every in &ds {
                let _ = generated::due(&owned, Some("again"), Some(every), now);
                let _ = generated::next_scheduled(&owned, Some(every));
            }
        }
    }
}

#[test]
fn the_compiler_refuses_or_accepts_every_extreme_spec_without_panicking() {
    let values = [
        "1ms",
        "1d",
        "30d",
        "3650d",
        "3651d",
        "99999999999999999999d",
        "18446744073709551615ms",
        "9223372036854775807s",
        "1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d",
    ];
    let mut refused = 0;
    for v in values {
        for field in [
            format!("replay: {{tolerance: {v}, nonceRetention: {v}}}"),
            format!("retention: {{payload: {v}, dedupe: {v}}}"),
            format!("rotation: {{overlap: {v}, keepRetired: {v}}}"),
            format!("delivery: {{url: 'http://x', timeout: {v}, retry: {{schedule: [{v}, {v}]}}}}"),
            format!(
                "limits: {{maxBodyBytes: 18446744073709551615, requestsPerSecond: 4294967295, burst: {}}}",
                v.len()
            ),
        ] {
            let yaml = format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: k, namespace: x}}\nstringData: {{v1: s}}\n---\napiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: w, namespace: x}}\nspec:\n  scheme: {{type: stripe}}\n  keys: [{{id: v1, secretRef: {{name: k, key: v1}}}}]\n  delivery: {{url: 'http://x'}}\n  {field}\n"
            );
            let mut m = hookgate::manifest::Manifests::default();
            if m.add_text("extreme.yaml", &yaml)
                .and_then(|_| m.compile())
                .is_err()
            {
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "values past the maxima are refused");
}
