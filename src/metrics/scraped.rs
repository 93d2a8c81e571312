//! Figures read from the process itself at every scrape, not counted as things happen: how many
//! database connections its pool holds against its cap (`hookgate_db_*`) and how many of its
//! workers' delivery slots are taken (`hookgate_delivery_*slots*`). A role at either cap shows it
//! here before its requests time out or its backlog grows.

use crate::inbox::PoolLoad;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::{Arc, Mutex};

/// A process's workers' delivery slots at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotLoad {
    /// Slots a delivery holds, from its start until its destination answered (or it ended
    /// without an attempt).
    pub in_use: usize,
    /// `--concurrency`.
    pub max: usize,
}

/// Reads one figure; called at every scrape, so it must be cheap and must not block.
type Read<T> = Arc<dyn Fn() -> T + Send + Sync>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

/// What the process has reported so far: a role without a database or without workers serves
/// none of their series, rather than a load of zero against a cap of zero.
#[derive(Default)]
pub(super) struct Scraped {
    pool: Mutex<Option<Read<PoolLoad>>>,
    slots: Mutex<Option<Read<SlotLoad>>>,
}

impl std::fmt::Debug for Scraped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scraped").finish_non_exhaustive()
    }
}

fn set<T>(slot: &Mutex<Option<Read<T>>>, read: Read<T>) {
    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(read);
}

fn read<T>(slot: &Mutex<Option<Read<T>>>) -> Option<T> {
    slot.lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|read| read())
}

fn gauge(n: impl TryInto<i64>) -> ConstGauge {
    ConstGauge::new(n.try_into().unwrap_or(i64::MAX))
}

impl Scraped {
    pub(super) fn watch_pool(&self, read: Read<PoolLoad>) {
        set(&self.pool, read);
    }

    pub(super) fn watch_slots(&self, read: Read<SlotLoad>) {
        set(&self.slots, read);
    }
}

impl Collector for Scraped {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(load) = read(&self.pool) {
            let mut family = encoder.encode_descriptor(
                "db_connections",
                "Database connections the process's pool holds: in_use by a call, or idle; at hookgate_db_max_connections in use, further calls wait up to --db-acquire-timeout",
                None,
                MetricType::Gauge,
            )?;
            for (state, n) in [("in_use", load.in_use()), ("idle", load.idle)] {
                gauge(n).encode(family.encode_family(&StateLabels { state })?)?;
            }
            gauge(load.max).encode(encoder.encode_descriptor(
                "db_max_connections",
                "The pool's cap on database connections (--db-max-connections; 4 for SQLite)",
                None,
                MetricType::Gauge,
            )?)?;
        }
        if let Some(load) = read(&self.slots) {
            gauge(load.in_use).encode(encoder.encode_descriptor(
                "delivery_slots_in_use",
                "The workers' delivery slots a delivery holds now, until its destination answers; at hookgate_delivery_max_slots due events wait for a slot",
                None,
                MetricType::Gauge,
            )?)?;
            gauge(load.max).encode(encoder.encode_descriptor(
                "delivery_max_slots",
                "The workers' delivery slots (--concurrency)",
                None,
                MetricType::Gauge,
            )?)?;
        }
        Ok(())
    }
}
