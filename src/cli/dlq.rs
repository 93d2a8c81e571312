//! `hookgate dlq`: list, inspect, replay and purge dead-lettered events.

use crate::cli::Output;
use crate::inbox::{DeadLetter, DeadLetterFilter, EventDetail, Inbox, ReplaySelector, Status};
use anyhow::{Context, bail};
use base64::Engine;
use chrono::{DateTime, Utc};
use clap::{ArgGroup, Subcommand};

const DEFAULT_DB: &str = "sqlite://hookgate.db";

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
        /// Row ids of dead letters.
        ids: Vec<i64>,
        /// Every dead letter of this integration (`namespace/name`).
        #[arg(long)]
        integration: Option<String>,
        /// With --integration: only those dead-lettered since this instant (RFC 3339 or `2h`, `7d`).
        #[arg(long, requires = "integration", conflicts_with_all = ["ids", "all"], value_parser = parse_since)]
        since: Option<DateTime<Utc>>,
        /// Every dead letter.
        #[arg(long)]
        all: bool,
        /// Print what would be replayed; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete dead letters and their delivery attempts.
    #[command(group(ArgGroup::new("selection").required(true).multiple(false).args(["ids", "integration", "all"])))]
    Purge {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
        /// Row ids of dead letters.
        ids: Vec<i64>,
        /// Every dead letter of this integration (`namespace/name`).
        #[arg(long)]
        integration: Option<String>,
        /// With --integration: only those dead-lettered since this instant (RFC 3339 or `2h`, `7d`).
        #[arg(long, requires = "integration", conflicts_with_all = ["ids", "all"], value_parser = parse_since)]
        since: Option<DateTime<Utc>>,
        /// Every dead letter.
        #[arg(long)]
        all: bool,
        /// Print what would be purged; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

pub async fn run(cmd: DlqCommand) -> anyhow::Result<()> {
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
            ids,
            integration,
            since,
            all,
            dry_run,
        } => {
            let sel = selector(ids, integration, since, all)?;
            let inbox = open(&database_url).await?;
            let skipped = check_ids(&inbox, &sel).await?;
            let done = inbox.replay_dead_letters(&sel, Utc::now(), dry_run).await?;
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
            ids,
            integration,
            since,
            all,
            dry_run,
        } => {
            let sel = selector(ids, integration, since, all)?;
            let inbox = open(&database_url).await?;
            let skipped = check_ids(&inbox, &sel).await?;
            let done = inbox.purge_dead_letters(&sel, dry_run).await?;
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
    }
}

async fn open(database_url: &str) -> anyhow::Result<Inbox> {
    let inbox = Inbox::connect(database_url).await?;
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

/// The selection of `replay` / `purge`; clap already enforces that exactly one is given.
fn selector(
    ids: Vec<i64>,
    integration: Option<String>,
    since: Option<DateTime<Utc>>,
    all: bool,
) -> anyhow::Result<ReplaySelector> {
    Ok(match (ids.is_empty(), integration, all) {
        (false, None, false) => ReplaySelector::Ids(ids),
        (true, Some(integration), false) => ReplaySelector::Integration { integration, since },
        (true, None, true) => ReplaySelector::All,
        _ => bail!("select dead letters with exactly one of: ids, --integration, --all"),
    })
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

fn time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn opt_time(t: &Option<DateTime<Utc>>) -> String {
    t.as_ref().map_or_else(|| "-".to_string(), time)
}

/// Control characters (terminal escapes, line breaks) as visible escapes, for one-line cells.
fn one_line(s: &str) -> String {
    s.chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_control() {
                Box::new(c.escape_default())
            } else {
                Box::new(std::iter::once(c))
            }
        })
        .collect()
}

/// Like [`one_line`] but keeps line breaks and tabs, for a body printed as text.
fn printable(s: &str) -> String {
    s.chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_control() && !matches!(c, '\n' | '\t') {
                Box::new(c.escape_default())
            } else {
                Box::new(std::iter::once(c))
            }
        })
        .collect()
}

