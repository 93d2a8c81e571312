//! Waking workers in other processes: PostgreSQL's LISTEN/NOTIFY on one channel.
//!
//! Workers that share a process with the receiver learn of new events through [`super::Arrivals`].
//! Workers in their own processes (the chart's receivers and workers, or `hookgate worker` beside
//! `hookgate standalone --no-workers`) would otherwise find them only at their next poll, so an
//! event's completion latency at low load included up to a poll interval. A receiver without
//! workers of its own sends one notification after events were committed for a claim, and every
//! worker listening wakes for it. Notifications carry nothing (no id, no payload) and are not
//! durable: a listener that is reconnecting misses them, and the poll stays as the fallback.

use super::Arrivals;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use std::time::Duration;
use tokio::sync::mpsc;

/// The channel receivers notify and workers listen on.
pub const CHANNEL: &str = "hookgate_inbox";

/// At most one notification per this interval and receiver: under load every batch stores events
/// for a claim, and busy workers need no wake-up; an idle one waits at most this much longer.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Reconnecting after the listening connection failed: doubling up to the cap.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_CAP: Duration = Duration::from_secs(30);

/// The receiver's end. Cheap to clone; requests that store events for a claim while a
/// notification is on its way are covered by one more, not one each. The sending task ends
/// when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct Notifier {
    wake: mpsc::Sender<()>,
}

impl Notifier {
    /// Starts the task that sends the notifications (current Tokio runtime).
    pub fn start(pool: PgPool) -> Self {
        // One waiting request for a notification is all there is to remember.
        let (wake, asked) = mpsc::channel(1);
        tokio::spawn(send(pool, asked));
        Self { wake }
    }

    /// Events were committed `pending` for a claim by another process's workers.
    pub fn stored_for_claim(&self) {
        // Full: a notification is already due, and covers this one.
        let _ = self.wake.try_send(());
    }
}

async fn send(pool: PgPool, mut asked: mpsc::Receiver<()>) {
    while asked.recv().await.is_some() {
        // A notification gives its transaction an id, so its commit would wait for a WAL flush
        // of its own beside the batches' (intake runs were lower with it: docs/performance.md,
        // round 9). A transaction that wrote nothing has nothing a crash could lose.
        if let Err(e) =
            sqlx::query("SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, '')")
                .bind(CHANNEL)
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
                        Ok(Some(_)) => arrivals.committed(),
                        // The connection dropped; the next call reconnects and listens again.
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
    l.listen(CHANNEL).await?;
    Ok(l)
}
