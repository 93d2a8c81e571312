//! When each key last verified an event the inbox stored (`key_usage`, one row per integration and
//! key): the controller's `lastUsedAt` and `lastReceivedAt`, read by primary key.
//!
//! Until round 12 (docs/performance.md) the controller found them with a pass over every row the
//! integration keeps, every 30 s, about 9 µs of PostgreSQL per retained event. An index that could
//! answer instead (`received_at` per key) costs every insert, claim and completion an entry of a
//! kind PostgreSQL cannot deduplicate, and the request path pays it (measured: +38k instructions in
//! index maintenance per event). So the receiver notes in memory the latest use of each key among
//! the events it committed, and writes those few rows every [`FLUSH_EVERY`] and when it stops,
//! off the request path. A receiver that dies without stopping loses at most that much of the
//! record; the key's next event writes it again. Catch-up writes its own use (key id `""`) with the
//! events it stores.

use super::{Inbox, InsertOutcome, NewEvent, Result};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How long a key's use may wait in memory before it is written.
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// The latest use of each key not written yet, by integration and key id: two maps so that a key
/// already noted is found by `&str`, without building a key.
type Uses = HashMap<String, HashMap<String, DateTime<Utc>>>;
type Seen = Mutex<Uses>;

/// The receiver's note of key use. Cheap to clone; every clone writes through the same task.
#[derive(Clone)]
pub(crate) struct KeyUse {
    inbox: Inbox,
    seen: Arc<Seen>,
}

impl KeyUse {
    /// Starts the writing task on the current Tokio runtime; it ends once the last handle is gone
    /// (what was noted after the last write is written only by [`KeyUse::flush`]).
    pub(crate) fn start(inbox: Inbox) -> Self {
        let seen: Arc<Seen> = Arc::default();
        tokio::spawn(write_every(inbox.clone(), Arc::downgrade(&seen)));
        Self { inbox, seen }
    }

    /// Notes the key of each event that `outcomes` says was stored.
    pub(crate) fn committed(&self, events: &[NewEvent], outcomes: &[Result<InsertOutcome>]) {
        let mut seen = self.seen.lock().expect("never poisoned");
        for (ev, outcome) in events.iter().zip(outcomes) {
            if matches!(outcome, Ok(InsertOutcome::Inserted { .. })) {
                note(&mut seen, &ev.integration, &ev.key_id, ev.received_at);
            }
        }
    }

    /// Writes what was noted so far (the receiver calls it once it stopped taking requests).
    pub(crate) async fn flush(&self) {
        flush(&self.inbox, &self.seen).await;
    }
}

fn note(seen: &mut Uses, integration: &str, key_id: &str, at: DateTime<Utc>) {
    let keys = match seen.get_mut(integration) {
        Some(keys) => keys,
        None => seen.entry(integration.to_string()).or_default(),
    };
    match keys.get_mut(key_id) {
        Some(last) => *last = (*last).max(at),
        None => {
            keys.insert(key_id.to_string(), at);
        }
    }
}

async fn write_every(inbox: Inbox, seen: Weak<Seen>) {
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(seen) = seen.upgrade() else { return };
        flush(&inbox, &seen).await;
    }
}

/// Writes the noted uses; on failure puts them back (keeping the later of two) for the next try.
async fn flush(inbox: &Inbox, seen: &Seen) {
    let taken = std::mem::take(&mut *seen.lock().expect("never poisoned"));
    if taken.is_empty() {
        return;
    }
    let uses: Vec<_> = taken
        .iter()
        .flat_map(|(i, keys)| keys.iter().map(move |(k, t)| (i.as_str(), k.as_str(), *t)))
        .collect();
    if let Err(e) = inbox.record_key_use(&uses).await {
        tracing::warn!(error = %e, keys = uses.len(), "could not record key use; trying again shortly");
        let mut seen = seen.lock().expect("never poisoned");
        for (i, k, t) in uses {
            note(&mut seen, i, k, t);
        }
    }
}

const RECORD_PG: &str = "INSERT INTO key_usage (integration, key_id, last_used_at) \
     SELECT * FROM UNNEST($1::text[], $2::text[], $3::timestamptz[]) \
     ON CONFLICT (integration, key_id) DO UPDATE SET last_used_at = excluded.last_used_at \
     WHERE key_usage.last_used_at < excluded.last_used_at";

const RECORD_SQLITE: &str = "INSERT INTO key_usage (integration, key_id, last_used_at) \
     VALUES ($1, $2, $3) \
     ON CONFLICT (integration, key_id) DO UPDATE SET last_used_at = excluded.last_used_at \
     WHERE key_usage.last_used_at < excluded.last_used_at";

const KEYS_LAST_USED: &str = "SELECT key_id, last_used_at FROM key_usage WHERE integration = $1";

impl Inbox {
    /// Records that each `(integration, key id)` verified a stored event at that instant; an
    /// earlier instant than the one recorded changes nothing.
    pub async fn record_key_use(&self, uses: &[(&str, &str, DateTime<Utc>)]) -> Result<()> {
        match self {
            Inbox::Postgres(pool) => {
                sqlx::query(RECORD_PG)
                    .bind(uses.iter().map(|u| u.0).collect::<Vec<_>>())
                    .bind(uses.iter().map(|u| u.1).collect::<Vec<_>>())
                    .bind(uses.iter().map(|u| u.2).collect::<Vec<_>>())
                    .execute(pool)
                    .await?;
            }
            Inbox::Sqlite(pool) => {
                let mut tx = pool.begin().await?;
                for (integration, key_id, at) in uses {
                    sqlx::query(RECORD_SQLITE)
                        .bind(integration)
                        .bind(key_id)
                        .bind(at)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
            }
        }
        Ok(())
    }

    /// When each key last verified a stored event of `integration`.
    pub async fn keys_last_used(
        &self,
        integration: &str,
    ) -> Result<HashMap<String, DateTime<Utc>>> {
        backend!(self, pool => {
            let rows: Vec<(String, DateTime<Utc>)> =
                sqlx::query_as(KEYS_LAST_USED).bind(integration).fetch_all(pool).await?;
            Ok(rows.into_iter().collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000 + s, 0).unwrap()
    }

    #[test]
    fn a_key_keeps_its_latest_use_whatever_the_order() {
        let mut seen = HashMap::new();
        note(&mut seen, "pay/stripe", "v1", at(5));
        note(&mut seen, "pay/stripe", "v1", at(3));
        note(&mut seen, "pay/stripe", "v2", at(4));
        note(&mut seen, "ops/github", "v1", at(1));
        note(&mut seen, "pay/stripe", "v1", at(9));
        assert_eq!(seen.values().map(HashMap::len).sum::<usize>(), 3);
        assert_eq!(seen["pay/stripe"]["v1"], at(9));
        assert_eq!(seen["pay/stripe"]["v2"], at(4));
        assert_eq!(seen["ops/github"]["v1"], at(1));
    }
}
