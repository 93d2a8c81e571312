//! Every duration and count flag has a range, checked before a role opens anything: the real
//! binary, given a value past either end, exits at once with an error naming the flag, and given
//! every flag at either end of its range it starts, serves and stops on SIGTERM. Before the
//! ranges, `--poll 0s` spun a core and ignored SIGINT, a 30-day `--db-statement-timeout`
//! panicked SQLite's driver, a huge `--max-in-flight` or `--commit-concurrency` panicked tokio's
//! semaphore, and a
//! `--commit-window` of seconds held requests past the provider's patience.

use crate::common::procs::{BIN, Proc, free_port};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/examples")
}

/// Runs `hookgate <args>` to its end (20 s at most: a role that starts would run forever, and
/// fail the test by timing out); returns its exit code and stderr.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr");
    let mut child = Proc(
        Command::new(BIN)
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .current_dir(dir.path())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "`hookgate {}` is still running: the value was taken",
            args.join(" ")
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let created: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "stderr")
        .collect();
    assert!(
        created.is_empty(),
        "`hookgate {}` created {created:?} before refusing",
        args.join(" ")
    );
    (status.code(), std::fs::read_to_string(log).unwrap())
}

/// (role's arguments, flag, a value past its range).
fn past_the_range() -> Vec<(Vec<&'static str>, &'static str, &'static str)> {
    let standalone = vec!["standalone", "-f", "EXAMPLES", "--listen", "127.0.0.1:0"];
    let worker = vec!["worker", "-f", "EXAMPLES"];
    let receiver = vec![
        "receiver",
        "--namespace",
        "hookgate",
        "--database-url",
        "sqlite://receiver.db",
    ];
    let controller = vec!["controller", "--namespace", "hookgate"];
    let mut cases = Vec::new();
    for (flag, low, high) in [
        ("--poll", "0s", "2h"),
        ("--lease", "1ms", "2days"),
        ("--grace", "", "2h"),
        ("--orphan-grace", "", "366days"),
        ("--commit-window", "", "10s"),
        ("--dedupe-cache-ttl", "", "31days"),
        ("--db-acquire-timeout", "0s", "2days"),
        ("--db-statement-timeout", "0s", "30days"),
        ("--header-timeout", "0s", "2h"),
        ("--body-timeout", "0s", "2h"),
        ("--max-in-flight", "0", "18446744073709551615"),
        ("--max-connections", "0", "1000001"),
        ("--commit-concurrency", "0", "18446744073709551615"),
    ] {
        for value in [low, high].into_iter().filter(|v| !v.is_empty()) {
            cases.push((standalone.clone(), flag, value));
        }
    }
    cases.push((worker.clone(), "--poll", "0s"));
    cases.push((worker.clone(), "--db-statement-timeout", "30days"));
    cases.push((worker.clone(), "--catch-up-passes", "0"));
    cases.push((worker, "--catch-up-passes", "257"));
    cases.push((receiver.clone(), "--max-in-flight", "18446744073709551615"));
    // Worker flags are checked without the workers too: the value is a mistake either way.
    cases.push((receiver, "--lease", "1ms"));
    cases.push((
        vec!["standalone", "-f", "EXAMPLES", "--no-workers"],
        "--poll",
        "0s",
    ));
    cases.push((controller, "--db-statement-timeout", "30days"));
    cases
}

#[test]
fn a_value_past_a_flags_range_stops_the_role_at_once_naming_the_flag() {
    let examples = examples();
    let examples = examples.to_str().unwrap();
    for (role, flag, value) in past_the_range() {
        let mut args: Vec<&str> = role
            .iter()
            .map(|a| if *a == "EXAMPLES" { examples } else { a })
            .collect();
        args.extend(["--admin-listen", "", flag, value]);
        let (code, stderr) = refused(&args);
        let shown = format!("`hookgate {}`: {code:?}\n{stderr}", args.join(" "));
        assert_eq!(code, Some(1), "{shown}");
        assert!(!stderr.contains("panicked"), "{shown}");
        assert!(
            stderr.contains(&format!("{flag} must be from ")),
            "the error names the flag and its range: {shown}"
        );
    }
}

