//! `hookgate bench` end to end at a tiny size, so the command in the README keeps working: every
//! phase runs against the real PostgreSQL, pgbench, nginx and child processes, and the report
//! carries every figure. (The figures themselves are only meaningful from a release build on a
//! quiet machine; see docs/performance.md. Nothing here asserts a speed.)

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

const BIN: &str = env!("CARGO_BIN_EXE_hookgate");

/// Every bench run creates and drops the same `hookgate_bench` database: one at a time.
static BENCH_DB: Mutex<()> = Mutex::new(());

/// A tiny size: few events, few connections.
const TINY: &[&str] = &[
    "--events",
    "300",
    "--concurrency",
    "8",
    "--open-loop-connections",
    "16",
];

/// Runs the bench with `args` on the database of `DATABASE_URL`; its JSON report and its stdout.
fn bench(args: &[&str]) -> (Value, String) {
    let _one_at_a_time = BENCH_DB.lock().unwrap_or_else(|e| e.into_inner());
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL (tests/run.sh sets it)");
    let (report, stdout, _) = bench_on(&url, args);
    (report, stdout)
}

/// Runs the bench with `args` and `--database-url url`, which must succeed: its JSON report,
/// stdout and stderr.
fn bench_on(url: &str, args: &[&str]) -> (Value, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = Command::new(BIN)
        .arg("bench")
        .args(args)
        .args(["--database-url", url, "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "bench failed:\n{stdout}\n{stderr}");
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (report, stdout, stderr)
}

/// The names in one of the report's lists: `names(report, "checks", "check")`.
fn names<'a>(report: &'a Value, list: &str, field: &str) -> Vec<&'a str> {
    report[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {report}"))
        .iter()
        .map(|p| p[field].as_str().unwrap())
        .collect()
}

/// The report's notes.
fn notes(report: &Value) -> Vec<&str> {
    report["notes"]
        .as_array()
        .unwrap_or_else(|| panic!("no notes in {report}"))
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect()
}

/// A figure of the report (a ratio or value printed without a target), by name.
fn figure_of(report: &Value, name: &str) -> Option<f64> {
    report["figures"]
        .as_array()
        .unwrap_or_else(|| panic!("no figures in {report}"))
        .iter()
        .find(|f| f["figure"] == name)
        .map(|f| f["value"].as_f64().unwrap())
}

fn phases(report: &Value) -> Vec<&str> {
    names(report, "phases", "phase")
}

/// Whether the machine has `tool` where the bench looks for it (checked independently, so that
/// a bench that stops finding an installed tool fails here instead of skipping quietly).
fn installed(tool: &str, also: &[PathBuf]) -> bool {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()));
    on_path || also.iter().any(|p| p.is_file())
}

fn pgbench_installed() -> bool {
    let debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.path().join("bin/pgbench")))
                .collect()
        })
        .unwrap_or_default();
    installed("pgbench", &debian)
}