fn list_table(rows: &[DeadLetter]) -> String {
    let mut out = format!(
        "{:<6} {:<28} {:<36} {:<32} {:<8} {:<20} {}\n",
        "ID", "INTEGRATION", "EVENT_ID", "TYPE", "ATTEMPTS", "DEAD_LETTERED", "LAST_ERROR"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<6} {:<28} {:<36} {:<32} {:<8} {:<20} {}\n",
            r.id,
            one_line(&r.integration),
            one_line(&r.event_id),
            one_line(r.event_type.as_deref().unwrap_or("-")),
            r.attempts,
            opt_time(&r.dead_lettered_at),
            one_line(r.last_error.as_deref().unwrap_or("-")),
        ));
    }
    out
}

/// The body as it is shown: `(text, "utf-8")`, or `(base64, "base64")` when it is not UTF-8.
fn body_repr(body: &[u8]) -> (String, &'static str) {
    match std::str::from_utf8(body) {
        Ok(text) => (text.to_string(), "utf-8"),
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(body),
            "base64",
        ),
    }
}

/// The event as one JSON object: `body` is the text (or base64, see `body_encoding`), and
/// `attempts` the delivery history.
fn show_json(ev: &EventDetail) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(ev)?;
    let obj = v.as_object_mut().context("event detail is an object")?;
    obj.remove("body_base64");
    let (body, encoding) = body_repr(&ev.body);
    obj.insert("body".into(), body.into());
    obj.insert("body_encoding".into(), encoding.into());
    Ok(v)
}