/// Starts standalone with `flags` on a fresh SQLite file, waits for /readyz, sends SIGTERM and
/// waits (30 s at most) for it to exit 0.
async fn starts_and_stops(flags: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let admin = free_port();
    let db = format!("sqlite://{}", dir.path().join("edges.db").display());
    let log = dir.path().join("standalone.log");
    let mut child = Proc(
        Command::new(BIN)
            .args(["standalone", "-f"])
            .arg(examples())
            .args(["--listen", "127.0.0.1:0", "--database-url", &db])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .args(flags)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let ready = format!("http://127.0.0.1:{admin}/readyz");
    crate::common::procs::wait_ready(&ready, "standalone", &mut child.0, &log).await;
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            Instant::now() < deadline,
            "{flags:?}: no exit after SIGTERM:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(exited.success(), "{flags:?}: {exited}\n{log}");
    assert!(!log.contains("panicked"), "{flags:?}:\n{log}");
}

#[tokio::test]
async fn every_flag_at_either_end_of_its_range_starts_and_stops() {
    starts_and_stops(&[
        "--poll",
        "10ms",
        "--lease",
        "1s",
        "--grace",
        "0s",
        "--orphan-grace",
        "0s",
        "--commit-window",
        "0s",
        "--dedupe-cache-ttl",
        "0s",
        // Its lowest, 100ms, is shorter than opening a connection may take on a loaded machine.
        "--db-acquire-timeout",
        "1s",
        "--db-statement-timeout",
        "10ms",
        "--header-timeout",
        "1ms",
        "--body-timeout",
        "1ms",
        "--max-in-flight",
        "1",
        "--max-connections",
        "1",
        "--commit-concurrency",
        "1",
        "--catch-up-passes",
        "1",
    ])
    .await;
    starts_and_stops(&[
        "--poll",
        "1h",
        "--lease",
        "1day",
        "--grace",
        "1h",
        "--orphan-grace",
        "1year",
        "--commit-window",
        "1s",
        "--dedupe-cache-ttl",
        "30days",
        "--db-acquire-timeout",
        "1day",
        "--db-statement-timeout",
        "1day",
        "--header-timeout",
        "1h",
        "--body-timeout",
        "1h",
        "--max-in-flight",
        "1000000",
        "--max-connections",
        "1000000",
        // More transactions in flight than the pool's connections: they wait for one.
        "--commit-concurrency",
        "1000",
        "--catch-up-passes",
        "256",
    ])
    .await;
}

/// `hookgate bench` too: its flags are checked before it connects. A huge `--events` or
/// `--body-bytes` panicked on allocation, a huge `--concurrency` tried to open that many
/// connections, and an infinite `--pipeline-start` had no schedule.
#[test]
fn the_bench_refuses_a_value_past_a_flags_range_before_it_connects() {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://127.0.0.1:1/x".into());
    for (flag, value) in [
        ("--events", "99"),
        ("--events", "18446744073709551615"),
        ("--body-bytes", "127"),
        ("--body-bytes", "18446744073709551615"),
        ("--concurrency", "0"),
        ("--concurrency", "18446744073709551615"),
        ("--open-loop-connections", "0"),
        ("--open-loop-connections", "1000000"),
        ("--worker-concurrency", "0"),
        ("--pipeline-steps", "0"),
        ("--pipeline-steps", "18446744073709551615"),
        ("--pipeline-secs", "0s"),
        ("--pipeline-secs", "2h"),
        ("--latency-run", "0s"),
        ("--pgbench-run", "500000000years"),
        ("--ceiling-run", "0s"),
        ("--pipeline-start", "inf"),
        ("--pipeline-start", "NaN"),
        ("--pipeline-start", "0"),
        ("--retention-events", "999"),
        ("--retention-events", "18446744073709551615"),
    ] {
        let args = [
            "bench",
            "--database-url",
            &url,
            "--only",
            "intake",
            flag,
            value,
        ];
        let (code, stderr) = refused(&args);
        let shown = format!("`hookgate {}`: {code:?}\n{stderr}", args.join(" "));
        assert_eq!(code, Some(1), "{shown}");
        assert!(!stderr.contains("panicked"), "{shown}");
        assert!(!stderr.contains("bench: database"), "nothing ran: {shown}");
        assert!(
            stderr.contains(&format!("{flag} must be ")),
            "the error names the flag: {shown}"
        );
    }
}
