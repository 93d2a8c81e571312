//! Claiming due events as leases: the statements (each walks partial indexes, never the inbox)
//! and the rows they return. What a worker does with a claim is in `delivery`.

use super::Inbox;
use super::Result;
use chrono::{DateTime, Utc};
use sqlx::Row;

/// An event leased to this worker until `locked_until`.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: i64,
    pub integration: String,
    pub event_id: String,
    pub event_type: Option<String>,
    /// `[[name, value], ...]` as stored by the receiver.
    pub headers: super::StoredHeaders,
    pub content_type: Option<String>,
    /// Shared, not copied, from the receiver's request to the destination's (a hand-over and
    /// each attempt's request take a reference).
    pub body: bytes::Bytes,
    /// 1-based number of the attempt this claim is for; with `lease_until`, the fencing token.
    pub attempt: i64,
    /// The lease deadline this claim set, as stored. A later claim of the same row sets a later
    /// one, even when a replay has brought the attempt number back to the same value.
    pub lease_until: DateTime<Utc>,
    pub received_at: DateTime<Utc>,
    pub signed_at: Option<DateTime<Utc>>,
    /// When the event was due (`next_attempt_at` before this claim): where a worker's next
    /// [`Inbox::claim_due_from`] may start.
    pub due_at: Option<DateTime<Utc>>,
}

impl Claimed {
    /// The claim without its payload (body, headers): enough to complete or release it.
    pub fn lease_only(&self) -> Claimed {
        Claimed {
            id: self.id,
            integration: self.integration.clone(),
            event_id: self.event_id.clone(),
            event_type: self.event_type.clone(),
            headers: super::StoredHeaders::none(),
            content_type: None,
            body: bytes::Bytes::new(),
            attempt: self.attempt,
            lease_until: self.lease_until,
            received_at: self.received_at,
            signed_at: self.signed_at,
            due_at: self.due_at,
        }
    }

    /// Frees the payload once it has been sent; the claim stays usable for completion.
    pub fn shed_payload(&mut self) {
        self.body = bytes::Bytes::new();
        self.headers = super::StoredHeaders::none();
        self.content_type = None;
    }
}

/// What a claim sets and returns, the same for every claim.
macro_rules! claim_update {
    () => {
        concat!(
            "UPDATE inbox_events SET status = 'processing', locked_until = $1, attempts = attempts + 1 ",
            "WHERE id IN (SELECT id FROM (SELECT id FROM expired UNION ALL SELECT id FROM due) AS c LIMIT $3) ",
            "RETURNING id, integration, event_id, event_type, headers, content_type, body, ",
            "attempts, locked_until, received_at, signed_at, next_attempt_at"
        )
    };
}

/// Rows whose lease expired, oldest expiry first, walking the lease index (`$lock`: the
/// backend's row lock). A claim that looks for none names this CTE with a false condition.
macro_rules! expired_cte {
    ($lock:literal, $when:literal) => {
        concat!(
            "expired AS (SELECT id FROM inbox_events ",
            "WHERE status = 'processing' AND locked_until <= $2",
            $when,
            " ORDER BY locked_until LIMIT $3",
            $lock,
            ")"
        )
    };
}

/// The integrations with waiting (pending or retry) events, one index probe each: each step
/// looks up the first entry of `inbox_events_waiting` past the last name found. The order names
/// both of its columns so that no other index can serve it: an index led by `integration` over
/// every event (`inbox_events_status` until migration 0010) would walk every event an integration
/// keeps for retention to find that it has none waiting.
macro_rules! waiting_cte {
    () => {
        concat!(
            "waiting(integration) AS (",
            "SELECT (SELECT integration FROM inbox_events WHERE status IN ('pending', 'retry') ",
            "ORDER BY integration, next_attempt_at LIMIT 1) ",
            "UNION ALL SELECT (SELECT e.integration FROM inbox_events e ",
            "WHERE e.status IN ('pending', 'retry') AND e.integration > w.integration ",
            "ORDER BY e.integration, e.next_attempt_at LIMIT 1) FROM waiting w ",
            "WHERE w.integration IS NOT NULL)"
        )
    };
}

