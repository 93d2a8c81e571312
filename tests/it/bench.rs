//! `hookgate bench` end to end at a tiny size, so the command in the README keeps working: every
//! phase runs against the real PostgreSQL and child processes, and the report carries every figure.
//! (The figures themselves are only meaningful from a release build; see docs/performance.md.)

use serde_json::Value;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_hookgate");

#[test]
fn bench_runs_every_phase_and_reports_every_figure() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL (tests/run.sh sets it)");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = Command::new(BIN)
        .args(["bench", "--events", "300", "--concurrency", "8"])
        .args(["--latency-run", "1s", "--verify-divisor", "200"])
        .args(["--database-url", &url, "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed:\n{stdout}\n{stderr}");

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let phases: Vec<&str> = report["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    for expected in [
        "baseline A: 1 row/transaction",
        "baseline B: 50 rows/transaction",
        "hookgate intake (HTTP, verify, commit)",
        "duplicates (re-sent accepted events)",
        "intake at half the max rate (open loop)",
        "worker delivery to a local sink",
        "verify HMAC-SHA256 (Stripe), 1 KiB",
        "verify Ed25519, 1 KiB",
    ] {
        assert!(
            phases.contains(&expected),
            "{expected} missing from {phases:?}"
        );
    }
    for p in report["phases"].as_array().unwrap() {
        assert!(p["ops_per_s"].as_f64().unwrap() > 0.0, "{p}");
    }
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 10, "{checks:?}");
    let rss = checks
        .iter()
        .find(|c| c["check"] == "receiver peak RSS under load (MiB)")
        .unwrap();
    assert!(
        rss["value"].as_f64().unwrap() > 1.0,
        "a real process was measured: {rss}"
    );
    assert!(stdout.contains("targets held"), "{stdout}");
}
