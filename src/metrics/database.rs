//! How many database connections the process's pool holds against its cap, read from the pool
//! at every scrape (`hookgate_db_*`): a role whose calls wait for a connection shows it here
//! before its requests time out.

use crate::inbox::PoolLoad;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::{Arc, Mutex};

/// Reads the pool; called at every scrape, so it must be cheap and must not block.
type ReadPool = Arc<dyn Fn() -> PoolLoad + Send + Sync>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

/// The process's pool, once a role has one.
#[derive(Default)]
pub(super) struct Database(Mutex<Option<ReadPool>>);

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").finish_non_exhaustive()
    }
}

impl Database {
    pub(super) fn watch(&self, read: ReadPool) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(read);
    }

    fn reading(&self) -> Option<PoolLoad> {
        let read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        read.as_ref().map(|read| read())
    }
}

impl Collector for Database {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(load) = self.reading() else {
            return Ok(());
        };
        let mut family = encoder.encode_descriptor(
            "db_connections",
            "Database connections the process's pool holds: in_use by a call, or idle; at hookgate_db_max_connections in use, further calls wait up to --db-acquire-timeout",
            None,
            MetricType::Gauge,
        )?;
        for (state, n) in [("in_use", load.in_use()), ("idle", load.idle)] {
            ConstGauge::new(i64::from(n)).encode(family.encode_family(&StateLabels { state })?)?;
        }
        ConstGauge::new(i64::from(load.max)).encode(encoder.encode_descriptor(
            "db_max_connections",
            "The pool's cap on database connections (--db-max-connections; 4 for SQLite)",
            None,
            MetricType::Gauge,
        )?)?;
        Ok(())
    }
}
