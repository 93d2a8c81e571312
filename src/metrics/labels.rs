//! The label sets of hookgate's series, and the buckets of its histograms.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

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

/// A signing key of one integration. Key ids are names from the spec (never key material), at
/// most `crd::limits::MAX_KEYS` per integration, so the series stay few.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KeyLabels {
    pub integration: String,
    pub key: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KeyPhaseLabels {
    pub integration: String,
    pub key: String,
    pub phase: String,
}

/// Whether a worker's claim found events: `some` or `none`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FoundLabels {
    pub found: String,
}

/// What a worker's completion transaction recorded: `batch`, the outcomes batched together on
/// PostgreSQL, or `single`, one outcome in a transaction of its own (every outcome on SQLite, and
/// on either backend an event that passed an ordering gate, whose version is written with it).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransactionLabels {
    pub transaction: String,
}

/// A step of a retention pass: `integrations`, `purge`, `delete`, `versions`, `nonces`, `records`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    pub step: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub error: String,
}

pub(super) type Histograms = Family<IntegrationLabels, Histogram, fn() -> Histogram>;

pub(super) fn delivery_buckets() -> Histogram {
    // 5 ms .. ~41 s: a delivery is bounded by its timeout (default 10 s).
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// 1 ms .. ~16 s, doubling: a receiver's answer and its commit, and a worker's claim and
/// completion, take milliseconds when all is well, and providers give up after seconds (Slack 3 s,
/// GitHub and Stripe 10 s).
pub(super) fn answer_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// 1 .. 1024 items per transaction, doubling: the receiver's insert batches (at most
/// `--commit-batch`) and the workers' completion batches (at most 128).
pub(super) fn batch_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 11))
}

pub(super) fn completion_buckets() -> Histogram {
    // 50 ms .. ~2.3 days: first attempts land in seconds, retries in minutes to a day.
    Histogram::new(exponential_buckets(0.05, 3.0, 16))
}
