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
    let DlqCommand::Replay {
        selection, dry_run, ..
    } = parse(&["replay", "3", "5", "--dry-run"]).unwrap()
    else {
        panic!("not a replay")
    };
    assert_eq!((selection.ids, dry_run), (vec![3, 5], true));
    assert!(parse(&["replay"]).is_err());
    assert!(parse(&["replay", "3", "--all"]).is_err());
    assert!(parse(&["purge", "--integration", "a/b", "--all"]).is_err());
    assert!(parse(&["purge", "3", "--integration", "a/b"]).is_err());
    assert!(parse(&["replay", "--all", "--since", "2h"]).is_err());
    assert!(parse(&["purge", "3", "--since", "2h"]).is_err());
    let DlqCommand::Purge { selection, .. } = parse(&[
        "purge",
        "--integration",
        "a/b",
        "--since",
        "2026-11-30T00:00:00Z",
    ])
    .unwrap() else {
        panic!("not a purge")
    };
    assert_eq!(selection.integration.as_deref(), Some("a/b"));
    assert_eq!(
        selection.since,
        Some("2026-11-30T00:00:00Z".parse::<DateTime<Utc>>().unwrap())
    );
    assert!(matches!(
        parse(&["replay", "--all"]).unwrap(),
        DlqCommand::Replay {
            selection: Selection { all: true, .. },
            ..
        }
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
