//! Prometheus metrics (prometheus-client). Labels carry integration names and reason codes only,
//! never header values.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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

#[derive(Default)]
pub struct Metrics {
    pub requests: Family<OutcomeLabels, Counter>,
    pub signature_failures: Family<ReasonLabels, Counter>,
    pub duplicates: Family<IntegrationLabels, Counter>,
    pub dedupe_conflicts: Family<IntegrationLabels, Counter>,
    pub deliveries: Family<OutcomeLabels, Counter>,
    pub ordering_ungated: Family<IntegrationLabels, Counter>,
    registry: Registry,
}

impl Metrics {
    pub fn new() -> Self {
        let mut m = Metrics::default();
        let mut registry = Registry::with_prefix("hookgate");
        registry.register(
            "receiver_requests",
            "Webhook requests by integration and outcome",
            m.requests.clone(),
        );
        registry.register(
            "signature_failures",
            "Requests refused at signature verification, by reason",
            m.signature_failures.clone(),
        );
        registry.register(
            "duplicates",
            "Requests answered as duplicates (same event id, or a replayed signature)",
            m.duplicates.clone(),
        );
        registry.register(
            "dedupe_conflicts",
            "Known event ids that arrived again with a different body",
            m.dedupe_conflicts.clone(),
        );
        registry.register(
            "delivery_attempts",
            "Delivery attempts and gate decisions by integration and result (processed, retry, dead_letter, ignored)",
            m.deliveries.clone(),
        );
        registry.register(
            "ordering_ungated",
            "Events of an ordered integration delivered without the gate (no resource id or version, or a version of another kind)",
            m.ordering_ungated.clone(),
        );
        m.registry = registry;
        m
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

    pub fn count(family: &Family<IntegrationLabels, Counter>, integration: &str) {
        family
            .get_or_create(&IntegrationLabels {
                integration: integration.to_string(),
            })
            .inc();
    }

    /// Text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
