//! The second half of a request, once it is verified and read: the event stored (handed over to
//! this process's workers when they have room, or left for a claim and announced), then counted
//! and logged by its outcome.

use super::Receiver;
use super::reply;
use crate::http::reply::Reply;
use crate::inbox::{Claimed, InsertOutcome, NewEvent, Recalled};
use crate::metrics::Metrics;
use crate::route::CompiledRoute;
use std::time::Instant;

/// What the first half read of the event, for the outcome's metrics and log line.
pub(super) struct Received<'a> {
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    /// Not a type the route delivers: stored and answered, never delivered.
    pub ignored: bool,
    /// An unsupported version: stored as a dead letter with this reason.
    pub unsupported: Option<&'a str>,
}

/// Stores `event` and answers as the insert's outcome says: nothing is 2xx before it committed.
pub(super) async fn store(
    rx: &Receiver,
    route: &CompiledRoute,
    event: NewEvent,
    received: Received<'_>,
) -> Reply {
    let key_id = event.key_id().to_string();
    let now = Instant::now();
    // Half the retention: the row cannot be gone before the entry stops answering.
    let at_most = route.delivery.retention_dedupe / 2;
    let note = match rx.recent.recall(&event, at_most, now) {
        Recalled::Duplicate => {
            rx.metrics.duplicates_remembered.inc();
            let result = Ok(InsertOutcome::Duplicate);
            let reply = reply::stored(&result, received.ignored);
            return answer(rx, route, &received, &key_id, result, reply);
        }
        Recalled::Unknown(note) => Some(note),
        Recalled::NotAsked => None,
    };
    // Leased to this process's workers while they have room: no claim has to read it back. The
    // lease runs on the wall clock, as the workers' claims do, whatever clock stamps arrivals.
    // An ignored or dead-lettered event has nothing to deliver and takes no place.
    let place = rx
        .handoff
        .as_ref()
        .filter(|_| !received.ignored && received.unsupported.is_none())
        .and_then(|h| h.reserve(&route.integration, chrono::Utc::now(), event.body_len()));
    let (event, claim) = match &place {
        Some(place) => {
            let event = event.leased(place.lease_until());
            let claim = event.claimed(0);
            (event, claim)
        }
        None => (event, None),
    };
    let result = rx.intake.insert(event).await;
    if let (Ok(InsertOutcome::Inserted { .. }), Some(note)) = (&result, note) {
        rx.recent.committed(note, Instant::now());
    }
    let reply = reply::stored(&result, received.ignored);
    match (&result, place, claim) {
        (Ok(InsertOutcome::Inserted { id }), Some(place), Some(claim)) => {
            place.send(Claimed { id: *id, ..claim });
            Metrics::count(&rx.metrics.handed_over, &route.integration);
        }
        // Only an event to deliver wakes the workers; a dead-lettered version has nothing for
        // them. (A place not used is given back when dropped.)
        _ => {
            if let (Reply::Accepted, None) = (reply, received.unsupported) {
                if let Some(handoff) = &rx.handoff {
                    handoff.stored_for_claim(&route.integration);
                }
                if let Some(notifier) = &rx.notifier {
                    notifier.stored_for_claim(&route.integration);
                }
            }
        }
    }
    answer(rx, route, &received, &key_id, result, reply)
}

/// Counts and logs the outcome; `reply` is the request's answer, which it returns.
fn answer(
    rx: &Receiver,
    route: &CompiledRoute,
    received: &Received<'_>,
    key_id: &str,
    result: crate::inbox::Result<InsertOutcome>,
    reply: Reply,
) -> Reply {
    if reply == Reply::Duplicate {
        Metrics::count(&rx.metrics.duplicates, &route.integration);
    }
    match result {
        Ok(InsertOutcome::Inserted { .. }) if received.unsupported.is_some() => {
            // Counted with the workers' dead letters: the same alert and panels see it.
            rx.metrics.delivery(&route.integration, "dead_letter");
        }
        Ok(InsertOutcome::Conflict) => {
            Metrics::count(&rx.metrics.dedupe_conflicts, &route.integration);
            tracing::warn!(
                integration = %route.integration,
                event_id = %received.event_id,
                "dedupe conflict: a known event id arrived with a different body; kept the first"
            );
        }
        Err(e) => {
            tracing::error!(integration = %route.integration, error = %e, "inbox insert failed");
        }
        Ok(_) => {}
    }
    // One line per stored or deduplicated event; never the body, headers or signature.
    if matches!(reply, Reply::Accepted | Reply::Ignored | Reply::Duplicate) {
        tracing::info!(
            integration = %route.integration,
            event_id = %received.event_id,
            event_type = received.event_type.unwrap_or("-"),
            key_id = %key_id,
            outcome = reply.outcome(),
            dead_letter = received.unsupported.unwrap_or("-"),
            "event received"
        );
    }
    reply
}
