//! `hookgate dlq`: list, inspect, replay and purge dead-lettered events.

use crate::cli::Output;
use crate::inbox::{
    Actor, Apply, AuditRecord, DEDUPE_CACHE_CONFIRMED_FOR, DeadLetter, DeadLetterFilter,
    EventDetail, Inbox, ReplaySelector, Status,
};
use anyhow::{Context, bail};
use base64::Engine;
use chrono::{DateTime, Utc};
use clap::{ArgGroup, Args, Subcommand};

mod actor;
mod render;

use super::DEFAULT_DB;
pub use actor::os_user;
use render::*;

#[derive(Subcommand, Debug)]
pub enum DlqCommand {
    /// List dead letters, most recently dead-lettered first, without bodies.
    List {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
        /// `namespace/name`
        #[arg(long)]
        integration: Option<String>,
        /// Only events dead-lettered since this instant: RFC 3339 (`2026-11-30T00:00:00Z`) or a
        /// duration ago (`2h`, `7d`).
        #[arg(long, value_parser = parse_since)]
        since: Option<DateTime<Utc>>,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[arg(long, default_value_t = 100)]
        limit: i64,
    },
    /// Show one event (any status): headers, body and every delivery attempt.
    Show {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
        /// The event's row id (the ID column of `dlq list` and `inbox list`).
        id: i64,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Put dead letters back in the queue with a fresh retry schedule (history is kept).
    #[command(group(ArgGroup::new("selection").required(true).multiple(false).args(["ids", "integration", "all"])))]
    Replay {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
        #[command(flatten)]
        selection: Selection,
        /// Print what would be replayed; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete dead letters and their delivery attempts.
    #[command(group(ArgGroup::new("selection").required(true).multiple(false).args(["ids", "integration", "all"])))]
    Purge {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
        #[command(flatten)]
        selection: Selection,
        /// Print what would be purged; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Who replayed or purged dead letters, when, and which events; newest first.
    Audit {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
        /// Only changes made since this instant: RFC 3339 or a duration ago (`2h`, `7d`).
        #[arg(long, value_parser = parse_since)]
        since: Option<DateTime<Utc>>,
        /// `json` lists every recorded event of each change.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[arg(long, default_value_t = 100)]
        limit: i64,
    },
}

/// Which dead letters `replay` and `purge` act on: exactly one of ids, `--integration` (perhaps
/// with `--since`) and `--all`, which each command's argument group enforces.
#[derive(Args, Debug, Clone, Default)]
pub struct Selection {
    /// Row ids of dead letters.
    pub ids: Vec<i64>,
    /// Every dead letter of this integration (`namespace/name`).
    #[arg(long)]
    pub integration: Option<String>,
    /// With --integration: only those dead-lettered since this instant (RFC 3339 or `2h`, `7d`).
    #[arg(long, requires = "integration", conflicts_with_all = ["ids", "all"], value_parser = parse_since)]
    pub since: Option<DateTime<Utc>>,
    /// Every dead letter.
    #[arg(long)]
    pub all: bool,
}

impl Selection {
    fn selector(self) -> anyhow::Result<ReplaySelector> {
        Ok(match (self.ids.is_empty(), self.integration, self.all) {
            (false, None, false) => ReplaySelector::Ids(self.ids),
            (true, Some(integration), false) => ReplaySelector::Integration {
                integration,
                since: self.since,
            },
            (true, None, true) => ReplaySelector::All,
            _ => bail!("select dead letters with exactly one of: ids, --integration, --all"),
        })
    }
}

impl DlqCommand {
    /// Whether the command changes dead letters, and so records who does it.
    pub fn changes(&self) -> bool {
        matches!(
            self,
            DlqCommand::Replay { dry_run: false, .. } | DlqCommand::Purge { dry_run: false, .. }
        )
    }
}

/// `hookgate dlq`: changes are recorded as made by the OS user.
pub async fn run(cmd: DlqCommand) -> anyhow::Result<()> {
    run_as(cmd, &os_user()).await
}

/// Runs `cmd`; a replay or purge is recorded in the audit trail as made by `actor`.
pub async fn run_as(cmd: DlqCommand, actor: &Actor) -> anyhow::Result<()> {
    let apply = |dry_run: bool| {
        if dry_run {
            Apply::DryRun
        } else {
            Apply::By(actor)
        }
    };
    match cmd {
        DlqCommand::List {
            database_url,
            integration,
            since,
            output,
            limit,
        } => {
            let inbox = open(&database_url).await?;
            let rows = inbox
                .dead_letters(&DeadLetterFilter {
                    integration,
                    since,
                    limit,
                })
                .await?;
            match output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
                Output::Table => print!("{}", list_table(&rows)),
            }
            Ok(())
        }
        DlqCommand::Show {
            database_url,
            id,
            output,
        } => {
            let inbox = open(&database_url).await?;
            let Some(ev) = inbox.event_detail(id).await? else {
                bail!("no event with id {id}");
            };
            match output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&show_json(&ev)?)?),
                Output::Table => print!("{}", show_text(&ev)),
            }
            Ok(())
        }
        DlqCommand::Replay {
            database_url,
            selection,
            dry_run,
        } => {
            let sel = selection.selector()?;
            let inbox = open(&database_url).await?;
            let skipped = check_ids(&inbox, &sel).await?;
            let done = inbox
                .replay_dead_letters(&sel, Utc::now(), apply(dry_run))
                .await?;
            let verb = if dry_run { "would replay" } else { "replayed" };
            println!("{}", summary(verb, &done));
            report_skipped(
                &skipped,
                &done,
                if dry_run {
                    "would not replay"
                } else {
                    "not replayed"
                },
            );
            Ok(())
        }
        DlqCommand::Purge {
            database_url,
            selection,
            dry_run,
        } => {
            let sel = selection.selector()?;
            let inbox = open(&database_url).await?;
            let skipped = check_ids(&inbox, &sel).await?;
            let done = inbox.purge_dead_letters(&sel, apply(dry_run)).await?;
            if !dry_run && !done.is_empty() {
                // Receivers remember the keys they committed; each forgets them within this
                // once it sees the purge (`inbox::recent`). Until then a re-send of a purged
                // event could still be answered as a duplicate.
                let wait = DEDUPE_CACHE_CONFIRMED_FOR;
                eprintln!(
                    "waiting {}s until no receiver answers a re-send of a purged event as a duplicate",
                    wait.as_secs()
                );
                tokio::time::sleep(wait).await;
            }
            let verb = if dry_run { "would purge" } else { "purged" };
            println!("{}", summary(verb, &done));
            report_skipped(
                &skipped,
                &done,
                if dry_run {
                    "would not purge"
                } else {
                    "not purged"
                },
            );
            Ok(())
        }
        DlqCommand::Audit {
            database_url,
            since,
            output,
            limit,
        } => {
            let inbox = open(&database_url).await?;
            let rows: Vec<AuditRecord> = inbox.audit_log(since, limit).await?;
            match output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
                Output::Table => print!("{}", audit_table(&rows)),
            }
            Ok(())
        }
    }
}

