//! What one reconcile should do, decided without I/O: the status to write, the compiled route to
//! apply (if any), the events to emit, the generated keys to write and when to look again. The
//! reconciler reads what these functions take, calls them and carries out what they return, so
//! every rule can be tested with fixed inputs and a fixed clock.
//!
//! - `plan` (here): status, compiled route and events for the integration as read;
//! - [`refusal`]: the reasons not to program the route;
//! - [`keys`]: what status and events say about key phases;
//! - [`rotation`]: keys the controller generates (`spec.rotation.generate`);
//! - [`requeue`]: when to look again;
//! - [`traffic`]: the inbox figures in status;
//! - [`catch_up`]: what the workers' catch-up runs recorded, in status;
//! - [`inputs`]: which objects the plan needs read.

pub mod catch_up;
mod conditions;
pub mod inputs;
mod keys;
mod refusal;
pub mod requeue;
pub mod rotation;
pub mod traffic;

pub use conditions::{refused_route, route_refused};
pub use inputs::Inputs;
pub use keys::phase_series;
pub use requeue::{RESYNC, RETRY_CONFLICT, RETRY_MISSING, TRAFFIC_REFRESH};
pub use traffic::set_traffic;

use super::compiled;
use super::phases;
use crate::crd::{WebhookIntegrationStatus, defaults};
use conditions::{Conditions, rfc3339};
use kube::ResourceExt;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    /// Never contains key material.
    pub note: String,
}

impl Note {
    fn normal(reason: &'static str, note: String) -> Self {
        Note {
            warning: false,
            reason,
            note,
        }
    }

    fn warning(reason: &'static str, note: String) -> Self {
        Note {
            warning: true,
            reason,
            note,
        }
    }
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

pub fn plan(i: &Inputs) -> Plan {
    let prev = i.wi.status.clone().unwrap_or_default();
    let cond = Conditions::new(&prev.conditions, i.wi.metadata.generation, i.now);
    let path =
        i.wi.spec.path.clone().unwrap_or_else(|| {
            defaults::path(&i.wi.namespace().unwrap_or_default(), &i.wi.name_any())
        });
    let mut status = WebhookIntegrationStatus {
        observed_generation: i.wi.metadata.generation,
        route: Some(path),
        keys: prev.keys.clone(),
        ..Default::default()
    };
    let timings = match refusal::before_keys(i) {
        Ok(t) => t,
        Err(r) => return r.into_plan(status, &cond),
    };

    let previous = keys::previous(&prev.keys, i.retired);
    let keys = phases::plan_keys(
        &i.wi.spec.keys,
        &previous,
        i.last_used,
        timings.overlap,
        timings.keep_retired,
        i.now,
    );
    let not_after: Vec<_> = keys.keys.iter().map(|k| k.retire_at).collect();
    if let Err(r) = refusal::compiles(i.wi, &not_after, i.secrets) {
        return r.into_plan(status, &cond);
    }
    status.keys = keys.status.clone();
    status.next_rotation_at = keys.next_transition.map(rfc3339);
    status.conditions = cond.programmed(keys.active.as_deref());
    let mut notes = keys::phase_notes(&keys.changes);
    if let Some(msg) = keys::in_use(&keys.retiring_in_use) {
        let c = cond.get("RetiringKeyInUse", true, "RetiringKeyInUse", msg.clone());
        status.conditions.push(c);
        notes.push(Note::warning("RetiringKeyInUse", msg));
    }
    if keys.active.is_none() {
        notes.push(Note::warning("NoActiveKey", keys::NO_ACTIVE_KEY.into()));
    }
    Plan {
        status,
        manifests: Some(compiled::render(i.wi, &not_after, i.secrets)),
        remove_route: false,
        retired: keys::retired(&keys),
        notes,
        requeue_after: requeue::at_transition(keys.next_transition, i.now),
    }
}
