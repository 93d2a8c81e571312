//! Prometheus metrics (prometheus-client), served on the admin port. Labels carry integration
//! names, outcomes and reason codes only, never header values.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub integration: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub integration: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IntegrationLabels {
    pub integration: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    pub integration: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub error: String,
}

type Histograms = Family<IntegrationLabels, Histogram, fn() -> Histogram>;

fn delivery_buckets() -> Histogram {
    // 5 ms .. ~41 s: a delivery is bounded by its timeout (default 10 s).
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

fn completion_buckets() -> Histogram {
    // 50 ms .. ~2.3 days: first attempts land in seconds, retries in minutes to a day.
    Histogram::new(exponential_buckets(0.05, 3.0, 16))
}

pub struct Metrics {
    pub requests: Family<OutcomeLabels, Counter>,
    pub signature_failures: Family<ReasonLabels, Counter>,
    pub duplicates: Family<IntegrationLabels, Counter>,
    pub handshakes: Family<IntegrationLabels, Counter>,
    pub dedupe_conflicts: Family<IntegrationLabels, Counter>,
    pub deliveries: Family<OutcomeLabels, Counter>,
    pub ordering_ungated: Family<IntegrationLabels, Counter>,
    pub delivery_duration: Histograms,
    pub completion_latency: Histograms,
    pub inbox_events: Family<StatusLabels, Gauge>,
    pub oldest_pending: Family<IntegrationLabels, Gauge>,
    pub intake_batch_size: Histogram,
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let m = Metrics {
            requests: Family::default(),
            signature_failures: Family::default(),
            duplicates: Family::default(),
            handshakes: Family::default(),
            dedupe_conflicts: Family::default(),
            deliveries: Family::default(),
            ordering_ungated: Family::default(),
            delivery_duration: Family::new_with_constructor(delivery_buckets),
            completion_latency: Family::new_with_constructor(completion_buckets),
            inbox_events: Family::default(),
            oldest_pending: Family::default(),
            // 1 .. 1024 events per transaction.
            intake_batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 11)),
            reconcile_errors: Family::default(),
            registry: Registry::with_prefix("hookgate"),
        };
        let mut registry = Registry::with_prefix("hookgate");
        let r = &mut registry;
        r.register(
            "receiver_requests",
            "Webhook requests by integration and outcome",
            m.requests.clone(),
        );
        r.register(
            "signature_failures",
            "Requests refused at signature verification, by reason",
            m.signature_failures.clone(),
        );
        r.register(
            "duplicates",
            "Requests answered as duplicates (same event id, or a replayed signature)",
            m.duplicates.clone(),
        );
        r.register(
            "handshakes",
            "Provider endpoint checks answered (Slack url_verification, Discord PING, Twitch, Zoom, Meta subscribe); never stored",
            m.handshakes.clone(),
        );
        r.register(
            "dedupe_conflicts",
            "Known event ids that arrived again with a different body",
            m.dedupe_conflicts.clone(),
        );
        r.register(
            "delivery_attempts",
            "Delivery attempts and gate decisions by integration and result (processed, retry, dead_letter, ignored)",
            m.deliveries.clone(),
        );
        r.register(
            "ordering_ungated",
            "Events of an ordered integration delivered without the gate (no resource id or version, or a version of another kind)",
            m.ordering_ungated.clone(),
        );
        r.register(
            "delivery_duration_seconds",
            "Duration of one delivery attempt",
            m.delivery_duration.clone(),
        );
        r.register(
            "completion_latency_seconds",
            "From the provider's signed timestamp (or receipt, when unsigned) to processed: the health of the whole pipeline",
            m.completion_latency.clone(),
        );
        r.register(
            "inbox_events",
            "Events in the inbox by integration and status",
            m.inbox_events.clone(),
        );
        r.register(
            "inbox_oldest_pending_seconds",
            "Age of the oldest event still waiting for delivery (pending, retry or processing)",
            m.oldest_pending.clone(),
        );
        r.register(
            "intake_batch_size",
            "Events committed together by the receiver's group commit, per transaction",
            m.intake_batch_size.clone(),
        );
        r.register(
            "reconcile_errors",
            "Failed reconciles of WebhookIntegrations, by the call that failed (read_secret, patch_status, ...); each is retried in 30 s",
            m.reconcile_errors.clone(),
        );
        Metrics { registry, ..m }
    }

    pub fn request(&self, integration: &str, outcome: &str) {
        self.requests
            .get_or_create(&OutcomeLabels {
                integration: integration.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    pub fn delivery(&self, integration: &str, outcome: &str) {
        self.deliveries
            .get_or_create(&OutcomeLabels {
                integration: integration.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    pub fn signature_failure(&self, integration: &str, reason: &str) {
        self.signature_failures
            .get_or_create(&ReasonLabels {
                integration: integration.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// One failed reconcile. The label is a fixed name (`controller::Error::metric_label`), so
    /// the series stay few whatever fails.
    pub fn reconcile_error(&self, label: &'static str) {
        self.reconcile_errors
            .get_or_create(&ErrorLabels {
                error: label.to_string(),
            })
            .inc();
    }

    pub fn count(family: &Family<IntegrationLabels, Counter>, integration: &str) {
        family
            .get_or_create(&IntegrationLabels {
                integration: integration.to_string(),
            })
            .inc();
    }

    pub fn observe(family: &Histograms, integration: &str, seconds: f64) {
        family
            .get_or_create(&IntegrationLabels {
                integration: integration.to_string(),
            })
            .observe(seconds);
    }

    /// Replaces the inbox gauges with a fresh reading, so integrations that emptied drop to zero.
    pub fn set_inbox(&self, stats: &[crate::inbox::InboxStat]) {
        self.inbox_events.clear();
        self.oldest_pending.clear();
        for s in stats {
            self.inbox_events
                .get_or_create(&StatusLabels {
                    integration: s.integration.clone(),
                    status: s.status.clone(),
                })
                .set(s.count);
            if let Some(age) = s.oldest_age_seconds {
                let g = self.oldest_pending.get_or_create(&IntegrationLabels {
                    integration: s.integration.clone(),
                });
                g.set(g.get().max(age));
            }
        }
    }

    /// Text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_errors_are_exposed_by_label() {
        let m = Metrics::new();
        // A family without series is left out of the exposition altogether.
        assert!(!m.encode().contains("reconcile_errors"));
        m.reconcile_error("patch_status");
        m.reconcile_error("patch_status");
        m.reconcile_error("read_secret");
        let text = m.encode();
        for line in [
            "# TYPE hookgate_reconcile_errors counter\n",
            "hookgate_reconcile_errors_total{error=\"patch_status\"} 2\n",
            "hookgate_reconcile_errors_total{error=\"read_secret\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
