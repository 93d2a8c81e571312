//! The inbox traffic figures in status (`pending`, `deadLetters`, ...), behind the PENDING and
//! DLQ columns of `kubectl get whi`.

use super::{Plan, requeue};
use crate::crd::WebhookIntegrationStatus;
use crate::inbox::InboxStat;

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

/// Puts the figures read now into status. They go stale as events arrive, which triggers no
/// reconcile, so the plan comes back within [`requeue::TRAFFIC_REFRESH`].
pub fn refresh(plan: &mut Plan, stats: &[InboxStat]) {
    set_traffic(&mut plan.status, stats);
    requeue::within(plan, requeue::TRAFFIC_REFRESH);
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};
    use std::time::Duration;

    fn stat(status: &str, count: i64, oldest: Option<i64>, last: &str) -> InboxStat {
        InboxStat {
            integration: "pay/stripe".into(),
            status: status.into(),
            count,
            oldest_age_seconds: oldest,
            last_received_at: Some(last.parse::<DateTime<Utc>>().unwrap()),
            dedupe_conflicts: 1,
        }
    }

    #[test]
    fn figures_add_up_by_status() {
        let stats = [
            stat("pending", 2, Some(120), "2026-11-30T23:58:00Z"),
            stat("retry", 1, Some(600), "2026-11-30T23:50:00Z"),
            stat("processing", 1, Some(5), "2026-11-30T23:59:00Z"),
            stat("dead_letter", 3, Some(9000), "2026-11-30T20:00:00Z"),
            stat("processed", 40, None, "2026-12-01T00:00:00.700Z"),
        ];
        let mut s = WebhookIntegrationStatus::default();
        set_traffic(&mut s, &stats);
        assert_eq!((s.pending, s.dead_letters), (Some(4), Some(3)));
        assert_eq!(
            s.oldest_pending_seconds,
            Some(600),
            "dead letters wait no more"
        );
        assert_eq!(s.last_received_at.as_deref(), Some("2026-12-01T00:00:00Z"));
        assert_eq!(s.dedupe_conflicts, Some(5));

        let mut empty = WebhookIntegrationStatus::default();
        set_traffic(&mut empty, &[]);
        assert_eq!((empty.pending, empty.dead_letters), (Some(0), Some(0)));
        assert_eq!(
            (empty.oldest_pending_seconds, empty.last_received_at),
            (None, None)
        );
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
            refresh(&mut plan, &[]);
            assert_eq!(plan.requeue_after, Duration::from_secs(want));
            assert_eq!(plan.status.pending, Some(0));
        }
    }
}
