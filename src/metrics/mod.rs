//! Prometheus metrics (prometheus-client), served on the admin port. Labels carry integration
//! names, outcomes and reason codes only, never header values.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

mod exposition;
mod labels;
mod listeners;
mod register;
mod scraped;

pub use exposition::{counter_sum, histogram_buckets, quantile_bound};

pub use labels::*;
use labels::{Histograms, answer_buckets, batch_buckets, completion_buckets, delivery_buckets};
pub use listeners::{ListenerLoad, ReadLoad};
pub use scraped::SlotLoad;

pub struct Metrics {
    pub requests: Family<OutcomeLabels, Counter>,
    pub signature_failures: Family<ReasonLabels, Counter>,
    pub duplicates: Family<IntegrationLabels, Counter>,
    pub handshakes: Family<IntegrationLabels, Counter>,
    pub dedupe_conflicts: Family<IntegrationLabels, Counter>,
    pub deliveries: Family<OutcomeLabels, Counter>,
    pub ordering_ungated: Family<IntegrationLabels, Counter>,
    /// Events given back to the inbox, uncounted, while their integration was stuck (`worker::fair`).
    pub deferred: Family<IntegrationLabels, Counter>,
    pub delivery_duration: Histograms,
    pub completion_latency: Histograms,
    pub inbox_events: Family<StatusLabels, Gauge>,
    pub oldest_pending: Family<IntegrationLabels, Gauge>,
    pub intake_batch_size: Histogram,
    /// Each intake transaction, from its start to its commit or failure (`inbox::BatchFigures`).
    pub intake_commit_duration: Histogram,
    /// From a request reaching the receiver's handler to its 2xx answer, per integration.
    pub answer_duration: Histograms,
    /// Each claim statement of a worker pool, whether it found events or not.
    pub claim_duration: Histogram,
    /// Each completion transaction of a worker pool, by `transaction`: `batch` or `single`.
    pub completion_commit_duration: Family<TransactionLabels, Histogram, fn() -> Histogram>,
    /// Completions committed together by a worker pool's batching task (PostgreSQL).
    pub completion_batch_size: Histogram,
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    pub verified_requests: Family<KeyLabels, Counter>,
    pub key_phase: Family<KeyPhaseLabels, Gauge>,
    /// Refusal log lines the receiver's per-process budget dropped (one flood, one number).
    pub refusal_logs_dropped: Counter,
    /// Duplicates the receiver answered from its memory of recently committed keys.
    pub duplicates_remembered: Counter,
    /// What that memory holds against `--dedupe-cache-mib`, in bytes.
    pub dedupe_cache_bytes: Gauge,
    /// Entries that memory dropped for room before their ttl.
    pub dedupe_cache_evicted: Counter,
    /// Events stored leased to the workers of the receiver's process and handed over (standalone).
    pub handed_over: Family<IntegrationLabels, Counter>,
    /// The workers' claims, by whether they found any event.
    pub claims: Family<FoundLabels, Counter>,
    pub catch_up_missing: Family<IntegrationLabels, Counter>,
    pub catch_up_present: Family<IntegrationLabels, Counter>,
    pub catch_up_errors: Family<ReasonLabels, Counter>,
    /// Catch-up passes in progress in this process.
    pub catch_up_running: Gauge,
    /// Integrations whose catch-up pass is due but waits for one of `--catch-up-passes`.
    pub catch_up_waiting: Gauge,
    /// Steps of retention passes that failed, their rows left for the next pass (`worker::janitor`).
    pub retention_failures: Family<StepLabels, Counter>,
    /// The key phase series set per integration: prometheus-client cannot list a family's label
    /// sets, and a key that left the spec must lose its series.
    key_phase_index: Mutex<HashMap<String, HashSet<KeyPhaseLabels>>>,
    /// Read at each scrape (`hookgate_http_*`).
    listeners: Arc<listeners::Listeners>,
    /// Read at each scrape (`hookgate_db_*`, `hookgate_delivery_*slots*`).
    scraped: Arc<scraped::Scraped>,
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
            deferred: Family::default(),
            delivery_duration: Family::new_with_constructor(delivery_buckets),
            completion_latency: Family::new_with_constructor(completion_buckets),
            inbox_events: Family::default(),
            oldest_pending: Family::default(),
            intake_batch_size: batch_buckets(),
            intake_commit_duration: answer_buckets(),
            answer_duration: Family::new_with_constructor(answer_buckets),
            claim_duration: answer_buckets(),
            completion_commit_duration: Family::new_with_constructor(answer_buckets),
            completion_batch_size: batch_buckets(),
            reconcile_errors: Family::default(),
            verified_requests: Family::default(),
            key_phase: Family::default(),
            refusal_logs_dropped: Counter::default(),
            duplicates_remembered: Counter::default(),
            dedupe_cache_bytes: Gauge::default(),
            dedupe_cache_evicted: Counter::default(),
            handed_over: Family::default(),
            claims: Family::default(),
            catch_up_missing: Family::default(),
            catch_up_present: Family::default(),
            catch_up_errors: Family::default(),
            catch_up_running: Gauge::default(),
            catch_up_waiting: Gauge::default(),
            retention_failures: Family::default(),
            key_phase_index: Mutex::default(),
            listeners: Arc::default(),
            scraped: Arc::default(),
            registry: Registry::with_prefix("hookgate"),
        };
        let registry = register::registry(&m);
        Metrics { registry, ..m }
    }

    /// Reports how full the listener named `listener` (`receiver`, `admin`) is, read by `read` at
    /// every scrape; replaces a listener of that name reported before.
    pub fn watch_listener(&self, listener: &'static str, read: ReadLoad) {
        self.listeners.watch(listener, read);
    }

    /// Reports the database pool of `inbox`, read at every scrape; replaces a pool reported
    /// before (a process has one).
    pub fn watch_pool(&self, inbox: &crate::inbox::Inbox) {
        let inbox = inbox.clone();
        self.scraped.watch_pool(Arc::new(move || inbox.pool_load()));
    }

    /// Reports the workers' delivery slots, read by `read` at every scrape; replaces slots
    /// reported before (a process runs one pool of workers).
    pub fn watch_delivery_slots(&self, read: Arc<dyn Fn() -> SlotLoad + Send + Sync>) {
        self.scraped.watch_slots(read);
    }

    /// One claim by a worker pool, which found `got` events.
    pub fn claim(&self, got: usize) {
        let found = if got == 0 { "none" } else { "some" };
        self.claims
            .get_or_create(&FoundLabels {
                found: found.to_string(),
            })
            .inc();
    }

    /// One failed catch-up run of `integration`; `reason` is a fixed label.
    pub fn catch_up_error(&self, integration: &str, reason: &'static str) {
        self.catch_up_errors
            .get_or_create(&ReasonLabels {
                integration: integration.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// `n` more failures of a retention pass's `step` (0 declares the series).
    pub fn retention_failures(&self, step: &'static str, n: u64) {
        self.retention_failures
            .get_or_create(&StepLabels {
                step: step.to_string(),
            })
            .inc_by(n);
    }

    /// `n` more events of `integration` found missing (`missing`) or already held.
    pub fn catch_up_events(&self, integration: &str, missing: u64, present: u64) {
        let labels = IntegrationLabels {
            integration: integration.to_string(),
        };
        // Created even at zero, so the series exists from the first run on.
        self.catch_up_missing.get_or_create(&labels).inc_by(missing);
        self.catch_up_present.get_or_create(&labels).inc_by(present);
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

    /// One request verified by `key` (a key id from the spec, never the key itself).
    pub fn verified(&self, integration: &str, key: &str) {
        self.verified_requests
            .get_or_create(&KeyLabels {
                integration: integration.to_string(),
                key: key.to_string(),
            })
            .inc();
    }

    /// Replaces the phase series of `integration` with `keys` (id, phase): a key that changed
    /// phase or left the spec loses its old series, so each key keeps one series, its phase now.
    /// An empty `keys` removes the integration's series (it was deleted).
    pub fn set_key_phases<'a>(
        &self,
        integration: &str,
        keys: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        let now: HashSet<KeyPhaseLabels> = keys
            .into_iter()
            .map(|(key, phase)| KeyPhaseLabels {
                integration: integration.to_string(),
                key: key.to_string(),
                phase: phase.to_string(),
            })
            .collect();
        // The lock covers the family's update too, so two reconciles of one integration cannot
        // interleave their removals and additions.
        let mut index = self
            .key_phase_index
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let before = index.remove(integration).unwrap_or_default();
        for gone in before.difference(&now) {
            self.key_phase.remove(gone);
        }
        for labels in &now {
            self.key_phase.get_or_create(labels).set(1);
        }
        if !now.is_empty() {
            index.insert(integration.to_string(), now);
        }
    }

    /// Drops every key phase series: a controller that lost leadership no longer writes status,
    /// and series it kept would contradict the new leader's.
    pub fn clear_key_phases(&self) {
        let mut index = self
            .key_phase_index
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        index.clear();
        self.key_phase.clear();
    }

    /// Creates `integration`'s series of `family` for each of `labels` at zero, as a role learns of
    /// the integration. A counter series born at 1 is no increase to Prometheus (`increase()` and
    /// `rate()` need a sample before it), so without this the first refusal, dead letter or
    /// retiring-key request after a start would never reach an alert. Existing series keep their
    /// counts.
    pub fn declare_outcomes(
        family: &Family<OutcomeLabels, Counter>,
        integration: &str,
        labels: &[&str],
    ) {
        for outcome in labels {
            let _ = family.get_or_create(&OutcomeLabels {
                integration: integration.to_string(),
                outcome: outcome.to_string(),
            });
        }
    }

    /// [`Metrics::declare_outcomes`] for a route's signing keys (ids from the spec).
    pub fn declare_keys<'a>(&self, integration: &str, keys: impl IntoIterator<Item = &'a str>) {
        for key in keys {
            let _ = self.verified_requests.get_or_create(&KeyLabels {
                integration: integration.to_string(),
                key: key.to_string(),
            });
        }
    }

    /// [`Metrics::declare_outcomes`] for the reasons a catch-up run of `integration` can fail.
    pub fn declare_catch_up(&self, integration: &str, reasons: &[&str]) {
        for reason in reasons {
            let _ = self.catch_up_errors.get_or_create(&ReasonLabels {
                integration: integration.to_string(),
                reason: reason.to_string(),
            });
        }
        let labels = IntegrationLabels {
            integration: integration.to_string(),
        };
        let _ = self.catch_up_missing.get_or_create(&labels);
        let _ = self.catch_up_present.get_or_create(&labels);
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
    pub fn set_inbox(&self, stats: &[crate::inbox::BacklogCount]) {
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
mod tests;
