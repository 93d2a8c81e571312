//! Keeps the receiver's memory of committed keys in step with `hookgate dlq purge`, which runs in
//! another process: every [`DEDUPE_CACHE_CONFIRM_EVERY`] a task reads the purges the inbox
//! recorded since its last look, the memory forgets the keys they deleted, and it answers only
//! while such a confirmation is recent (`crate::inbox::recent`). The same task publishes what the
//! memory holds.

use crate::inbox::{DEDUPE_CACHE_CONFIRM_EVERY, Inbox, PurgedKeys, Recent};
use crate::metrics::Metrics;
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio::time::MissedTickBehavior;

/// Starts the task for `recent` (current Tokio runtime) unless the memory is off. The task ends
/// once the memory is dropped (the receiver, or `with_group_commit` replacing it).
pub(super) fn confirm(recent: &Arc<Recent>, inbox: Inbox, metrics: Arc<Metrics>) {
    if recent.enabled() {
        tokio::spawn(confirming(Arc::downgrade(recent), inbox, metrics));
    }
}

async fn confirming(recent: Weak<Recent>, inbox: Inbox, metrics: Arc<Metrics>) {
    let mut every = tokio::time::interval(DEDUPE_CACHE_CONFIRM_EVERY);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut evicted = 0;
    // The latest purge read so far.
    let mut seen: Option<i64> = None;
    loop {
        every.tick().await;
        if recent.strong_count() == 0 {
            return;
        }
        // Taken before the pool is asked for a connection: the answer covers every purge that
        // committed before it, and maybe later ones.
        let asked_at = Instant::now();
        let read = match seen {
            // Nothing says which purges the entries made before the first look predate.
            None => (inbox.purges_recorded().await).map(|latest| (latest, PurgedKeys::All)),
            Some(last) => (inbox.purges_after(last).await).map(|purges| {
                let latest = purges.last().map_or(last, |p| p.id);
                (latest, PurgedKeys::of(&purges))
            }),
        };
        let Some(recent) = recent.upgrade() else {
            return;
        };
        match read {
            Ok((latest, purged)) => {
                let forgotten = recent.confirm(&purged, asked_at);
                if forgotten > 0 && seen.is_some() {
                    tracing::info!(
                        forgotten,
                        "dead letters were purged: the receiver forgot the keys of theirs it remembered"
                    );
                }
                seen = Some(latest);
            }
            // The memory stops answering when its confirmation runs out; duplicates then go to
            // the inbox, which answers them or fails as the rest of the request path does.
            Err(e) => tracing::debug!(error = %e, "could not confirm the memory of committed keys"),
        }
        let usage = recent.usage();
        metrics
            .dedupe_cache_bytes
            .set(i64::try_from(usage.bytes).unwrap_or(i64::MAX));
        metrics
            .dedupe_cache_evicted
            .inc_by(usage.evicted.saturating_sub(evicted));
        evicted = usage.evicted;
    }
}
