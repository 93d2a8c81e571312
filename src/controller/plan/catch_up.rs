//! What status says about catch-up (`spec.catchUp`). The workers run the passes and record each
//! in the inbox database (`catch_up_runs`); the controller, which owns status, reads that record
//! on every reconcile (at least every [`super::TRAFFIC_REFRESH`] with `--database-url`) and
//! writes `lastCatchUpAt`, `catchUpMissing` and the `CatchUpFailing` condition. The workers need
//! no access to the API server that way.

use super::Plan;
use super::conditions::{Conditions, rfc3339};
use crate::crd::Condition;
use crate::inbox::CatchUpRun;
use chrono::{DateTime, Utc};

/// Runs failed in a row before `CatchUpFailing` turns True: one failure (a provider blip that
/// outlasted the retries) is not yet a problem, three at the default interval is half an hour.
pub const FAILING_AFTER: i64 = 3;

/// `unauthorized` -> `Unauthorized`: a condition reason is CamelCase.
fn reason(label: &str) -> String {
    label
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Sets the catch-up fields and condition of an integration with `spec.catchUp`. `run` is its
/// record, `None` before the first pass.
pub fn set_catch_up(
    plan: &mut Plan,
    prev: &[Condition],
    generation: Option<i64>,
    now: DateTime<Utc>,
    run: Option<&CatchUpRun>,
) {
    let cond = Conditions::new(prev, generation, now);
    plan.status.last_catch_up_at = run.and_then(|r| r.last_success_at).map(rfc3339);
    plan.status.catch_up_missing = Some(run.map_or(0, |r| r.missing_total));
    let condition = match run {
        Some(r) if r.consecutive_failures >= FAILING_AFTER => {
            let label = r.last_error_reason.as_deref().unwrap_or("unknown");
            let message = format!(
                "{} catch-up runs in a row failed; the last: {}",
                r.consecutive_failures,
                r.last_error.as_deref().unwrap_or(label)
            );
            let mut c = cond.get("CatchUpFailing", true, "", message);
            c.reason = reason(label);
            c
        }
        Some(r) => match r.last_success_at {
            Some(at) => cond.get(
                "CatchUpFailing",
                false,
                "CatchUpSucceeded",
                format!("last completed at {}", rfc3339(at)),
            ),
            None => cond.get(
                "CatchUpFailing",
                false,
                "CatchUpNotCompleted",
                format!(
                    "{} run(s) failed, none completed yet",
                    r.consecutive_failures
                ),
            ),
        },
        None => cond.get(
            "CatchUpFailing",
            false,
            "CatchUpNotRun",
            "no catch-up run yet".into(),
        ),
    };
    plan.status
        .conditions
        .retain(|c| c.type_ != "CatchUpFailing");
    plan.status.conditions.push(condition);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn plan() -> Plan {
        Plan {
            status: Default::default(),
            manifests: None,
            remove_route: false,
            retired: Vec::new(),
            notes: Vec::new(),
            requeue_after: Duration::from_secs(3600),
        }
    }

    fn failing(n: i64) -> CatchUpRun {
        CatchUpRun {
            integration: "pay/stripe".into(),
            last_run_at: Some(at("2026-12-01T10:30:00Z")),
            last_success_at: Some(at("2026-12-01T10:00:00Z")),
            missing_total: 4,
            consecutive_failures: n,
            last_error_reason: Some("unauthorized".into()),
            last_error: Some("the provider refused the credential (HTTP 401): Invalid API Key provided: [redacted]".into()),
            ..Default::default()
        }
    }

    fn show(p: &Plan) -> String {
        let c = p.status.conditions.last().unwrap();
        format!("{}={}:{}:{}", c.type_, c.status, c.reason, c.message)
    }

    #[test]
    fn repeated_failures_turn_the_condition_true_with_the_reason() {
        let now = at("2026-12-01T10:31:00Z");
        let mut p = plan();
        set_catch_up(&mut p, &[], Some(2), now, Some(&failing(2)));
        assert_eq!(
            show(&p),
            "CatchUpFailing=False:CatchUpSucceeded:last completed at 2026-12-01T10:00:00Z"
        );
        let prev = p.status.conditions.clone();
        let mut p = plan();
        set_catch_up(&mut p, &prev, Some(2), now, Some(&failing(3)));
        assert_eq!(
            show(&p),
            "CatchUpFailing=True:Unauthorized:3 catch-up runs in a row failed; the last: the provider refused the credential (HTTP 401): Invalid API Key provided: [redacted]"
        );
        assert_eq!(
            p.status.last_catch_up_at.as_deref(),
            Some("2026-12-01T10:00:00Z")
        );
        assert_eq!(p.status.catch_up_missing, Some(4));
        assert_eq!(p.status.conditions.len(), 1, "one condition, replaced");
    }

    #[test]
    fn before_any_run_and_before_any_success() {
        let now = at("2026-12-01T10:31:00Z");
        let mut p = plan();
        set_catch_up(&mut p, &[], None, now, None);
        assert_eq!(
            show(&p),
            "CatchUpFailing=False:CatchUpNotRun:no catch-up run yet"
        );
        assert_eq!(
            (p.status.last_catch_up_at, p.status.catch_up_missing),
            (None, Some(0))
        );
        let mut never = failing(1);
        never.last_success_at = None;
        let mut p = plan();
        set_catch_up(&mut p, &[], None, now, Some(&never));
        assert_eq!(
            show(&p),
            "CatchUpFailing=False:CatchUpNotCompleted:1 run(s) failed, none completed yet"
        );
    }

    #[test]
    fn reasons_are_camel_case() {
        assert_eq!(reason("provider_unavailable"), "ProviderUnavailable");
        assert_eq!(reason("unauthorized"), "Unauthorized");
    }
}
