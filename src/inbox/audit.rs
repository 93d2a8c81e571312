//! The dead-letter audit trail: who replayed or purged which dead letters, and when. A row is
//! written inside the transaction of the replay or purge it records ([`Apply::By`] is the only
//! way to change dead letters), and `hookgate dlq audit` reads them back.
//!
//! The actor is the identity the tool could establish (the OS user, or the Kubernetes user the
//! API server authenticated); it is a record, not access control: whoever holds the database
//! credentials can write any row. Access to the inbox is the database's own.

use super::dead_letters::ReplaySelector;
use super::{Error, Inbox, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::Row;
use sqlx::types::Json;

/// Events listed per audit row; `event_count` always has the full number, the selector the rest.
pub const MAX_AUDITED_EVENTS: usize = 10_000;

/// Where the actor's name comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorSource {
    /// The user `hookgate dlq` runs as.
    OsUser,
    /// The user the API server authenticated for `kubectl hookgate dlq` (SelfSubjectReview).
    Kubernetes,
}

impl ActorSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorSource::OsUser => "os_user",
            ActorSource::Kubernetes => "kubernetes",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        match s {
            "os_user" => Ok(ActorSource::OsUser),
            "kubernetes" => Ok(ActorSource::Kubernetes),
            other => Err(Error::Config(format!("unknown actor source {other:?}"))),
        }
    }
}

/// Who changes dead letters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub name: String,
    pub source: ActorSource,
}

/// Whether a replay or purge changes anything, and on whose behalf.
#[derive(Debug, Clone, Copy)]
pub enum Apply<'a> {
    /// Report what would be selected; change nothing, record nothing.
    DryRun,
    /// Change, and record the change as made by this actor.
    By(&'a Actor),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    Replay,
    Purge,
}

impl AuditAction {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            AuditAction::Replay => "replay",
            AuditAction::Purge => "purge",
        }
    }
}

/// One event a replay or purge affected (its row may be gone after a purge).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditedEvent {
    pub id: i64,
    pub integration: String,
    pub event_id: String,
}

/// One recorded purge, as the receivers' memory of committed keys reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedPurge {
    pub id: i64,
    /// How many events it deleted: more than `events` when the list stopped at
    /// [`MAX_AUDITED_EVENTS`].
    pub event_count: i64,
    pub events: Vec<AuditedEvent>,
}

/// One recorded replay or purge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub actor_source: ActorSource,
    pub action: String,
    pub selector: String,
    pub event_count: i64,
    pub events: Vec<AuditedEvent>,
}

impl ReplaySelector {
    /// The selection in words, as recorded: `ids 3, 5`, `integration t/a since <RFC 3339>`, `all`.
    pub fn describe(&self) -> String {
        match self {
            ReplaySelector::Ids(ids) => {
                let mut ids = ids.clone();
                ids.sort_unstable();
                ids.dedup();
                let list: Vec<String> = ids.iter().map(i64::to_string).collect();
                format!("ids {}", list.join(", "))
            }
            ReplaySelector::Integration {
                integration,
                since: None,
            } => format!("integration {integration}"),
            ReplaySelector::Integration {
                integration,
                since: Some(t),
            } => format!("integration {integration} since {}", t.to_rfc3339()),
            ReplaySelector::All => "all".into(),
        }
    }
}

pub(super) const INSERT_AUDIT: &str = "INSERT INTO dlq_audit \
     (at, actor, actor_source, action, selector, event_count, events) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

const LIST_AUDIT: &str = "SELECT id, at, actor, actor_source, action, selector, event_count, \
     events FROM dlq_audit WHERE (CAST($1 AS TEXT) IS NULL OR at >= $1) \
     ORDER BY at DESC, id DESC LIMIT $2";

