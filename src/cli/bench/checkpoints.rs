//! Whether a PostgreSQL checkpoint ran while a phase did. With the default `max_wal_size` (1 GB)
//! the bench's longer write phases (pgbench's, the pipeline's) start one every 15-18 s on this
//! machine, each spreading its writes over most of that (`checkpoint_completion_target` 0.9) and
//! ending with an fsync of every data file it wrote, up to 0.67 s of them in round 46's first
//! run, on the disk whose WAL flushes every commit waits for. The bench checkpoints before each
//! phase it empties the inbox for, and the intake's phases write far less WAL than starts one,
//! so they rarely meet one; a server with a smaller `max_wal_size`, or other databases writing,
//! changes that. The phase's figures stand as measured; the report says when it met one.

use super::background::at_either_end;
use sqlx::PgPool;

/// The checkpointer's counters, cluster-wide, at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// Checkpoints begun so far, timed and requested (the checkpointer reports its count while
    /// the checkpoint writes, before it ends).
    begun: i64,
    /// Milliseconds the checkpoints that ended so far spent in their fsyncs.
    sync_ms: f64,
    /// Where the last checkpoint that ended begins its redo (the control file's, written as a
    /// checkpoint ends); `None` when this role may not read it.
    last: Option<String>,
    /// Whether the checkpointer was at work (not waiting for its next checkpoint); `None` when
    /// this role may not see other processes' wait events.
    at_work: Option<bool>,
}

/// PostgreSQL 17 moved the counters from `pg_stat_bgwriter` to `pg_stat_checkpointer`.
const COUNTERS_BEFORE_17: &str = "SELECT (checkpoints_timed + checkpoints_req)::int8, \
     checkpoint_sync_time::float8 FROM pg_stat_bgwriter";
const COUNTERS_SINCE_17: &str =
    "SELECT (num_timed + num_requested)::int8, sync_time::float8 FROM pg_stat_checkpointer";

/// The checkpointer waits on `CheckpointerMain` between checkpoints; while one runs it writes
/// (`CheckpointWriteDelay` between writes) or syncs.
const AT_WORK: &str = "SELECT wait_event IS DISTINCT FROM 'CheckpointerMain' \
     FROM pg_stat_activity WHERE backend_type = 'checkpointer' \
     AND pg_has_role('pg_read_all_stats', 'USAGE')";

const LAST: &str = "SELECT redo_lsn::text FROM pg_control_checkpoint()";

pub async fn seen(pool: &PgPool) -> Result<Seen, sqlx::Error> {
    let version: i32 = sqlx::query_scalar("SELECT current_setting('server_version_num')::int4")
        .fetch_one(pool)
        .await?;
    let counters = if version >= 170000 {
        COUNTERS_SINCE_17
    } else {
        COUNTERS_BEFORE_17
    };
    let (begun, sync_ms): (i64, f64) = sqlx::query_as(counters).fetch_one(pool).await?;
    let at_work = sqlx::query_scalar(AT_WORK).fetch_optional(pool).await?;
    // Superusers and `pg_monitor`'s members only; without it an ended checkpoint shows only by
    // its fsyncs.
    let last = sqlx::query_scalar(LAST).fetch_one(pool).await.ok();
    Ok(Seen {
        begun,
        sync_ms,
        last,
        at_work,
    })
}

/// What the checkpointer did between `before` and `after`, as the end of a note about a phase;
/// `None` when no checkpoint began or ended and none was at work at either end.
pub fn during(before: &Seen, after: &Seen) -> Option<String> {
    let mut said = Vec::new();
    let begun = after.begun - before.begun;
    if begun > 0 {
        said.push(format!("{begun} began"));
    }
    let sync_ms = after.sync_ms - before.sync_ms;
    let moved = before.last.is_some() && after.last.is_some() && before.last != after.last;
    if sync_ms >= 0.5 {
        said.push(format!("one or more ended, with {sync_ms:.0} ms of fsyncs"));
    } else if moved {
        said.push("one or more ended".to_string());
    }
    let (began, ended) = (before.at_work == Some(true), after.at_work == Some(true));
    if let Some(when) = at_either_end(began, ended) {
        said.push(format!("one was under way {when}"));
    }
    (!said.is_empty()).then(|| format!("checkpoints: {}", said.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(begun: i64, sync_ms: f64, at_work: Option<bool>) -> Seen {
        Seen {
            begun,
            sync_ms,
            last: Some("0/1000028".into()),
            at_work,
        }
    }

    fn ending_at(lsn: Option<&str>, s: Seen) -> Seen {
        Seen {
            last: lsn.map(str::to_string),
            ..s
        }
    }

    #[test]
    fn a_quiet_checkpointer_says_nothing() {
        let idle = seen(7, 1200.0, Some(false));
        assert_eq!(during(&idle, &idle), None);
        let unseen = seen(7, 1200.0, None);
        assert_eq!(during(&unseen, &unseen), None, "not visible is not at work");
    }

    #[test]
    fn a_checkpoint_that_began_and_ended_is_said_with_its_fsyncs() {
        assert_eq!(
            during(&seen(7, 1200.0, Some(false)), &seen(8, 1615.4, Some(false))).as_deref(),
            Some("checkpoints: 1 began, one or more ended, with 415 ms of fsyncs")
        );
    }

    #[test]
    fn a_checkpoint_without_fsyncs_is_seen_ending_by_the_control_files_redo() {
        let before = ending_at(Some("0/1000028"), seen(7, 30.0, Some(true)));
        let after = ending_at(Some("0/3A000060"), seen(8, 30.2, Some(false)));
        assert_eq!(
            during(&before, &after).as_deref(),
            Some("checkpoints: 1 began, one or more ended, one was under way when it began")
        );
        let unread = ending_at(None, seen(7, 30.0, Some(false)));
        assert_eq!(during(&unread, &unread), None);
    }

    #[test]
    fn a_checkpoint_under_way_at_either_end_is_said_before_it_ends() {
        assert_eq!(
            during(&seen(7, 0.0, Some(false)), &seen(8, 0.0, Some(true))).as_deref(),
            Some("checkpoints: 1 began, one was under way when it ended")
        );
        assert_eq!(
            during(&seen(8, 0.0, Some(true)), &seen(8, 0.0, Some(true))).as_deref(),
            Some("checkpoints: one was under way when it began and when it ended")
        );
        assert_eq!(
            during(&seen(8, 10.0, Some(true)), &seen(8, 12.0, None)).as_deref(),
            Some(
                "checkpoints: one or more ended, with 2 ms of fsyncs, one was under way when it began"
            )
        );
    }
}
