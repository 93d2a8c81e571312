//! What one reconcile should do, decided without I/O: the status to write, the compiled route to
//! apply (if any), the events to emit and when to look again. The reconciler only carries it out.

use super::compiled;
use super::ownership::{self, Claim};
use super::phases::{self, Phase};
use crate::crd::validate::{self, FieldError};
use crate::crd::{Condition, WebhookIntegration, WebhookIntegrationStatus, defaults};
use crate::inbox::InboxStat;
use crate::route::{self, Secrets};
use chrono::{DateTime, SecondsFormat, Utc};
use kube::ResourceExt;
use std::collections::HashMap;
use std::time::Duration;

/// Look again at least this often, even with nothing scheduled (drift, missed watch events).
pub const RESYNC: Duration = Duration::from_secs(3600);
/// After a missing Secret: the Secret watch usually triggers sooner.
pub const RETRY_MISSING: Duration = Duration::from_secs(60);
/// After a path conflict: how soon a deleted owner's path passes to the next claimant.
pub const RETRY_CONFLICT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    /// Never contains key material.
    pub note: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub status: WebhookIntegrationStatus,
    /// Manifests of the compiled route to apply; `None` leaves the current route as it is.
    pub manifests: Option<String>,
    /// Delete this integration's compiled route: another integration owns its path.
    pub remove_route: bool,
    /// Spec key ids that are retired, recorded on the compiled route beside the manifests.
    pub retired: Vec<String>,
    pub notes: Vec<Note>,
    pub requeue_after: Duration,
}

/// Inputs read by the reconciler.
pub struct Inputs<'a> {
    pub wi: &'a WebhookIntegration,
    /// The referenced Secrets that exist (values decoded).
    pub secrets: &'a Secrets,
    /// Names of referenced Secrets that do not exist.
    pub missing: &'a [String],
    pub last_used: &'a HashMap<String, DateTime<Utc>>,
    /// The path claims recorded on the compiled routes (every integration's, this one's too).
    pub claims: &'a [Claim],
    /// Key ids recorded as retired on this integration's compiled route.
    pub retired: &'a [String],
    /// `namespace/name` of a Secret where the generated keys belong that this integration does
    /// not own (someone else created it): never adopted or overwritten.
    pub foreign_secret: Option<&'a str>,
    pub now: DateTime<Utc>,
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A condition, keeping the previous `lastTransitionTime` when the status did not change.
fn condition(
    prev: &[Condition],
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Condition {
    let status = if ok { "True" } else { "False" };
    let since = prev
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| rfc3339(now));
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: since,
        observed_generation: generation,
    }
}

fn duration(
    value: Option<&String>,
    field: &str,
    default: Duration,
) -> Result<Duration, FieldError> {
    value.map_or(Ok(default), |v| validate::duration(field, v))
}

