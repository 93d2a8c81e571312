//! How full each HTTP listener of the process is, how many connections it closed unanswered and
//! how many requests it answered 503 itself, read from the listener's own slots at every scrape:
//! the count costs the requests nothing, and a scrape never sees a stale figure.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::{Arc, Mutex};

/// One listener's slots at one instant: how many are taken against its caps, and the
/// connections it had to close unanswered and the requests it refused so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenerLoad {
    pub open_connections: usize,
    pub max_connections: usize,
    pub requests_in_flight: usize,
    pub max_requests_in_flight: usize,
    /// Since the listener started.
    pub connections_dropped: u64,
    /// Requests it answered 503 `overloaded` itself, at either cap, since it started.
    pub requests_refused: u64,
}

/// Reads a listener's load; called at every scrape, so it must be cheap and must not block.
pub type ReadLoad = Arc<dyn Fn() -> ListenerLoad + Send + Sync>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: &'static str,
}

/// The listeners of the process, by name (`receiver`, `admin`).
#[derive(Default)]
pub(super) struct Listeners(Mutex<Vec<(&'static str, ReadLoad)>>);

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listeners").finish_non_exhaustive()
    }
}

/// A series: its name, its help, its type (a gauge or a counter), and which figure of a reading
/// it shows.
type Series = (
    &'static str,
    &'static str,
    MetricType,
    fn(&ListenerLoad) -> u64,
);

/// Taken slots against their caps.
fn slots(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

const SERIES: [Series; 6] = [
    (
        "http_open_connections",
        "Connections the listener holds open (the receiver's webhook port, or the admin port); at --max-connections (receiver) one more is answered 503 overloaded",
        MetricType::Gauge,
        |l| slots(l.open_connections),
    ),
    (
        "http_max_connections",
        "The listener's cap on open connections (--max-connections for the receiver's port)",
        MetricType::Gauge,
        |l| slots(l.max_connections),
    ),
    (
        "http_requests_in_flight",
        "Requests the listener's handler works on now, from their head read to their answer; at --max-in-flight (receiver) one more is answered 503 overloaded",
        MetricType::Gauge,
        |l| slots(l.requests_in_flight),
    ),
    (
        "http_max_requests_in_flight",
        "The listener's cap on requests in flight (--max-in-flight for the receiver's port)",
        MetricType::Gauge,
        |l| slots(l.max_requests_in_flight),
    ),
    (
        "http_connections_dropped",
        "Connections the listener closed unanswered: over its connection cap while as many others over it as it answers at once were being answered 503 overloaded",
        MetricType::Counter,
        |l| l.connections_dropped,
    ),
    (
        "http_requests_refused",
        "Requests the listener answered 503 overloaded itself, at its connection cap or its in-flight cap, whatever their path",
        MetricType::Counter,
        |l| l.requests_refused,
    ),
];

impl Listeners {
    /// Reports `read` as `listener`, in place of a listener of that name reported before.
    pub(super) fn watch(&self, listener: &'static str, read: ReadLoad) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|(name, _)| *name != listener);
        all.push((listener, read));
    }

    fn readings(&self) -> Vec<(&'static str, ListenerLoad)> {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().map(|(name, read)| (*name, read())).collect()
    }
}

impl Collector for Listeners {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let readings = self.readings();
        if readings.is_empty() {
            return Ok(());
        }
        for (name, help, kind, figure) in SERIES {
            let counter = matches!(kind, MetricType::Counter);
            let mut family = encoder.encode_descriptor(name, help, None, kind)?;
            for (listener, load) in &readings {
                let labels = ListenerLabels { listener };
                let encoder = family.encode_family(&labels)?;
                let value = figure(load);
                if counter {
                    ConstCounter::new(value).encode(encoder)?;
                } else {
                    ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX)).encode(encoder)?;
                }
            }
        }
        Ok(())
    }
}
