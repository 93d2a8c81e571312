//! Forgetting ordering versions that stopped moving: a `resource_versions` row per resource an
//! ordered integration ever delivered (a version per Stripe customer or subscription ever seen)
//! that has not moved for the integration's dedupe window, and that no worker holds.
//!
//! No index reads `updated_at`: one would make every version advance on the delivery path a
//! non-HOT update. So a pass walks the table once for every integration, in the order its rows
//! lie on disk, a stretch at a time, each stretch its own statement: a delivery that takes the
//! lease of a resource being forgotten waits for one stretch at most, and SQLite's one writer is
//! free between them. Until round 39 each integration's due versions went in one statement
//! (475 ms for 500,000 of 1,000,000 on this machine), holding each until the end. Walking the
//! primary key in batches instead cost 7-8 times as much in all (its order is not the table's).
//!
//! A stretch that waits for a row another transaction holds for as long as the statement timeout
//! is left for the next pass and the walk goes on, up to [`SKIPPED_STRETCHES_MAX`] of them; any
//! other failure ends the walk. Until round 40 the first ended it, and with it the rest of the
//! pass. Only the wait is bounded (`lock_timeout`, in a [`super::maintenance`] transaction): until
//! round 47 a stretch slow under load, with nothing to wait for, was left as if a row were held.

use super::{Error, Inbox, NEVER_STOPS, Stop};
use chrono::{DateTime, SecondsFormat, Utc};

/// Pages of `resource_versions` one PostgreSQL statement walks: about 5,000 versions.
pub const VERSIONS_PAGES: i64 = 100;
/// Rowids one SQLite statement walks.
pub const VERSIONS_ROWIDS: i64 = 5000;
/// Stretches a walk leaves for a held row before it leaves the rest too: each waited for the
/// statement timeout, and a transaction that holds rows all over the table holds them all.
pub const SKIPPED_STRETCHES_MAX: u32 = 3;

/// What a walk forgot, and the first failure of a stretch, if one failed: its versions, and those
/// of every stretch the walk did not reach, wait for the next pass.
#[derive(Debug, Default)]
pub struct Forgotten {
    pub versions: u64,
    pub failed: Option<Error>,
}

impl Forgotten {
    fn failed(mut self, e: sqlx::Error) -> Self {
        self.failed = Some(e.into());
        self
    }

    /// Adds a stretch's outcome; `false` once the walk should stop.
    fn add(&mut self, stretch: Result<u64, Error>, skipped: &mut u32) -> bool {
        match stretch {
            Ok(n) => {
                self.versions += n;
                true
            }
            Err(e) => {
                let go_on = e.is_lock_wait() && *skipped < SKIPPED_STRETCHES_MAX;
                *skipped += 1;
                self.failed.get_or_insert(e);
                go_on
            }
        }
    }
}

/// The table's pages when the pass starts; rows written after it are not due.
const PAGES_PG: &str =
    "SELECT pg_relation_size('resource_versions') / current_setting('block_size')::int8";

/// The due versions in pages `$3` to `$4` (excluded), each against its integration's cutoff
/// (`$1`, `$2`: names and instants, in the same order); not held by a worker at `$5`.
/// PostgreSQL re-checks the filter on a row a delivery changed meanwhile.
pub const STRETCH_PG: &str = "DELETE FROM resource_versions v \
     USING unnest($1::text[], $2::timestamptz[]) AS c(integration, before) \
     WHERE v.ctid >= format('(%s,0)', $3::int8)::tid AND v.ctid < format('(%s,0)', $4::int8)::tid \
     AND v.integration = c.integration AND v.updated_at < c.before \
     AND (v.locked_until IS NULL OR v.locked_until <= $5)";

const ROWIDS_SQLITE: &str = "SELECT COALESCE(max(rowid), 0) FROM resource_versions";

/// The same in rowids `$1` (excluded) to `$2`; `$4` holds `[[name, instant], ...]`, the
/// instants in the form sqlx stores them, so that they compare as the stored text does.
const STRETCH_SQLITE: &str = "DELETE FROM resource_versions \
     WHERE rowid > $1 AND rowid <= $2 AND (locked_until IS NULL OR locked_until <= $3) \
     AND updated_at < (SELECT c.value ->> 1 FROM json_each($4) c \
     WHERE c.value ->> 0 = resource_versions.integration)";

impl Inbox {
    /// Forgets the stored version of every resource of each integration in `unchanged_before`
    /// whose version has not moved since that integration's instant and which no worker holds at
    /// `now`: an event of that resource is then gated as its first. Other integrations' versions
    /// stay.
    pub async fn forget_versions(
        &self,
        unchanged_before: &[(String, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> Forgotten {
        self.forget_versions_until(unchanged_before, now, NEVER_STOPS)
            .await
    }

    /// [`Inbox::forget_versions`], asking `stop` before each stretch: a walk asked to stop ends
    /// with the stretches it committed, and the rest waits for the next pass.
    pub async fn forget_versions_until(
        &self,
        unchanged_before: &[(String, DateTime<Utc>)],
        now: DateTime<Utc>,
        stop: Stop<'_>,
    ) -> Forgotten {
        let mut forgotten = Forgotten::default();
        if unchanged_before.is_empty() {
            return forgotten;
        }
        let mut skipped = 0;
        match self {
            Inbox::Postgres(pool) => {
                let (names, before): (Vec<&str>, Vec<DateTime<Utc>>) = unchanged_before
                    .iter()
                    .map(|(i, b)| (i.as_str(), *b))
                    .unzip();
                let pages = match sqlx::query_scalar::<_, i64>(PAGES_PG).fetch_one(pool).await {
                    Ok(pages) => pages,
                    Err(e) => return forgotten.failed(e),
                };
                for start in (0..pages).step_by(VERSIONS_PAGES as usize) {
                    if stop() {
                        break;
                    }
                    let stretch = async {
                        let mut tx = super::maintenance(pool).await?;
                        let n = sqlx::query(STRETCH_PG)
                            .bind(&names)
                            .bind(&before)
                            .bind(start)
                            .bind(start + VERSIONS_PAGES)
                            .bind(now)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                        tx.commit().await?;
                        Ok::<_, sqlx::Error>(n)
                    };
                    let stretch = stretch.await.map_err(Error::from);
                    if !forgotten.add(stretch, &mut skipped) {
                        break;
                    }
                }
            }
            Inbox::Sqlite(pool) => {
                let cutoffs: Vec<(&str, String)> = unchanged_before
                    .iter()
                    .map(|(i, b)| (i.as_str(), b.to_rfc3339_opts(SecondsFormat::AutoSi, false)))
                    .collect();
                let cutoffs = serde_json::to_string(&cutoffs).expect("strings serialize");
                let last = match sqlx::query_scalar::<_, i64>(ROWIDS_SQLITE)
                    .fetch_one(pool)
                    .await
                {
                    Ok(last) => last,
                    Err(e) => return forgotten.failed(e),
                };
                for start in (0..last).step_by(VERSIONS_ROWIDS as usize) {
                    if stop() {
                        break;
                    }
                    let stretch = sqlx::query(STRETCH_SQLITE)
                        .bind(start)
                        .bind(start + VERSIONS_ROWIDS)
                        .bind(now)
                        .bind(&cutoffs)
                        .execute(pool)
                        .await;
                    let stretch = stretch.map(|r| r.rows_affected()).map_err(Error::from);
                    if !forgotten.add(stretch, &mut skipped) {
                        break;
                    }
                }
            }
        }
        forgotten
    }
}