async fn open(database_url: &str) -> anyhow::Result<Inbox> {
    let inbox = Inbox::connect_as(database_url, "hookgate dlq", Default::default()).await?;
    inbox.migrate().await?;
    Ok(inbox)
}

/// `--since`: RFC 3339, or a duration before now (`2h`, `7d`, `1h 30m`).
pub fn parse_since(s: &str) -> Result<DateTime<Utc>, String> {
    parse_since_at(s, Utc::now())
}

/// [`parse_since`] relative to `now`.
pub fn parse_since_at(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let ago = humantime::parse_duration(s).map_err(|_| {
        format!(
            "{s:?} is neither an RFC 3339 instant (2026-11-30T00:00:00Z) nor a duration (2h, 7d)"
        )
    })?;
    chrono::Duration::from_std(ago)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .ok_or_else(|| format!("{s:?} is too long ago"))
}

/// For an id selection: fails, before anything changes, when a given id does not exist; returns
/// the given ids that exist but are not dead letters, with their status.
async fn check_ids(inbox: &Inbox, sel: &ReplaySelector) -> anyhow::Result<Vec<(i64, Status)>> {
    let ReplaySelector::Ids(ids) = sel else {
        return Ok(Vec::new());
    };
    let mut ids = ids.clone();
    ids.sort_unstable();
    ids.dedup();
    let found = inbox.event_statuses(&ids).await?;
    let missing: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|id| !found.iter().any(|(f, _)| f == id))
        .collect();
    if !missing.is_empty() {
        bail!("no event with id {}; nothing was changed", join(&missing));
    }
    Ok(found
        .into_iter()
        .filter(|(_, status)| *status != Status::DeadLetter)
        .collect())
}

/// Given ids that were not acted on: those that were not dead letters when checked, and those that
/// stopped being one in between (not in `done`).
fn report_skipped(skipped: &[(i64, Status)], done: &[i64], what: &str) {
    for (id, status) in skipped {
        if !done.contains(id) {
            eprintln!("{what} {id}: status is {status}, not dead_letter");
        }
    }
}

/// `replayed 3 events: 12, 15, 19`
fn summary(verb: &str, ids: &[i64]) -> String {
    let noun = if ids.len() == 1 { "event" } else { "events" };
    if ids.is_empty() {
        format!("{verb} 0 events")
    } else {
        format!("{verb} {} {noun}: {}", ids.len(), join(ids))
    }
}

fn join(ids: &[i64]) -> String {
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