#[test]
fn bench_runs_every_phase_and_reports_every_figure() {
    let (report, stdout) = bench(
        &[
            TINY,
            &[
                "--latency-run",
                "1s",
                "--verify-divisor",
                "200",
                "--pgbench-run",
                "1s",
                "--ceiling-run",
                "300ms",
                "--pipeline-secs",
                "1s",
                "--pipeline-steps",
                "2",
                "--tenants-backlog",
                "1s",
                "--retention-events",
                "1000",
            ],
        ]
        .concat(),
    );
    let (pgbench, nginx) = (
        pgbench_installed(),
        installed("nginx", &[Path::new("/usr/sbin/nginx").into()]),
    );
    let phases = phases(&report);
    let mut expected = vec![
        "baseline A: 1 row/transaction",
        "baseline B: 50 rows/transaction",
        "HTTP ceiling: hyper server, fixed 200",
        "hookgate intake (HTTP, verify, commit)",
        "duplicates (re-sent accepted events)",
        "intake at half the max rate (open loop)",
        "worker delivery to a local sink",
        "receiver + workers: intake (closed loop)",
        "receiver + workers: delivered during it",
        "pipeline: highest sustainable rate",
        "tenants: quiet integration alone",
        "tenants: quiet beside another's backlog",
        "tenants: backlog delivered",
        "verify HMAC-SHA256 (Stripe), 1 KiB",
        "HMAC-SHA256 alone, keyed once, 1 KiB",
        "verify Ed25519, 1 KiB",
        "event id and type, intake body (1.0 KiB)",
        "serde_json Value + pointer, Stripe event",
    ];
    if pgbench {
        expected.extend(["pgbench: 1 row/transaction", "pgbench: 50 rows/transaction"]);
    }
    if nginx {
        expected.push("HTTP ceiling: nginx, fixed 200");
    }
    for e in &expected {
        assert!(phases.contains(e), "{e} missing from {phases:?}");
    }
    for p in report["phases"].as_array().unwrap() {
        let rate = p["ops_per_s"].as_f64().unwrap();
        // A tiny debug run may find no sustainable rate: that row is the one that may be 0.
        if p["phase"] == "pipeline: highest sustainable rate" {
            assert!(rate >= 0.0, "{p}");
        } else {
            assert!(rate > 0.0 && rate.is_finite(), "{p}");
        }
    }

    let steps = report["pipeline_steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{steps:?}");
    for s in steps {
        for field in ["offered", "intake", "delivered", "p50_ms", "p99_ms"] {
            assert!(s[field].as_f64().unwrap() > 0.0, "{field} in {s}");
        }
        assert!(s["pending"].as_i64().unwrap() >= 0, "{s}");
        // The receiver's own timing of the step: bucket bounds, its answers' within a factor of
        // two of the load generator's p99 from the schedule (which holds each answer's time).
        let bucket_bound = |v: f64| v >= 1.0 && v.log2().fract() == 0.0;
        for field in ["own_answers_p99_ms", "own_commits_p99_ms"] {
            let bound = s[field]
                .as_f64()
                .unwrap_or_else(|| panic!("no {field} in {s}"));
            assert!(bucket_bound(bound), "{field} in {s}");
        }
        // The slowest of each: a bucket bound too, never under its p99.
        for (max, p99) in [
            ("own_answers_max_ms", "own_answers_p99_ms"),
            ("own_commits_max_ms", "own_commits_p99_ms"),
        ] {
            let bound = s[max].as_f64().unwrap_or_else(|| panic!("no {max} in {s}"));
            assert!(bucket_bound(bound), "{max} in {s}");
            assert!(bound >= s[p99].as_f64().unwrap(), "{max} in {s}");
        }
        let own = s["own_answers_p99_ms"].as_f64().unwrap();
        let at_client = s["intake_p99_ms"].as_f64().unwrap();
        assert!(own == 1.0 || own / 2.0 < at_client, "{s}");
        // The answers' mean, in ms: a verified, committed answer takes more than 50 µs, and the
        // handler's mean is well within the load generator's tail (seconds or µs would not be).
        let mean = s["own_answers_mean_ms"].as_f64().unwrap();
        assert!((0.05..at_client * 10.0).contains(&mean), "{s}");
        // The workers' own timing of their completions (every delivered event had one), and
        // how late the requests left: a part of their p99 from the schedule.
        // Claims may be none (every event handed over, no idle poll within the step): then the
        // field is there and null; otherwise a bucket bound like the completions'.
        let completions = s["own_completions_p99_ms"].as_f64().unwrap();
        assert!(bucket_bound(completions), "{s}");
        let claims = s.get("own_claims_p99_ms").unwrap_or_else(|| panic!("{s}"));
        assert!(
            claims.is_null() || claims.as_f64().is_some_and(bucket_bound),
            "{s}"
        );
        let late = s["sent_late_p99_ms"].as_f64().unwrap();
        assert!(late >= 0.0 && late < at_client, "{s}");
        // The open loop opened what its schedule needed, never more than it was allowed.
        let conns = s["connections"].as_u64().unwrap();
        assert!((1..=16).contains(&conns), "{s}");
        // Requests wait for a connection only once all 16 are open; the shares are percentages.
        let waited = s["waited_at_cap_pct"].as_f64().unwrap();
        let blocked = s["blocked_at_cap_pct"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&waited), "{s}");
        assert!((0.0..=100.0).contains(&blocked), "{s}");
        assert!(conns == 16 || (waited == 0.0 && blocked == 0.0), "{s}");
        assert!(s["stopped_behind"].is_boolean(), "{s}");
        // Linux: where the CPU went. The child and the bench both worked during the load.
        let cpu = &s["cpu"];
        for field in ["hookgate_us", "bench_us"] {
            assert!(cpu[field].as_f64().unwrap() > 0.0, "{field} in {s}");
        }
        assert!(cpu["rest_us"].as_f64().unwrap() >= 0.0, "{s}");
        let busy = cpu["busy_pct"].as_f64().unwrap();
        assert!(busy > 0.0 && busy <= 100.0, "{s}");
        // Read from the child's counters: at this load its workers have room for most events.
        let handed = s["handed_pct"].as_f64().unwrap();
        assert!(handed > 0.0 && handed <= 100.0, "{s}");
        // Claims come for events stored without a place, and empty ones at most once a poll or
        // per store: fewer than the events accepted (one per hand-over before round 14).
        let claims = s["claims_per_1k"].as_f64().unwrap();
        assert!((0.0..1000.0).contains(&claims), "{s}");
        // Each event's row went into the WAL with its 1 KiB body, then its completion.
        let wal = s["wal_bytes_per_event"].as_f64().unwrap();
        assert!(wal > 1024.0, "{s}");
        // Autovacuum's work during the step, when it did any, in the intake notes' words.
        let vacuum = &s["autovacuum"];
        assert!(
            vacuum.is_null() || vacuum.as_str().unwrap().starts_with("autovacuum "),
            "{s}"
        );
    }
    // The reported rate is the highest step that held, or 0 when none did.
    let held = steps
        .iter()
        .filter(|s| s["sustainable"] == true)
        .map(|s| s["offered"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let best = report["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "pipeline: highest sustainable rate")
        .unwrap();
    assert_eq!(best["ops_per_s"].as_f64().unwrap(), held);

    let checks = report["checks"].as_array().unwrap();
    let check_names = names(&report, "checks", "check");
    let ceiling = if nginx {
        "intake / HTTP ceiling (nginx)"
    } else {
        "intake / HTTP ceiling (hyper)"
    };
    assert!(check_names.contains(&ceiling), "{check_names:?}");
    for c in [
        "intake / pgbench 1-row, paired",
        "pipeline sustainable / pgbench 1-row",
    ] {
        assert_eq!(check_names.contains(&c), pgbench, "{c} in {check_names:?}");
    }
    assert!(
        check_names.contains(&"fields / serde_json Value, Stripe event"),
        "{check_names:?}"
    );
    assert!(
        check_names.contains(&"retention pass, 4x kept / 1x"),
        "{check_names:?}"
    );
    assert_eq!(
        checks.len(),
        15 + 2 * usize::from(pgbench),
        "{check_names:?}"
    );
    // The primitive's own share of the HMAC target, beside it but not one of the targets.
    let figures = report["figures"].as_array().unwrap();
    let figure = |name: &str| figure_of(&report, name);
    for kib in [1, 16] {
        let f = figure(&format!("HMAC alone / raw SHA-256, {kib} KiB"));
        assert!(f.is_some_and(|v| v > 0.0), "{kib} KiB: {figures:?}");
    }
    // The half-rate phase as the receiver timed it: bounds of its doubling buckets (1 ms x 2^k),
    // and its answers' within a factor of two of the load generator's p99 from the schedule,
    // which holds each answer's time and more (a bound in seconds, or of another phase's
    // requests, would not be).
    let check_value = |name: &str| {
        checks
            .iter()
            .find(|c| c["check"] == name)
            .and_then(|c| c["value"].as_f64())
    };
    let at_half = check_value("intake p99 at half rate (ms)").unwrap();
    for name in [
        "half rate: the receiver's own answers, p99 at most (ms)",
        "half rate: its transactions, p99 at most (ms)",
    ] {
        let bound = figure(name).unwrap_or_else(|| panic!("no {name} in {figures:?}"));
        assert!(
            bound >= 1.0 && bound.log2().fract() == 0.0,
            "{name}: {bound} is not a bucket bound"
        );
    }
    let answers = figure("half rate: the receiver's own answers, p99 at most (ms)").unwrap();
    assert!(
        answers == 1.0 || answers / 2.0 < at_half,
        "the receiver's answers p99 bound {answers} ms against {at_half} ms at the client"
    );
    // How late the requests left is a part of each one's latency from the schedule, so its p99
    // is at most theirs (taken after the answer, it would be theirs or more).
    let late = figure("half rate: requests sent late by the load generator, p99 (ms)").unwrap();
    assert!(
        late >= 0.0 && late < at_half,
        "{late} ms against {at_half} ms"
    );
    // The intake against the anchor measured a minute earlier: shown, not the target.
    let unpaired = figure("intake / pgbench 1-row, unpaired");
    assert_eq!(unpaired.is_some(), pgbench, "{figures:?}");
    // The retention pass on both inboxes (it checks what it removed itself), and the inbox read
    // beside each.
    for kept in [1000, 4000] {
        for name in ["retention pass (ms)", "inbox read (ms)"] {
            let f = figure(&format!("{name}, {kept} kept"));
            assert!(f.is_some_and(|v| v > 0.0), "{name}, {kept}: {figures:?}");
        }
        // Each size passed twice, the sizes alternating, and the quickest counted.
        let start = format!("retention, {kept} kept: passes ");
        let note = notes(&report)
            .into_iter()
            .find(|n| n.starts_with(&start))
            .unwrap_or_else(|| panic!("{:?}", notes(&report)));
        let passes: Vec<f64> = note[start.len()..]
            .split(" ms")
            .next()
            .unwrap()
            .split(", ")
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(passes.len(), 2, "{note}");
        let quickest = figure(&format!("retention pass (ms), {kept} kept")).unwrap();
        // The figure is the quickest pass: none is below it, and one is it (the note rounds).
        assert!(
            passes
                .iter()
                .all(|p| (quickest.round() - 1.0..).contains(p)),
            "{note}: {quickest}"
        );
        assert!(
            passes.iter().any(|p| (p - quickest).abs() <= 1.0),
            "{note}: {quickest}"
        );
    }
    // What the delivered events take on disk: every row holds its 1 KiB body, and compacting
    // can only shrink what the dead versions of the claims and completions left.
    let left = figure("disk per stored event, as delivery left it (bytes)").unwrap();
    let compacted = figure("disk per stored event, compacted (bytes)").unwrap();
    assert!((1024.0..4096.0).contains(&compacted), "{figures:?}");
    assert!(left >= compacted, "{figures:?}");
    // Every duplicate was answered from the receiver's memory (else a note says how many were
    // not), and the same duplicates, each asking the inbox, were measured beside them.
    let from_inbox = figure("duplicate p99 without the memory (ms)");
    assert!(from_inbox.is_some_and(|v| v > 0.0), "{figures:?}");
    // The tenants phase: its burst's destination answers so that the workers' 32 slots take
    // --tenants-backlog (1 s) to deliver the 300 events, and the quiet integration's p99 is
    // checked as a share of that drain.
    let drain = figure("tenants: backlog's drain (s)").unwrap();
    assert!(drain >= 0.9, "{figures:?}");
    let share = checks
        .iter()
        .find(|c| c["check"] == "tenants: quiet p99 / backlog's drain")
        .unwrap();
    assert!(share["value"].as_f64().unwrap() > 0.0, "{share}");
    assert_eq!(share["target"].as_f64().unwrap(), 0.05, "{share}");
    assert!(
        figure("tenants: quiet p99 beside / alone").is_some_and(|v| v > 0.0),
        "{figures:?}"
    );
    assert!(
        figure("retention pass / inbox read, 4x kept").is_some_and(|v| v > 0.0),
        "{figures:?}"
    );
    let beside_the_ceiling = receiver_beside_the_ceiling(&report, nginx, pgbench);
    assert_eq!(
        figures.len(),
        15 + usize::from(pgbench) + beside_the_ceiling,
        "{figures:?}"
    );
    if pgbench {
        // Three pairs (--pgbench-runs' default), each side measured, the target their median.
        let pairs = report["intake_pgbench_pairs"].as_array().unwrap();
        assert_eq!(pairs.len(), 3, "{pairs:?}");
        let mut ratios: Vec<f64> = pairs
            .iter()
            .map(|p| {
                let (i, g) = (
                    p["intake_events_per_s"].as_f64().unwrap(),
                    p["pgbench_rows_per_s"].as_f64().unwrap(),
                );
                assert!(i > 0.0 && g > 0.0, "{p}");
                let ratio = p["ratio"].as_f64().unwrap();
                assert!((ratio - i / g).abs() < 1e-9, "{p}");
                ratio
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        let paired = checks
            .iter()
            .find(|c| c["check"] == "intake / pgbench 1-row, paired")
            .unwrap();
        assert_eq!(paired["value"].as_f64().unwrap(), ratios[1], "{paired}");
        assert_eq!(paired["target"].as_f64().unwrap(), 1.5, "{paired}");
    }
    // The WAL each measured run wrote (pg_current_wal_lsn), per row, and its rows per commit.
    let wal = report["wal"].as_array().unwrap();
    let runs: Vec<&str> = wal.iter().map(|w| w["run"].as_str().unwrap()).collect();
    // Three runs of pgbench at 1 and 50 rows, the intake, and both sides of three pairs.
    assert_eq!(wal.len(), 1 + 12 * usize::from(pgbench), "{runs:?}");
    let notes = notes(&report);
    let mut alone = 0;
    for w in wal {
        let (run, rows) = (w["run"].as_str().unwrap(), w["rows"].as_i64().unwrap());
        assert!(rows > 0, "{w}");
        let per_commit = w["rows_per_commit"].as_f64().unwrap();
        // WAL flushes are counted for the anchor's runs only.
        let per_flush = w["rows_per_flush"].as_f64();
        assert_eq!(per_flush.is_some(), run.starts_with("pgbench: "), "{w}");
        // The WAL and its flushes are the server's: their bounds hold for a run the bench found
        // alone on it, and a run it did not is said in a note.
        let elsewhere = ["other_sessions", "other_rows"]
            .map(|k| w[k].as_i64().unwrap_or_else(|| panic!("{k}: {w}")));
        if elsewhere != [0, 0] {
            let note = format!("{run}: other databases were at work during it");
            assert!(notes.iter().any(|n| n.starts_with(&note)), "{w} {notes:?}");
        } else {
            alone += 1;
            // Every row carries its 1 KiB body (too small to be compressed or moved out of line).
            let bytes = w["wal_bytes_per_row"].as_f64().unwrap();
            assert!((1024.0..4096.0).contains(&bytes), "{w}");
            // PostgreSQL's group commit puts a few commits behind each flush, never more than
            // the 8 clients have in flight.
            if let Some(per_flush) = per_flush {
                assert!(
                    (0.5 * per_commit..=8.0 * per_commit).contains(&per_flush),
                    "{w}"
                );
            }
        }
        let expected = if run.starts_with("pgbench: 50") {
            50.0
        } else if run.contains("pgbench") {
            1.0
        } else {
            // The receiver's group commit: never more events than requests in flight.
            assert!((1.0..=8.0).contains(&per_commit), "{w}");
            continue;
        };
        assert_eq!(per_commit, expected, "{w}");
    }
    // This binary runs no other test beside the bench: a run shared with another database is
    // the exception (autovacuum elsewhere), not the rule.
    assert!(
        alone * 2 > wal.len(),
        "most runs shared the server with other databases' sessions (is something else writing \
         to it?): {runs:?} {notes:?}"
    );
    assert!(runs.contains(&"hookgate intake (closed loop)"), "{runs:?}");
    assert!(stdout.contains("bytes/row"), "{stdout}");
    assert!(stdout.contains("(no target)"), "{stdout}");
    let rss = checks
        .iter()
        .find(|c| c["check"] == "receiver peak RSS under load (MiB)")
        .unwrap();
    assert!(
        rss["value"].as_f64().unwrap() > 1.0,
        "a real process was measured: {rss}"
    );
    assert!(stdout.contains("targets held"), "{stdout}");
    assert!(
        stdout.contains("pipeline steps (standalone): open loop"),
        "{stdout}"
    );
    // Autovacuum's counters were read around each of the intake's phases and each side of each
    // pair (a failed read is a note), and a phase it worked in is named with what it did.
    for n in report["notes"].as_array().unwrap() {
        let n = n.as_str().unwrap();
        assert!(!n.contains("could not be read"), "{n}");
        assert!(!n.contains("answered from the receiver's memory"), "{n}");
        if n.contains("autovacuum") {
            let phase = n.split(':').next().unwrap();
            let pair_side = phase.starts_with("pair ")
                && (phase.ends_with(", pgbench") || phase.ends_with(", intake"));
            assert!(
                pair_side
                    || [
                        "intake",
                        "duplicates",
                        "duplicates without memory",
                        "half rate"
                    ]
                    .contains(&phase),
                "{n}"
            );
        }
    }
}

/// A wrapper in `dir` that notes the subcommand it was started with in `ran`, then becomes the
/// real binary: (the wrapper, `ran`).
fn noting_wrapper(dir: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let ran = dir.join("ran");
    let other = dir.join("hookgate-other");
    let script = format!(
        "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{BIN}' \"$@\"\n",
        ran.display()
    );
    std::fs::write(&other, script).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    (other, ran)
}

/// `--pipeline-topology split` (or `split-delivering`) at a tiny size: both roles start as
/// processes of their own, the rows carry the topology, the standalone target is not checked.
fn bench_split(topology: &str) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let (other, ran) = noting_wrapper(dir.path());
    let split = [
        "--only",
        "pgbench,pipeline",
        "--pipeline-topology",
        topology,
        "--hookgate",
        other.to_str().unwrap(),
        "--pgbench-run",
        "1s",
        "--pgbench-runs",
        "1",
        "--pipeline-secs",
        "1s",
        "--pipeline-steps",
        "1",
    ];
    let (report, stdout) = bench(&[TINY, &split].concat());
    // Both roles ran, each a process of its own, for the closed loop and for the step.
    let started = std::fs::read_to_string(&ran).unwrap_or_default();
    let count = |role: &str| started.lines().filter(|l| *l == role).count();
    assert_eq!(
        (count("standalone"), count("worker")),
        (2, 2),
        "{started:?}"
    );

    let phases = phases(&report);
    for e in [
        "receiver + workers: intake (closed loop)",
        "receiver + workers: delivered during it",
        "pipeline: highest sustainable rate",
    ] {
        let e = format!("{topology} {e}");
        assert!(phases.contains(&e.as_str()), "{e} missing from {phases:?}");
        let standalone = e.split_once(' ').unwrap().1;
        assert!(!phases.contains(&standalone), "{phases:?}");
    }
    let steps = report[format!("{}_pipeline_steps", topology.replace('-', "_"))]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(steps.len(), 1, "{report}");
    let s = &steps[0];
    assert!(s["delivered"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["cpu"]["hookgate_us"].as_f64().unwrap() > 0.0, "{s}");
    // The receiver process's own timing, whichever process delivers.
    assert!(s["own_answers_p99_ms"].as_f64().is_some(), "{s}");
    assert!(s["own_commits_p99_ms"].as_f64().is_some(), "{s}");
    // The workers' timing, summed over both processes: a receiver without workers of its own
    // hands nothing over, so the worker process claimed and completed every event.
    assert!(s["own_completions_p99_ms"].as_f64().is_some(), "{s}");
    if topology == "split" {
        assert!(s["own_claims_p99_ms"].as_f64().is_some(), "{s}");
    }
    // The target is the standalone product; the split's ratio is a figure beside it.
    let checks = names(&report, "checks", "check");
    assert!(
        !checks.iter().any(|c| c.contains("pipeline sustainable")),
        "{checks:?}"
    );
    let figures = names(&report, "figures", "figure");
    let ratio = format!("{topology} pipeline sustainable / pgbench 1-row");
    assert_eq!(
        figures.contains(&ratio.as_str()),
        pgbench_installed(),
        "{figures:?}"
    );
    assert!(
        stdout.contains(&format!("pipeline steps ({topology}: ")),
        "{stdout}"
    );
    (s.clone(), stdout)
}

#[test]
fn bench_runs_the_pipeline_split_into_a_receiver_and_a_worker_process() {
    let (step, _) = bench_split("split");
    // A receiver without workers of its own hands nothing over: every event is claimed.
    assert_eq!(step["handed_pct"].as_f64().unwrap(), 0.0, "{step}");
    assert!(step["claims_per_1k"].as_f64().unwrap() > 0.0, "{step}");
}

#[test]
fn bench_runs_the_pipeline_with_a_receiver_that_delivers_beside_a_worker_process() {
    let (step, _) = bench_split("split-delivering");
    // Its receiver hands events to its own workers, the worker process beside it.
    let handed = step["handed_pct"].as_f64().unwrap();
    assert!(handed > 0.0 && handed <= 100.0, "{step}");
}

/// `--tenants-topology split`: the tenants phase against a receiver and a worker process, its
/// rows and check named after the topology, both processes started, the topology in the setup.
#[test]
fn bench_runs_the_tenants_phase_split_into_a_receiver_and_a_worker_process() {
    let dir = tempfile::tempdir().unwrap();
    let (other, ran) = noting_wrapper(dir.path());
    let tenants = [
        "--only",
        "tenants",
        "--tenants-topology",
        "split",
        "--tenants-backlog",
        "1s",
        "--hookgate",
        other.to_str().unwrap(),
    ];
    let (report, _) = bench(&[TINY, &tenants].concat());
    // Each wrapper notes its role as it starts: the two may write in either order.
    let started = std::fs::read_to_string(&ran).unwrap_or_default();
    let mut roles: Vec<&str> = started.lines().collect();
    roles.sort();
    assert_eq!(
        roles,
        ["standalone", "worker"],
        "one receiver and one worker process"
    );
    assert_eq!(report["setup"]["tenants_topology"], "split", "{report}");
    let phases = phases(&report);
    for row in [
        "split tenants: quiet integration alone",
        "split tenants: quiet beside another's backlog",
        "split tenants: backlog delivered",
    ] {
        assert!(phases.contains(&row), "{row} missing from {phases:?}");
    }
    assert_eq!(
        names(&report, "checks", "check"),
        ["split tenants: quiet p99 / backlog's drain"]
    );
}

#[test]
fn bench_measures_the_build_given_with_hookgate() {
    let dir = tempfile::tempdir().unwrap();
    let (other, ran) = noting_wrapper(dir.path());
    let path = other.to_str().unwrap();
    let (report, _) = bench(&["--only", "intake", "--events", "200", "--hookgate", path]);
    assert_eq!(report["setup"]["hookgate"], path, "{report}");
    assert!(
        phases(&report).iter().any(|p| p.contains("intake")),
        "{report}"
    );
    let started = std::fs::read_to_string(&ran).unwrap_or_default();
    assert!(started.lines().any(|l| l == "standalone"), "{started:?}");

    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL (tests/run.sh sets it)");
    let missing = dir.path().join("missing");
    let out = Command::new(BIN)
        .args([
            "bench",
            "--only",
            "intake",
            "--database-url",
            &url,
            "--hookgate",
        ])
        .arg(&missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--hookgate") && stderr.contains(missing.to_str().unwrap()),
        "{stderr}"
    );
}

#[test]
fn bench_without_pgbench_says_so_and_invents_nothing() {
    let (report, stdout) = bench(&["--only", "pgbench", "--pgbench", "/nonexistent/pgbench"]);
    assert!(phases(&report).is_empty(), "{report}");
    let notes = report["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("pgbench not found")),
        "{notes:?}"
    );
    assert!(stdout.contains("note: pgbench not found"), "{stdout}");
}

/// An open loop with no connection would wait forever for one: refused before anything runs.
#[test]
fn bench_refuses_an_open_loop_without_connections() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL (tests/run.sh sets it)");
    let out = Command::new(BIN)
        .args(["bench", "--only", "intake", "--database-url", &url])
        .args(["--open-loop-connections", "0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--open-loop-connections must be from 1 to 1024, got 0"),
        "{stderr}"
    );
    assert!(!stderr.contains("bench: database"), "nothing ran: {stderr}");
}

#[test]
fn bench_only_verify_runs_without_a_database() {
    // Port 1 on loopback: nothing listens there. Until round 25 the bench waited 30 s for a
    // connection and failed.
    let url = "postgres://postgres@127.0.0.1:1/none";
    let (report, _, stderr) = bench_on(url, &["--only", "verify", "--verify-divisor", "200"]);
    assert!(!stderr.contains("bench: database"), "{stderr}");
    let checks = names(&report, "checks", "check");
    assert_eq!(
        checks,
        [
            "HMAC verify / raw SHA-256, 1 KiB",
            "HMAC verify / raw SHA-256, 16 KiB",
            "Ed25519 verify / ed25519-dalek",
            "fields / serde_json Value, intake body",
            "fields / serde_json Value, Stripe event",
        ]
    );
    // The machine it ran on (round 46): this one, as the kernel dates its start.
    let btime = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime ").map(|v| v.trim().parse().unwrap()))
    });
    if let Some(btime) = btime {
        let at = chrono::DateTime::from_timestamp(btime, 0).unwrap();
        let at = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        assert_eq!(
            report["setup"]["host"]["booted_at"],
            at.as_str(),
            "{report}"
        );
        assert!(report["setup"]["host"]["cpu_model"].is_string(), "{report}");
    }
}

/// Commits one row a transaction to a database of its own on the bench's server, on a thread of
/// its own, until dropped: another tenant of the server writing while the bench measures.
struct WriterElsewhere {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl WriterElsewhere {
    const DB: &str = "hookgate_bench_elsewhere";

    /// Writes through one session for as long as it runs, or, `briefly`, each row through a
    /// session of its own that leaves once the row is committed, 50 ms apart.
    fn start(url: &str, briefly: bool) -> Self {
        use sqlx::Connection;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let admin = url.to_string();
        let own = rt.block_on(async {
            let mut c = sqlx::PgConnection::connect(&admin).await.unwrap();
            for sql in [
                format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", Self::DB),
                format!("CREATE DATABASE {}", Self::DB),
            ] {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(&mut c)
                    .await
                    .unwrap();
            }
            let own = format!("{}/{}", admin.rsplit_once('/').unwrap().0, Self::DB);
            let mut c = sqlx::PgConnection::connect(&own).await.unwrap();
            sqlx::raw_sql("CREATE TABLE rows (n int8, body text)")
                .execute(&mut c)
                .await
                .unwrap();
            own
        });
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            rt.block_on(async {
                let insert = "INSERT INTO rows VALUES ($1, repeat('x', 1024))";
                let mut c = sqlx::PgConnection::connect(&own).await.unwrap();
                let mut n = 0u64;
                while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    if briefly {
                        let mut brief = sqlx::PgConnection::connect(&own).await.unwrap();
                        let q = sqlx::query(insert).bind(n as i64);
                        q.execute(&mut brief).await.unwrap();
                        brief.close().await.unwrap();
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    } else {
                        let q = sqlx::query(insert).bind(n as i64);
                        q.execute(&mut c).await.unwrap();
                    }
                    n += 1;
                }
                c.close().await.unwrap();
                let mut c = sqlx::PgConnection::connect(&admin).await.unwrap();
                let drop = format!("DROP DATABASE {}", Self::DB);
                sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
                    .execute(&mut c)
                    .await
                    .unwrap();
                n
            })
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the writer: the rows it committed.
    fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for WriterElsewhere {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An intake run while a [`WriterElsewhere`] (`briefly` or not) writes to another database: its
/// row of the WAL table, the report's notes about the run, and stdout.
fn intake_beside(briefly: bool) -> (serde_json::Value, Vec<String>, String) {
    let _one_at_a_time = BENCH_DB.lock().unwrap_or_else(|e| e.into_inner());
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL (tests/run.sh sets it)");
    let writer = WriterElsewhere::start(&url, briefly);
    let (report, stdout, _) = bench_on(
        &url,
        &[
            TINY,
            &[
                "--only",
                "intake",
                "--latency-run",
                "1s",
                "--pgbench",
                "/nonexistent/pgbench",
            ],
        ]
        .concat(),
    );
    let written = writer.stop();
    assert!(written > 0, "the writer wrote");
    let intake = report["wal"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["run"] == "hookgate intake (closed loop)")
        .unwrap_or_else(|| panic!("{report}"))
        .clone();
    let noted = notes(&report)
        .into_iter()
        .filter(|n| n.starts_with("hookgate intake (closed loop): other databases were at work"))
        .map(str::to_string)
        .collect();
    (intake, noted, stdout)
}

/// The WAL table's figures are the server's: a run that another database wrote during says so,
/// in its `elsewhere` column and in a note, where before it silently counted the other's WAL.
#[test]
fn bench_notes_a_run_another_database_wrote_during() {
    let (intake, noted, stdout) = intake_beside(false);
    let sessions = intake["other_sessions"].as_i64().unwrap();
    assert!(sessions >= 1, "{intake}");
    assert_eq!(noted.len(), 1, "{noted:?}");
    assert!(
        noted[0].contains(&format!("({sessions} session")),
        "{noted:?}"
    );
    assert!(stdout.contains("elsewhere s/rows"), "{stdout}");
}

/// Sessions that connect, write and leave within a run are gone when it ends: the rows they
/// wrote there tell. Until round 40 only the sessions were counted, which saw such a writer when
/// one of its sessions happened to be connected at the run's end: in three runs of this test the
/// session count read 0 each time, beside 5-6 rows written.
#[test]
fn bench_notes_a_run_sessions_of_another_database_wrote_and_left_during() {
    let (intake, noted, _) = intake_beside(true);
    let rows = intake["other_rows"].as_i64().unwrap();
    assert!(rows >= 1, "{intake}");
    assert_eq!(noted.len(), 1, "{noted:?}");
    let written = format!("{rows} row{} written)", if rows == 1 { "" } else { "s" });
    assert!(noted[0].contains(&written), "{noted:?}");
}

/// A checkpoint during one of the intake's latency phases is named in a note, as autovacuum's
/// work is, so that a miss beside one says so (round 46). Here a session asks for one every
/// 100 ms while the phases run.
#[test]
fn bench_notes_a_checkpoint_during_a_phase() {
    let _one_at_a_time = BENCH_DB.lock().unwrap_or_else(|e| e.into_inner());
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL (tests/run.sh sets it)");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let checkpointer = {
        let (url, stop) = (url.clone(), stop.clone());
        std::thread::spawn(move || {
            use sqlx::Connection;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
                let mut asked = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    sqlx::raw_sql("CHECKPOINT").execute(&mut c).await.unwrap();
                    asked += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                asked
            })
        })
    };
    let args = ["--only", "intake", "--latency-run", "1s"];
    let (report, _, _) = bench_on(
        &url,
        &[TINY, &args, &["--pgbench", "/nonexistent/pgbench"]].concat(),
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(checkpointer.join().unwrap() > 0);
    let notes = notes(&report);
    assert!(
        notes.iter().all(|n| !n.contains("could not be read")),
        "{notes:?}"
    );
    let phases = [
        "intake",
        "duplicates",
        "half rate",
        "duplicates without memory",
    ];
    let checkpointed: Vec<&str> = notes
        .iter()
        .copied()
        .filter(|n| n.contains(": checkpoints: "))
        .collect();
    assert!(
        checkpointed.iter().any(|n| n.contains("began")),
        "{notes:?}"
    );
    for n in &checkpointed {
        let phase = n.split(": checkpoints: ").next().unwrap();
        assert!(phases.contains(&phase), "{n}");
        assert!(
            n.ends_with("(on the disk the commits' WAL flushes use)"),
            "{n}"
        );
    }
}

/// The CPU per request of each HTTP run and each pair's sides (Linux), and the figures read from
/// it, each equal to what the table says; how many of those figures the report has.
fn receiver_beside_the_ceiling(report: &Value, nginx: bool, pgbench: bool) -> usize {
    let figures = report["figures"].as_array().unwrap();
    let figure = |name: &str| figure_of(report, name);
    let cpu = report["cpu_per_request"].as_array().unwrap();
    let split = |run: &str| {
        cpu.iter()
            .find(|c| c["run"] == run)
            .unwrap_or_else(|| panic!("no {run} in {cpu:?}"))
    };
    let (server, ceiling_row) = if nginx {
        ("nginx", "HTTP ceiling: nginx, fixed 200")
    } else {
        ("hyper", "HTTP ceiling: hyper server, fixed 200")
    };
    let (intake, dups) = (
        "hookgate intake (HTTP, verify, commit)",
        "duplicates (re-sent accepted events)",
    );
    let mut runs = vec![
        "HTTP ceiling: hyper server, fixed 200",
        intake,
        dups,
        "duplicates, no memory (each asks the inbox)",
        "intake at half the max rate (open loop)",
    ];
    if nginx {
        runs.push(ceiling_row);
    }
    let pairs: Vec<String> = (1..=3)
        .flat_map(|k| {
            [
                format!("pair {k}: pgbench 1-row"),
                format!("pair {k}: intake"),
            ]
        })
        .collect();
    if pgbench {
        runs.extend(pairs.iter().map(String::as_str));
    }
    assert_eq!(cpu.len(), runs.len(), "{cpu:?}");
    for run in &runs {
        let c = split(run);
        for field in ["load_generator_us", "rest_us"] {
            assert!(c[field].as_f64().unwrap() >= 0.0, "{field} in {c}");
        }
        let busy = c["busy_pct"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&busy), "{c}");
        // The hypervisor's share is part of busy, and nobody's CPU per request.
        let stolen = c["stolen_pct"].as_f64().unwrap();
        assert!((0.0..=busy).contains(&stolen), "{c}");
        // pgbench has no server process of its own: PostgreSQL is in the rest.
        assert_eq!(c["server_us"].is_null(), run.contains("pgbench"), "{c}");
    }
    // 300 ms of load each: the servers' CPU is counted (nginx's workers with its master).
    let hyper = split("HTTP ceiling: hyper server, fixed 200")["server_us"].as_f64();
    assert!(hyper.unwrap() > 0.0, "{cpu:?}");
    let theirs = split(ceiling_row)["server_us"].as_f64().unwrap();
    assert!(theirs > 0.0, "{cpu:?}");
    let rate = |phase: &str| {
        report["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["phase"] == phase)
            .unwrap()["ops_per_s"]
            .as_f64()
            .unwrap()
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    let mut present = 0;
    let from_memory = figure(&format!("duplicates from memory / HTTP ceiling ({server})"));
    assert!(
        close(from_memory.unwrap(), rate(dups) / rate(ceiling_row)),
        "{figures:?}"
    );
    present += 1;
    let i = split(intake);
    let room = i["load_generator_us"].as_f64().unwrap() + i["rest_us"].as_f64().unwrap();
    let free = figure(&format!(
        "intake with a receiver free of CPU / HTTP ceiling ({server})"
    ));
    assert_eq!(free.is_some(), room > 0.0, "{figures:?}");
    if let Some(free) = free {
        let cores = report["setup"]["cpus"].as_f64().unwrap();
        assert!(
            close(free, cores * 1e6 / room / rate(ceiling_row)),
            "{free}"
        );
        present += 1;
    }
    for (run, what) in [
        (intake, "receiver CPU per new event"),
        (dups, "receiver CPU per duplicate"),
    ] {
        let f = figure(&format!("{what} / {server}'s per request"));
        let ours = split(run)["server_us"].as_f64().unwrap();
        assert!(close(f.unwrap(), ours / theirs), "{what}: {figures:?}");
        present += 1;
    }
    let database = figure("PostgreSQL CPU per row, intake / pgbench (pairs)");
    if pgbench {
        let measured = (1..=3).any(|k| {
            split(&format!("pair {k}: pgbench 1-row"))["rest_us"]
                .as_f64()
                .unwrap()
                > 0.0
        });
        assert_eq!(database.is_some(), measured, "{figures:?}");
        present += usize::from(measured);
    } else {
        assert_eq!(database, None, "{figures:?}");
    }
    present
}
