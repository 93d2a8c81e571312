//! What PostgreSQL did in the background while a phase ran, named in notes under the phase's
//! name: autovacuum's work in the bench's database ([`autovacuum`]) and the cluster's
//! checkpoints ([`checkpoints`]). The phase's figures stand as measured; the notes say what
//! shared the machine and the disk with it.

use super::{autovacuum, checkpoints};
use sqlx::PgPool;

/// Runs the phase `start` starts (after the first readings, so that a schedule it sets is not
/// eaten into), and notes in `report` what autovacuum and the checkpointer did meanwhile, under
/// `name`.
pub async fn watched<T, F: Future<Output = T>>(
    pool: &PgPool,
    report: &mut super::report::Report,
    name: &str,
    start: impl FnOnce() -> F,
) -> T {
    let (out, notes) = around(pool, name, start).await;
    for note in notes {
        report.note(note);
    }
    out
}

/// [`watched`] for a phase that cannot lend the report while it runs: the notes to add.
pub async fn around<T, F: Future<Output = T>>(
    pool: &PgPool,
    name: &str,
    start: impl FnOnce() -> F,
) -> (T, Vec<String>) {
    let before = (autovacuum::seen(pool).await, checkpoints::seen(pool).await);
    let out = start().await;
    let after = (autovacuum::seen(pool).await, checkpoints::seen(pool).await);
    let notes = [
        said(
            before.0,
            after.0,
            autovacuum::during,
            "its figures include that work on the same cores",
            "autovacuum's counters",
        ),
        said(
            before.1,
            after.1,
            |b, a| checkpoints::during(&b, &a),
            "on the disk the commits' WAL flushes use",
            "the checkpointer's counters",
        ),
    ];
    let notes = notes.into_iter().flatten();
    (out, notes.map(|n| format!("{name}: {n}")).collect())
}

/// What `during` says of two readings, with `why` it matters; or that `what` could not be read.
fn said<S>(
    before: Result<S, sqlx::Error>,
    after: Result<S, sqlx::Error>,
    during: impl FnOnce(S, S) -> Option<String>,
    why: &str,
    what: &str,
) -> Option<String> {
    match (before, after) {
        (Ok(before), Ok(after)) => during(before, after).map(|said| format!("{said} ({why})")),
        (Err(e), _) | (_, Err(e)) => Some(format!("{what} could not be read: {e}")),
    }
}

/// When a background worker was seen at work at the phase's ends: "when it began", "when it
/// ended", both, or `None`.
pub fn at_either_end(began: bool, ended: bool) -> Option<String> {
    let when: Vec<&str> = [(began, "when it began"), (ended, "when it ended")]
        .into_iter()
        .filter_map(|(yes, when)| yes.then_some(when))
        .collect();
    (!when.is_empty()).then(|| when.join(" and "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_at_work_at_either_end_is_said_at_each() {
        assert_eq!(at_either_end(false, false), None);
        assert_eq!(at_either_end(true, false).as_deref(), Some("when it began"));
        assert_eq!(at_either_end(false, true).as_deref(), Some("when it ended"));
        assert_eq!(
            at_either_end(true, true).as_deref(),
            Some("when it began and when it ended")
        );
    }

    #[test]
    fn a_reading_that_failed_is_said_and_nothing_else() {
        let failed = || Err(sqlx::Error::PoolTimedOut);
        let note = said(
            Ok(1),
            failed(),
            |_, _: i32| Some("x".into()),
            "why",
            "the counters",
        );
        assert!(
            note.as_deref()
                .unwrap()
                .starts_with("the counters could not be read: "),
            "{note:?}"
        );
        let to = |after| {
            said(
                Ok(1),
                Ok(after),
                |b, a| (a != b).then(|| "moved".into()),
                "why",
                "c",
            )
        };
        assert_eq!(to(1), None, "nothing moved, nothing said");
        assert_eq!(to(2).as_deref(), Some("moved (why)"));
    }
}
