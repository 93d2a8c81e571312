//! The inbox traffic figures in status (`pending`, `deadLetters`, ...), behind the PENDING and
//! DLQ columns of `kubectl get whi`.

use super::{Plan, requeue};
use crate::crd::WebhookIntegrationStatus;
use crate::inbox::Traffic;

/// Fills the traffic figures from this integration's inbox rows.
pub fn set_traffic(status: &mut WebhookIntegrationStatus, traffic: &Traffic) {
    let (dead, waiting): (Vec<_>, Vec<_>) = traffic
        .backlog
        .iter()
        .partition(|b| b.status == "dead_letter");
    status.pending = Some(waiting.iter().map(|b| b.count).sum());
    status.dead_letters = Some(dead.iter().map(|b| b.count).sum());
    status.oldest_pending_seconds = waiting.iter().filter_map(|b| b.oldest_age_seconds).max();
    status.last_received_at = traffic
        .last_received_at()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    status.dedupe_conflicts = Some(traffic.dedupe_conflicts);
}

/// Puts the figures read now into status. They go stale as events arrive, which triggers no
/// reconcile, so the plan comes back within [`requeue::TRAFFIC_REFRESH`].
pub fn refresh(plan: &mut Plan, traffic: &Traffic) {
    set_traffic(&mut plan.status, traffic);
    requeue::within(plan, requeue::TRAFFIC_REFRESH);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::BacklogCount;
    use chrono::{DateTime, Utc};
    use std::time::Duration;

    fn waiting(status: &str, count: i64, oldest: Option<i64>) -> BacklogCount {
        BacklogCount {
            integration: "pay/stripe".into(),
            status: status.into(),
            count,
            oldest_age_seconds: oldest,
        }
    }

    fn at(t: &str) -> DateTime<Utc> {
        t.parse().unwrap()
    }

    #[test]
    fn figures_add_up_by_status() {
        let traffic = Traffic {
            backlog: vec![
                waiting("pending", 2, Some(120)),
                waiting("retry", 1, Some(600)),
                waiting("processing", 1, Some(5)),
                waiting("dead_letter", 3, None),
            ],
            keys_last_used: [
                ("v1".to_string(), at("2026-11-30T20:00:00Z")),
                ("v2".to_string(), at("2026-12-01T00:00:00.700Z")),
            ]
            .into(),
            dedupe_conflicts: 5,
        };
        let mut s = WebhookIntegrationStatus::default();
        set_traffic(&mut s, &traffic);
        assert_eq!((s.pending, s.dead_letters), (Some(4), Some(3)));
        assert_eq!(s.oldest_pending_seconds, Some(600));
        assert_eq!(
            s.last_received_at.as_deref(),
            Some("2026-12-01T00:00:00Z"),
            "the latest of the keys' last use"
        );
        assert_eq!(s.dedupe_conflicts, Some(5));

        let mut empty = WebhookIntegrationStatus::default();
        set_traffic(&mut empty, &Traffic::default());
        assert_eq!((empty.pending, empty.dead_letters), (Some(0), Some(0)));
        assert_eq!(
            (empty.oldest_pending_seconds, empty.last_received_at),
            (None, None)
        );
        assert_eq!(empty.dedupe_conflicts, Some(0));
    }

    #[test]
    fn fresh_figures_come_back_within_the_refresh_interval() {
        for (planned, want) in [(3600, 30), (15, 15)] {
            let mut plan = Plan {
                status: Default::default(),
                manifests: None,
                remove_route: false,
                retired: Vec::new(),
                notes: Vec::new(),
                requeue_after: Duration::from_secs(planned),
            };
            refresh(&mut plan, &Traffic::default());
            assert_eq!(plan.requeue_after, Duration::from_secs(want));
            assert_eq!(plan.status.pending, Some(0));
        }
    }
}