/// The due events of the integrations of `$from` (rows of `integration`, `from_at`) in turns,
/// `$3` of them: each integration's oldest first, `$4` listing the integrations recent claims
/// served, least recently first. `seen` reads up to `$cap` of each integration's due events
/// without locking them, `quota` counts how many of each the turns take, and only those are
/// locked: locking `$3` of every integration (the first version) wrote a lock for each, 136 kB
/// of WAL per claim with 50 integrations waiting against 56 kB for the claim alone. The lock
/// skips the rows another worker's claim holds and takes the integration's next ones instead, so
/// that concurrent workers take different events.
macro_rules! heads_pg {
    ($from:literal, $cap:literal) => {
        concat!(
            "seen AS (SELECT c.integration, c.from_at, h.next_attempt_at, row_number() OVER ",
            "(PARTITION BY c.integration ORDER BY h.next_attempt_at, h.id) AS turn, ",
            "array_position(CAST($4 AS TEXT[]), c.integration) AS served FROM ",
            $from,
            " CROSS JOIN LATERAL (SELECT e.id, e.next_attempt_at FROM inbox_events e ",
            "WHERE e.integration = c.integration AND e.status IN ('pending', 'retry') ",
            "AND e.next_attempt_at <= $2 AND e.next_attempt_at >= c.from_at ",
            "ORDER BY e.next_attempt_at LIMIT ",
            $cap,
            ") AS h), ",
            "quota AS (SELECT integration, from_at, count(*) AS n FROM (SELECT integration, ",
            "from_at FROM seen ORDER BY turn, served NULLS FIRST, next_attempt_at, integration ",
            "LIMIT $3) AS s GROUP BY integration, from_at), ",
            "due AS (SELECT h.id FROM quota AS q CROSS JOIN LATERAL (SELECT e.id ",
            "FROM inbox_events e WHERE e.integration = q.integration ",
            "AND e.status IN ('pending', 'retry') AND e.next_attempt_at <= $2 ",
            "AND e.next_attempt_at >= q.from_at ORDER BY e.next_attempt_at LIMIT q.n ",
            "FOR UPDATE SKIP LOCKED) AS h) "
        )
    };
}

/// A claim takes the integrations' due events in turns: the oldest of each integration first,
/// then the second of each, and so on. Within a turn, the integrations recent claims served least
/// recently go first (those they did not serve at all before them; then the oldest event), so
/// that claims of a slot or two at a time take turns too. Oldest first across all integrations,
/// one integration's backlog of a million events held back every other integration's events until
/// it was delivered (docs/performance.md, round 33).
///
/// A full claim finds every integration with waiting events and starts at each one's oldest,
/// and takes expired leases first. Each lookup walks an index and stops at its limit, so a claim
/// costs the same with 40 or 40 million rows waiting (one `OR` across both conditions made
/// PostgreSQL scan and sort the whole table on every claim). Public so a test can check its plan.
pub const CLAIM_PG: &str = concat!(
    "WITH RECURSIVE ",
    expired_cte!(" FOR UPDATE SKIP LOCKED", ""),
    ", ",
    waiting_cte!(),
    ", ",
    heads_pg!(
        "(SELECT integration, CAST('-infinity' AS TIMESTAMPTZ) AS from_at FROM waiting WHERE integration IS NOT NULL) AS c",
        "$3"
    ),
    claim_update!()
);

/// The claim a busy worker makes between full ones: only the integrations its claims served
/// lately (`worker::cursor`), each from the oldest due time it last claimed of it (`$5`, `$6`:
/// names and times), reading at most `$7` of each ([`seen_per_integration`]), and no expired
/// leases. A claimed row keeps its entry in the index (pointing at a dead version) until VACUUM
/// reaches the table, and those entries pile up at each integration's oldest end: a claim that
/// always starts there walks every event processed since the last vacuum (100,000 of them cost a
/// claim 1.5 ms instead of 0.1 ms, measured), which slowed delivery the longer a backlog lasted.
/// Starting at the oldest row a worker last claimed skips them. Rows due before that point (an
/// insert that committed late, a lease that expired), and integrations not served lately, are
/// found by the full claim the pool still makes every second. Public so a test can check its
/// plan.
pub const CLAIM_FROM_PG: &str = concat!(
    "WITH ",
    expired_cte!("", " AND false"),
    ", ",
    heads_pg!(
        "unnest(CAST($5 AS TEXT[]), CAST($6 AS TIMESTAMPTZ[])) AS c(integration, from_at)",
        "$7"
    ),
    claim_update!()
);

/// SQLite has one writer at a time, so the single UPDATE statement is atomic without row locks,
/// and it rewrites index entries in place: no dead entries to skip, so every claim finds every
/// waiting integration. It has no `LATERAL`: each integration's events are a correlated
/// subquery's.
macro_rules! claim_sqlite {
    ($when:literal) => {
        concat!(
            "WITH RECURSIVE ",
            expired_cte!("", $when),
            ", ",
            waiting_cte!(),
            ", heads AS (SELECT e.id, e.next_attempt_at, row_number() OVER ",
            "(PARTITION BY e.integration ORDER BY e.next_attempt_at, e.id) AS turn, ",
            "(SELECT CAST(s.key AS INTEGER) FROM json_each($4) AS s WHERE s.value = w.integration) ",
            "AS served FROM waiting w JOIN inbox_events e ON e.id IN (SELECT x.id ",
            "FROM inbox_events x WHERE x.integration = w.integration ",
            "AND x.status IN ('pending', 'retry') AND x.next_attempt_at <= $2 ",
            "ORDER BY x.next_attempt_at LIMIT $3)), ",
            "due AS (SELECT id FROM heads ",
            "ORDER BY turn, served NULLS FIRST, next_attempt_at, id LIMIT $3) ",
            claim_update!()
        )
    };
}

const CLAIM_SQLITE: &str = claim_sqlite!("");
const CLAIM_FROM_SQLITE: &str = claim_sqlite!(" AND 0");

