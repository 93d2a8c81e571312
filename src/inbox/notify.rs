//! Waking workers in other processes: PostgreSQL's LISTEN/NOTIFY on one channel.
//!
//! Workers that share a process with the receiver learn of new events through [`super::Arrivals`].
//! Workers in their own processes (the chart's receivers and workers, or `hookgate worker` beside
//! `hookgate standalone --no-workers`) would otherwise find them only at their next poll, so an
//! event's completion latency at low load included up to a poll interval. A receiver without
//! workers of its own sends one notification after events were committed for a claim, and every
//! worker listening wakes for it. A notification's payload names the integrations whose events
//! were stored since the last one (no ids, nothing of the events), so that a busy worker's next
//! claim looks at them at once (`worker::cursor`). Notifications are not durable: a listener that
//! is reconnecting misses them, and the poll stays as the fallback.

use super::Arrivals;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// The channel receivers notify and workers listen on.
pub const CHANNEL: &str = "hookgate_inbox";

/// At most one notification per this interval and receiver: under load every batch stores events
/// for a claim, and busy workers need no wake-up; an idle one waits at most this much longer.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The most bytes of integration names one notification carries, well within PostgreSQL's 8,000
/// for a payload; names past it are found by the workers' full claim, at most a second later.
const PAYLOAD_BYTES: usize = 4000;

/// Reconnecting after the listening connection failed: doubling up to the cap.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_CAP: Duration = Duration::from_secs(30);

/// The receiver's end. Cheap to clone; requests that store events for a claim while a
/// notification is on its way are covered by one more, not one each. The sending task ends
/// when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct Notifier {
    wake: mpsc::Sender<()>,
    /// The integrations stored for since the last notification was sent.
    names: Arc<Mutex<Names>>,
}

/// Integration names for the next notification, within [`PAYLOAD_BYTES`].
#[derive(Debug, Default)]
struct Names {
    set: BTreeSet<String>,
    bytes: usize,
}

impl Names {
    fn add(&mut self, integration: &str) {
        let bytes = self.bytes + integration.len() + 1;
        if bytes <= PAYLOAD_BYTES && !self.set.contains(integration) {
            self.set.insert(integration.to_owned());
            self.bytes = bytes;
        }
    }

    /// The payload: the names, one per line (no integration name holds a line break).
    fn take(&mut self) -> String {
        self.bytes = 0;
        let names: Vec<String> = std::mem::take(&mut self.set).into_iter().collect();
        names.join("\n")
    }
}

/// The integrations a payload names (none: the sender named none, or is an older version).
fn named(payload: &str) -> impl Iterator<Item = &str> {
    payload.split('\n').filter(|n| !n.is_empty())
}

impl Notifier {
    /// Starts the task that sends the notifications (current Tokio runtime).
    pub fn start(pool: PgPool) -> Self {
        // One waiting request for a notification is all there is to remember.
        let (wake, asked) = mpsc::channel(1);
        let names = Arc::new(Mutex::new(Names::default()));
        tokio::spawn(send(pool, asked, names.clone()));
        Self { wake, names }
    }

    /// Events of `integration` were committed `pending` for a claim by another process's workers.
    pub fn stored_for_claim(&self, integration: &str) {
        self.names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(integration);
        // Full: a notification is already due, and covers this one.
        let _ = self.wake.try_send(());
    }
}

async fn send(pool: PgPool, mut asked: mpsc::Receiver<()>, names: Arc<Mutex<Names>>) {
    while asked.recv().await.is_some() {
        let payload = names.lock().unwrap_or_else(|p| p.into_inner()).take();
        // A notification gives its transaction an id, so its commit would wait for a WAL flush
        // of its own beside the batches' (intake runs were lower with it: docs/performance.md,
        // round 9). A transaction that wrote nothing has nothing a crash could lose.
        if let Err(e) =
            sqlx::query("SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(payload)
                .execute(&pool)
                .await
        {
            // Workers still find the events at their next poll.
            tracing::debug!(error = %e, "could not notify the workers of new events");
        }
        tokio::time::sleep(MIN_INTERVAL).await;
    }
}

/// Wakes `arrivals` at every notification on [`CHANNEL`], reconnecting when the connection
/// fails, until the task is aborted. Holds one connection of `pool` while it listens.
pub async fn listen(pool: PgPool, arrivals: Arrivals) {
    let mut retry = RETRY_FIRST;
    loop {
        match listener(&pool).await {
            Ok(mut l) => {
                tracing::debug!(channel = CHANNEL, "listening for new events");
                // Events committed while the listener was away are found by this wake-up.
                arrivals.committed();
                retry = RETRY_FIRST;
                loop {
                    match l.try_recv().await {
                        Ok(Some(n)) => {
                            let mut any = false;
                            for integration in named(n.payload()) {
                                arrivals.committed_for(integration);
                                any = true;
                            }
                            if !any {
                                arrivals.committed();
                            }
                        }
                        // The connection dropped, and the listener has connected and listens
                        // again (eager reconnect): events committed in between are found by
                        // this wake-up.
                        Ok(None) => arrivals.committed(),
                        Err(e) => {
                            tracing::warn!(error = %e, "lost the connection listening for new events; idle workers poll until it is back");
                            break;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not listen for new events; idle workers poll until it works");
            }
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(RETRY_CAP);
    }
}

async fn listener(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut l = PgListener::connect_with(pool).await?;
    // sqlx's default, set because the wake-up at a lost connection relies on it: `try_recv`
    // answers `None` only once it listens again. Reconnecting lazily, on the next call, would
    // wake the pool before the new `LISTEN`, and what was committed in between would wait for
    // the poll.
    l.eager_reconnect(true);
    l.listen(CHANNEL).await?;
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::{Names, PAYLOAD_BYTES, named};

    #[test]
    fn a_payload_names_each_integration_once_and_reads_back() {
        let mut n = Names::default();
        for i in ["t/b", "t/a", "t/b"] {
            n.add(i);
        }
        let payload = n.take();
        assert_eq!(payload, "t/a\nt/b");
        assert_eq!(named(&payload).collect::<Vec<_>>(), ["t/a", "t/b"]);
        assert_eq!(n.take(), "", "taken");
        assert_eq!(named("").count(), 0, "an older receiver's empty payload");
    }

    #[test]
    fn a_payload_stays_within_its_bytes() {
        let mut n = Names::default();
        let long = "x".repeat(300);
        for i in 0..100 {
            n.add(&format!("ns-{i:03}/{long}"));
        }
        let payload = n.take();
        assert!(payload.len() <= PAYLOAD_BYTES, "{}", payload.len());
        assert_eq!(named(&payload).count(), PAYLOAD_BYTES / 308);
        n.add("t/a");
        assert_eq!(n.take(), "t/a", "room again once taken");
    }
}
