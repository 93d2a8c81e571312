//! Keeps the receiver's memory of committed keys in step with `hookgate dlq purge`, which runs in
//! another process: a task asks the inbox how many purges it recorded, every
//! [`DEDUPE_CACHE_CONFIRM_EVERY`], and the memory forgets everything when that number moved and
//! answers only while such a confirmation is recent (`crate::inbox::recent`).

use crate::inbox::{DEDUPE_CACHE_CONFIRM_EVERY, Inbox, Recent};
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio::time::MissedTickBehavior;

/// Starts the task for `recent` (current Tokio runtime) unless the memory is off. The task ends
/// once the memory is dropped (the receiver, or `with_group_commit` replacing it).
pub(super) fn confirm(recent: &Arc<Recent>, inbox: Inbox) {
    if recent.enabled() {
        tokio::spawn(confirming(Arc::downgrade(recent), inbox));
    }
}

async fn confirming(recent: Weak<Recent>, inbox: Inbox) {
    let mut every = tokio::time::interval(DEDUPE_CACHE_CONFIRM_EVERY);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if recent.strong_count() == 0 {
            return;
        }
        // Taken before the pool is asked for a connection: the answer covers every purge that
        // committed before it, and maybe later ones.
        let asked_at = Instant::now();
        let purges = inbox.purges_recorded().await;
        let Some(recent) = recent.upgrade() else {
            return;
        };
        match purges {
            Ok(purges) => {
                let forgotten = recent.confirm(purges, asked_at);
                if forgotten > 0 {
                    tracing::info!(
                        forgotten,
                        "dead letters were purged: the receiver forgot the keys it committed recently"
                    );
                }
            }
            // The memory stops answering when its confirmation runs out; duplicates then go to
            // the inbox, which answers them or fails as the rest of the request path does.
            Err(e) => tracing::debug!(error = %e, "could not confirm the memory of committed keys"),
        }
    }
}