/// The claimed rows, as either backend returns them (a macro: each backend's row type).
macro_rules! claimed_rows {
    ($rows:expr) => {
        $rows
            .iter()
            .map(|r| {
                let headers: sqlx::types::Json<Box<serde_json::value::RawValue>> =
                    r.try_get("headers")?;
                Ok(Claimed {
                    id: r.try_get("id")?,
                    integration: r.try_get("integration")?,
                    event_id: r.try_get("event_id")?,
                    event_type: r.try_get("event_type")?,
                    headers: headers.0.into(),
                    content_type: r.try_get("content_type")?,
                    body: r.try_get::<Vec<u8>, _>("body")?.into(),
                    attempt: r.try_get("attempts")?,
                    lease_until: r.try_get("locked_until")?,
                    received_at: r.try_get("received_at")?,
                    signed_at: r.try_get("signed_at")?,
                    due_at: r.try_get("next_attempt_at")?,
                })
            })
            .collect::<Result<Vec<Claimed>>>()
    };
}

impl Inbox {
    /// Leases up to `limit` due events (and events whose previous lease expired) until
    /// `lease_until`, the integrations' events in turns.
    pub async fn claim(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Claimed>> {
        self.claim_after(now, lease_until, limit, &[]).await
    }

    /// Like [`Inbox::claim`], with the integrations recent claims `served`, least recently
    /// first: within a turn, an integration not listed goes first, then in that order.
    pub async fn claim_after(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
        served: &[String],
    ) -> Result<Vec<Claimed>> {
        self.claim_turns(now, lease_until, limit, served, None)
            .await
    }

    /// Like [`Inbox::claim_after`], but only the integrations of `from`, each from its due time
    /// there on, and no expired leases: the claim a busy worker makes between full ones (see
    /// [`CLAIM_FROM_PG`]).
    pub async fn claim_due_from(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
        served: &[String],
        from: &[(String, DateTime<Utc>)],
    ) -> Result<Vec<Claimed>> {
        self.claim_turns(now, lease_until, limit, served, Some(from))
            .await
    }

    /// The full claim, or with `from` the claim from those cursors.
    async fn claim_turns(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
        served: &[String],
        from: Option<&[(String, DateTime<Utc>)]>,
    ) -> Result<Vec<Claimed>> {
        match self {
            Inbox::Postgres(pool) => {
                let sql = if from.is_some() {
                    CLAIM_FROM_PG
                } else {
                    CLAIM_PG
                };
                let q = sqlx::query(sql)
                    .bind(lease_until)
                    .bind(now)
                    .bind(limit)
                    .bind(served);
                let q = match from {
                    Some(from) => {
                        let (names, times): (Vec<&str>, Vec<DateTime<Utc>>) =
                            from.iter().map(|(name, at)| (name.as_str(), *at)).unzip();
                        let cap = seen_per_integration(limit, from.len());
                        q.bind(names).bind(times).bind(cap)
                    }
                    None => q,
                };
                let rows = q.fetch_all(pool).await?;
                claimed_rows!(rows)
            }
            // SQLite needs no cursors: see `claim_sqlite!`.
            Inbox::Sqlite(pool) => {
                let sql = if from.is_some() {
                    CLAIM_FROM_SQLITE
                } else {
                    CLAIM_SQLITE
                };
                let rows = sqlx::query(sql)
                    .bind(lease_until)
                    .bind(now)
                    .bind(limit)
                    .bind(json_list(served))
                    .fetch_all(pool)
                    .await?;
                claimed_rows!(rows)
            }
        }
    }
}

/// How many due events of each of `integrations` a claim of `limit` reads before it takes turns:
/// twice an even share, so that an integration may take the turns another has no events for,
/// without reading `limit` events of every integration (with 50 of them waiting, that read took a
/// claim from 1.5 to 4.8 ms). All of them when one or two integrations are looked at. A claim
/// that reads too few of one comes back short, and the pool claims again at once.
pub fn seen_per_integration(limit: i64, integrations: usize) -> i64 {
    let n = i64::try_from(integrations.max(1)).unwrap_or(i64::MAX);
    limit.min(limit.div_euclid(n).saturating_add(1).saturating_mul(2))
}

/// A list of names as a JSON array, for SQLite's `json_each`.
fn json_list(names: &[String]) -> String {
    serde_json::to_string(names).expect("a list of strings serializes")
}

#[cfg(test)]
mod tests {
    use super::seen_per_integration;

    #[test]
    fn a_claim_reads_all_of_one_or_two_integrations_and_twice_a_share_of_more() {
        assert_eq!(seen_per_integration(32, 1), 32);
        assert_eq!(seen_per_integration(32, 2), 32);
        assert_eq!(seen_per_integration(32, 10), 8);
        assert_eq!(seen_per_integration(32, 50), 2);
        assert_eq!(seen_per_integration(8, 3), 6);
        assert_eq!(seen_per_integration(1, 64), 1, "never more than the claim");
        assert_eq!(
            seen_per_integration(8, 0),
            8,
            "no integration: no read either way"
        );
    }
}