/// Writes the audit row of one replay or purge on `$conn`, the change's own transaction.
macro_rules! record_audit {
    ($conn:expr, $actor:expr, $action:expr, $sel:expr, $events:expr, $now:expr) => {{
        let events: &[$crate::inbox::AuditedEvent] = $events;
        let listed = &events[..events.len().min($crate::inbox::MAX_AUDITED_EVENTS)];
        sqlx::query($crate::inbox::audit::INSERT_AUDIT)
            .bind($now)
            .bind($actor.name.as_str())
            .bind($actor.source.as_str())
            .bind($action.as_str())
            .bind($sel.describe())
            .bind(events.len() as i64)
            .bind(sqlx::types::Json(listed))
            .execute($conn)
            .await?;
    }};
}
pub(super) use record_audit;

/// The latest purge recorded, 0 before the first: where a receiver's reads of the purges start
/// (`super::recent`). Public so a test can check its plan.
pub const PURGES_RECORDED: &str =
    "SELECT COALESCE(MAX(id), 0) FROM dlq_audit WHERE action = 'purge'";

/// The purges recorded after the one `$1` names, oldest first; the same index finds them. Public
/// so a test can check its plan.
pub const PURGES_AFTER: &str = "SELECT id, event_count, events FROM dlq_audit \
     WHERE action = 'purge' AND id > $1 ORDER BY id";

impl Inbox {
    /// The purges recorded after the one whose id is `after` (a [`Self::purges_recorded`]).
    pub async fn purges_after(&self, after: i64) -> Result<Vec<RecordedPurge>> {
        backend!(self, pool => {
            let rows = sqlx::query(PURGES_AFTER).bind(after).fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    let events: Json<Vec<AuditedEvent>> = r.try_get("events")?;
                    Ok(RecordedPurge {
                        id: r.try_get("id")?,
                        event_count: r.try_get("event_count")?,
                        events: events.0,
                    })
                })
                .collect()
        })
    }

    /// The id of the latest purge recorded, 0 before the first.
    pub async fn purges_recorded(&self) -> Result<i64> {
        Ok(backend!(self, pool => {
            sqlx::query_scalar(PURGES_RECORDED).fetch_one(pool).await?
        }))
    }

    /// Recorded replays and purges, newest first; `limit` 0 or less means no limit.
    pub async fn audit_log(
        &self,
        since: Option<DateTime<Utc>>,
        limit: i64,
    ) -> Result<Vec<AuditRecord>> {
        let limit = if limit > 0 { limit } else { i64::MAX };
        backend!(self, pool => {
            let rows = sqlx::query(LIST_AUDIT)
                .bind(since)
                .bind(limit)
                .fetch_all(pool)
                .await?;
            rows.iter()
                .map(|r| {
                    let source: String = r.try_get("actor_source")?;
                    let events: Json<Vec<AuditedEvent>> = r.try_get("events")?;
                    Ok(AuditRecord {
                        id: r.try_get("id")?,
                        at: r.try_get("at")?,
                        actor: r.try_get("actor")?,
                        actor_source: ActorSource::parse(&source)?,
                        action: r.try_get("action")?,
                        selector: r.try_get("selector")?,
                        event_count: r.try_get("event_count")?,
                        events: events.0,
                    })
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_described_as_given() {
        let since: DateTime<Utc> = "2026-11-30T00:00:00Z".parse().unwrap();
        let table = [
            (ReplaySelector::Ids(vec![5, 3, 5]), "ids 3, 5"),
            (ReplaySelector::All, "all"),
            (
                ReplaySelector::Integration {
                    integration: "pay/stripe".into(),
                    since: None,
                },
                "integration pay/stripe",
            ),
            (
                ReplaySelector::Integration {
                    integration: "pay/stripe".into(),
                    since: Some(since),
                },
                "integration pay/stripe since 2026-11-30T00:00:00+00:00",
            ),
        ];
        for (sel, text) in table {
            assert_eq!(sel.describe(), text);
        }
    }

    #[test]
    fn actor_sources_round_trip_and_unknown_ones_fail() {
        for s in [ActorSource::OsUser, ActorSource::Kubernetes] {
            assert_eq!(ActorSource::parse(s.as_str()).unwrap(), s);
        }
        assert!(ActorSource::parse("flag").is_err());
    }
}
