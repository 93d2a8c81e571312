//! The claims a pool's delivery tasks hold, so that a stopping pool can release those its grace
//! period cut off.
//!
//! Kept per claim (row and lease), not per row: a row whose lease ran out while its delivery was
//! still recording the outcome may be claimed again by the same pool, and the first task's end
//! must not drop the entry of the second claim. Kept per row, it did: the second delivery, if
//! cut off at shutdown, was not released and waited for its lease to run out.

use crate::inbox::Claimed;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A claim: its row and the lease it set (a later claim of the row sets a later one).
type Key = (i64, DateTime<Utc>);

/// Shared by the pool and its delivery tasks. Cheap to clone.
#[derive(Clone, Default)]
pub(super) struct InFlight(Arc<Mutex<HashMap<Key, Claimed>>>);

impl InFlight {
    /// `claim`'s delivery started (its payload is not kept).
    pub fn started(&self, claim: &Claimed) {
        self.lock()
            .insert((claim.id, claim.lease_until), claim.lease_only());
    }

    /// The delivery of the claim of row `id` leased until `lease_until` ended.
    pub fn ended(&self, id: i64, lease_until: DateTime<Utc>) {
        self.lock().remove(&(id, lease_until));
    }

    /// The claims whose deliveries have not ended, taken out.
    pub fn take(&self) -> Vec<Claimed> {
        self.lock().drain().map(|(_, c)| c).collect()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Claimed>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::InFlight;
    use crate::inbox::{Claimed, StoredHeaders};
    use chrono::{DateTime, TimeDelta, Utc};

    fn claim(id: i64, attempt: i64, lease_until: DateTime<Utc>) -> Claimed {
        Claimed {
            id,
            integration: "t/a".into(),
            event_id: format!("e{id}"),
            event_type: None,
            headers: StoredHeaders::none(),
            content_type: None,
            body: bytes::Bytes::from_static(b"{}"),
            attempt,
            lease_until,
            received_at: lease_until,
            signed_at: None,
            due_at: None,
        }
    }

    fn leases(claims: &[Claimed]) -> Vec<(i64, i64)> {
        let mut l: Vec<_> = claims.iter().map(|c| (c.id, c.attempt)).collect();
        l.sort();
        l
    }

    #[test]
    fn a_delivery_that_ends_takes_only_its_own_claim_out() {
        let t = Utc::now();
        let f = InFlight::default();
        f.started(&claim(1, 1, t));
        f.started(&claim(2, 1, t));
        f.ended(1, t);
        assert_eq!(leases(&f.take()), [(2, 1)]);
        assert!(f.take().is_empty(), "taken out");
    }

    #[test]
    fn the_first_claims_end_leaves_a_second_claim_of_the_same_row_in_flight() {
        let t = Utc::now();
        let later = t + TimeDelta::seconds(61);
        let f = InFlight::default();
        f.started(&claim(7, 1, t));
        // Its lease ran out while the outcome was being recorded: claimed again, attempt 2.
        f.started(&claim(7, 2, later));
        f.ended(7, t);
        assert_eq!(
            leases(&f.take()),
            [(7, 2)],
            "the second claim is still held"
        );
    }

    #[test]
    fn the_payload_is_not_kept() {
        let f = InFlight::default();
        f.started(&claim(1, 1, Utc::now()));
        assert!(f.take()[0].body.is_empty());
    }
}