pub fn plan(i: &Inputs) -> Plan {
    let prev = i.wi.status.clone().unwrap_or_default();
    let generation = i.wi.metadata.generation;
    let cond = |t: &str, ok: bool, reason: &str, msg: String| {
        condition(&prev.conditions, t, ok, reason, msg, generation, i.now)
    };
    let path =
        i.wi.spec.path.clone().unwrap_or_else(|| {
            defaults::path(&i.wi.namespace().unwrap_or_default(), &i.wi.name_any())
        });
    let mut status = WebhookIntegrationStatus {
        observed_generation: generation,
        route: Some(path),
        keys: prev.keys.clone(),
        ..Default::default()
    };
    let fail = |mut status: WebhookIntegrationStatus,
                keys_ok: bool,
                reason: &'static str,
                message: String,
                requeue: Duration| {
        status.conditions = vec![
            cond("Ready", false, reason, message.clone()),
            cond(
                "KeysReady",
                keys_ok,
                if keys_ok { "KeysReady" } else { reason },
                if keys_ok {
                    String::new()
                } else {
                    message.clone()
                },
            ),
            cond("RouteProgrammed", false, reason, message.clone()),
        ];
        Plan {
            status,
            manifests: None,
            remove_route: false,
            retired: Vec::new(),
            notes: vec![Note {
                warning: true,
                reason,
                note: message,
            }],
            requeue_after: requeue,
        }
    };

    let rotation = i.wi.spec.rotation.clone().unwrap_or_default();
    let timings = validate::spec(&i.wi.spec).and_then(|_| {
        Ok((
            duration(
                rotation.overlap.as_ref(),
                "spec.rotation.overlap",
                defaults::ROTATION_OVERLAP,
            )?,
            duration(
                rotation.keep_retired.as_ref(),
                "spec.rotation.keepRetired",
                defaults::KEEP_RETIRED,
            )?,
        ))
    });
    let (overlap, keep_retired) = match timings {
        Ok(t) => t,
        // Nothing changes until the spec does: no requeue beyond the resync.
        Err(e) => return fail(status, false, "InvalidSpec", e.to_string(), RESYNC),
    };
    if let Some(name) = i.foreign_secret {
        let message = format!(
            "Secret {name} exists but was not created by hookgate for this integration; it is \
             left untouched: delete or rename it, or stop using rotation.generate"
        );
        return fail(status, false, "SecretNotOwned", message, RETRY_MISSING);
    }
    if let Some(owner) = ownership::owner_other_than(&compiled::claim(i.wi), i.claims) {
        let message = format!(
            "path {} is served by {}, which claimed it first; this integration is not routed",
            owner.path, owner.integration
        );
        let mut plan = fail(status, true, "PathConflict", message, RETRY_CONFLICT);
        plan.remove_route = true;
        return plan;
    }
    if !i.missing.is_empty() {
        let namespace = i.wi.namespace().unwrap_or_default();
        let names: Vec<String> = i
            .missing
            .iter()
            .map(|n| format!("{namespace}/{n}"))
            .collect();
        return fail(
            status,
            false,
            "SecretNotFound",
            format!("Secret {} not found", names.join(", ")),
            RETRY_MISSING,
        );
    }

    // Retirement recorded outside status (on the compiled route) survives a lost or restored
    // status: such a key is Retired whatever the status says.
    let mut previous = prev.keys.clone();
    for id in i.retired {
        match previous.iter_mut().find(|k| &k.id == id) {
            Some(k) => k.phase = Phase::Retired.as_str().to_string(),
            None => previous.push(crate::crd::KeyStatus {
                id: id.clone(),
                phase: Phase::Retired.as_str().to_string(),
                since: None,
                retire_at: None,
                last_used_at: None,
            }),
        }
    }
    let keys = phases::plan_keys(
        &i.wi.spec.keys,
        &previous,
        i.last_used,
        overlap,
        keep_retired,
        i.now,
    );
    let not_after: Vec<Option<DateTime<Utc>>> = keys.keys.iter().map(|k| k.retire_at).collect();
    // Compile exactly what receivers will compile, so an unusable key is caught here.
    let mut effective = i.wi.clone();
    for (k, t) in effective.spec.keys.iter_mut().zip(&not_after) {
        k.retire_at = *t;
    }
    if let Err(e) = route::compile(&effective, i.secrets) {
        return fail(status, false, "InvalidKey", e.to_string(), RETRY_MISSING);
    }
    status.keys = keys.status.clone();
    status.next_rotation_at = keys.next_transition.map(rfc3339);

    let (keys_ok, keys_reason, keys_msg) = match &keys.active {
        Some(id) => (true, "KeysReady", format!("active key {id}")),
        None => (false, "NoActiveKey", "every key is retired".to_string()),
    };
    status.conditions = vec![
        cond(
            "Ready",
            keys_ok,
            if keys_ok { "Ready" } else { keys_reason },
            if keys_ok {
                String::new()
            } else {
                keys_msg.clone()
            },
        ),
        cond("KeysReady", keys_ok, keys_reason, keys_msg),
        cond("RouteProgrammed", true, "RouteProgrammed", String::new()),
    ];
    let mut notes: Vec<Note> = keys
        .changes
        .iter()
        .filter_map(|c| {
            let (reason, verb) = match c.to {
                Phase::Active => ("KeyActivated", "is now the active key"),
                Phase::Retiring => (
                    "KeyRetiring",
                    "is retiring: still accepted until its retire time",
                ),
                Phase::Retired => (
                    "KeyRetired",
                    "is retired: signatures made with it are rejected",
                ),
            };
            (c.from != Some(c.to)).then(|| Note {
                warning: false,
                reason,
                note: format!("key {} {verb}", c.id),
            })
        })
        .collect();
    if !keys.retiring_in_use.is_empty() {
        let msg = format!(
            "retiring key(s) {} still used within the last hour",
            keys.retiring_in_use.join(", ")
        );
        status.conditions.push(cond(
            "RetiringKeyInUse",
            true,
            "RetiringKeyInUse",
            msg.clone(),
        ));
        notes.push(Note {
            warning: true,
            reason: "RetiringKeyInUse",
            note: msg,
        });
    }
    if !keys_ok {
        notes.push(Note {
            warning: true,
            reason: "NoActiveKey",
            note: "every key is retired".into(),
        });
    }
    let requeue_after = keys
        .next_transition
        .and_then(|t| (t - i.now).to_std().ok())
        .map_or(RESYNC, |d| d.clamp(Duration::from_secs(1), RESYNC));
    Plan {
        status,
        manifests: Some(compiled::render(i.wi, &not_after, i.secrets)),
        remove_route: false,
        retired: keys
            .keys
            .iter()
            .filter(|k| k.phase == Phase::Retired)
            .map(|k| k.id.clone())
            .collect(),
        notes,
        requeue_after,
    }
}

/// The route could not be written: Ready and RouteProgrammed turn False with the reason, and the
/// reconcile comes back soon.
pub fn route_refused(plan: &mut Plan, message: String) {
    for c in plan.status.conditions.iter_mut() {
        if c.type_ == "Ready" || c.type_ == "RouteProgrammed" {
            c.status = "False".into();
            c.reason = "RouteRejected".into();
            c.message = message.clone();
        }
    }
    plan.notes.push(Note {
        warning: true,
        reason: "RouteRejected",
        note: message,
    });
    plan.requeue_after = plan.requeue_after.min(RETRY_MISSING);
}

/// Fills the traffic figures from this integration's inbox rows.
pub fn set_traffic(status: &mut WebhookIntegrationStatus, stats: &[InboxStat]) {
    let waiting = |s: &&InboxStat| matches!(s.status.as_str(), "pending" | "retry" | "processing");
    status.pending = Some(stats.iter().filter(waiting).map(|s| s.count).sum());
    status.dead_letters = Some(
        stats
            .iter()
            .filter(|s| s.status == "dead_letter")
            .map(|s| s.count)
            .sum(),
    );
    status.oldest_pending_seconds = stats
        .iter()
        .filter(waiting)
        .filter_map(|s| s.oldest_age_seconds)
        .max();
    status.last_received_at = stats
        .iter()
        .filter_map(|s| s.last_received_at)
        .max()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    status.dedupe_conflicts = Some(stats.iter().map(|s| s.dedupe_conflicts).sum());
}