fn show_text(ev: &EventDetail) -> String {
    let mut out = String::new();
    let mut field = |name: &str, value: String| {
        out.push_str(&format!("{:<18}{}\n", format!("{name}:"), value));
    };
    field("id", ev.id.to_string());
    field("integration", one_line(&ev.integration));
    field("event_id", one_line(&ev.event_id));
    field(
        "event_type",
        one_line(ev.event_type.as_deref().unwrap_or("-")),
    );
    field("status", ev.status.clone());
    field("scheme", ev.scheme.clone());
    field("key_id", one_line(&ev.key_id));
    field("signed_at", opt_time(&ev.signed_at));
    field("received_at", time(&ev.received_at));
    field("attempts", ev.attempt_count.to_string());
    field("next_attempt_at", opt_time(&ev.next_attempt_at));
    field("locked_until", opt_time(&ev.locked_until));
    field("processed_at", opt_time(&ev.processed_at));
    field("dead_lettered_at", opt_time(&ev.dead_lettered_at));
    if let Some(reason) = &ev.ignored_reason {
        field("ignored_reason", one_line(reason));
    }
    field(
        "last_error",
        one_line(ev.last_error.as_deref().unwrap_or("-")),
    );
    field("dedupe_conflicts", ev.dedupe_conflicts.to_string());
    field(
        "content_type",
        one_line(ev.content_type.as_deref().unwrap_or("-")),
    );
    field("body_sha256", ev.body_sha256.clone());

    out.push_str("headers:\n");
    match ev.headers.as_array() {
        Some(pairs) if pairs.is_empty() => out.push_str("  (none)\n"),
        Some(pairs) => {
            for pair in pairs {
                match pair.as_array().map(Vec::as_slice) {
                    Some([serde_json::Value::String(k), serde_json::Value::String(v)]) => {
                        out.push_str(&format!("  {}: {}\n", one_line(k), one_line(v)));
                    }
                    _ => out.push_str(&format!("  {}\n", one_line(&pair.to_string()))),
                }
            }
        }
        None => out.push_str(&format!("  {}\n", one_line(&ev.headers.to_string()))),
    }

    match ev.body_purged_at {
        Some(at) => out.push_str(&format!(
            "body: purged at {} (retention); the SHA-256 above is of the original\n",
            time(&at)
        )),
        None => {
            let (body, encoding) = body_repr(&ev.body);
            let body = if encoding == "utf-8" {
                printable(&body)
            } else {
                body
            };
            out.push_str(&format!("body ({} bytes, {encoding}):\n", ev.body.len()));
            out.push_str(&body);
            if !body.ends_with('\n') {
                out.push('\n');
            }
        }
    }

    out.push_str(&format!("delivery attempts ({}):\n", ev.attempts.len()));
    if !ev.attempts.is_empty() {
        out.push_str(&format!(
            "  {:<8} {:<20} {:<11} {:<6} {:<12} {}\n",
            "ATTEMPT", "STARTED", "DURATION_MS", "STATUS", "OUTCOME", "ERROR"
        ));
        for a in &ev.attempts {
            out.push_str(&format!(
                "  {:<8} {:<20} {:<11} {:<6} {:<12} {}\n",
                a.attempt,
                time(&a.started_at),
                a.duration_ms,
                a.status_code.map_or_else(|| "-".into(), |c| c.to_string()),
                one_line(&a.outcome),
                one_line(a.error.as_deref().unwrap_or("-")),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        cmd: DlqCommand,
    }

    fn parse(args: &[&str]) -> Result<DlqCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("dlq").chain(args.iter().copied())).map(|c| c.cmd)
    }

    #[test]
    fn since_takes_rfc3339_or_a_duration_ago() {
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        assert_eq!(
            parse_since_at("2026-11-30T00:00:00Z", now).unwrap(),
            "2026-11-30T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            parse_since_at("2026-11-30T02:00:00+02:00", now).unwrap(),
            "2026-11-30T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            parse_since_at("2h", now).unwrap(),
            "2026-12-01T10:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            parse_since_at("7d", now).unwrap(),
            "2026-11-24T12:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        let err = parse_since_at("yesterday", now).unwrap_err();
        assert!(err.contains("RFC 3339"), "{err}");
    }

    #[test]
    fn replay_needs_exactly_one_selection() {
        let DlqCommand::Replay { ids, dry_run, .. } =
            parse(&["replay", "3", "5", "--dry-run"]).unwrap()
        else {
            panic!("not a replay")
        };
        assert_eq!((ids, dry_run), (vec![3, 5], true));
        assert!(parse(&["replay"]).is_err());
        assert!(parse(&["replay", "3", "--all"]).is_err());
        assert!(parse(&["purge", "--integration", "a/b", "--all"]).is_err());
        assert!(parse(&["purge", "3", "--integration", "a/b"]).is_err());
        assert!(parse(&["replay", "--all", "--since", "2h"]).is_err());
        assert!(parse(&["purge", "3", "--since", "2h"]).is_err());
        let DlqCommand::Purge {
            integration, since, ..
        } = parse(&[
            "purge",
            "--integration",
            "a/b",
            "--since",
            "2026-11-30T00:00:00Z",
        ])
        .unwrap()
        else {
            panic!("not a purge")
        };
        assert_eq!(integration.as_deref(), Some("a/b"));
        assert_eq!(
            since,
            Some("2026-11-30T00:00:00Z".parse::<DateTime<Utc>>().unwrap())
        );
        assert!(matches!(
            parse(&["replay", "--all"]).unwrap(),
            DlqCommand::Replay { all: true, .. }
        ));
    }

    #[test]
    fn summaries_name_the_ids() {
        assert_eq!(
            summary("replayed", &[12, 15, 19]),
            "replayed 3 events: 12, 15, 19"
        );
        assert_eq!(summary("would purge", &[4]), "would purge 1 event: 4");
        assert_eq!(summary("replayed", &[]), "replayed 0 events");
    }

    #[test]
    fn cells_escape_control_characters() {
        assert_eq!(one_line("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(printable("a\nb\u{1b}"), "a\nb\\u{1b}");
        assert_eq!(body_repr(b"{}"), ("{}".to_string(), "utf-8"));
        assert_eq!(body_repr(&[0xff, 0x00]), ("/wA=".to_string(), "base64"));
    }
}
