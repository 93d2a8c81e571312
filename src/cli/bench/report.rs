//! The report that puts the phases side by side: the figures table, the checks against their
//! targets, the tables of their own (pipeline steps, pairs, WAL) and the notes; as text and JSON.

use super::BenchArgs;
use super::stats::Run;
use serde_json::{Value, json};
use std::fmt::Write;

/// A row of the figures table.
pub struct Row {
    name: String,
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    per_op: bool,
    /// False when only the rate was measured (worker delivery).
    has_latency: bool,
}

impl Row {
    pub fn throughput(name: &str, run: &Run) -> Self {
        Self {
            name: name.into(),
            rate: run.rate(),
            p50_ms: run.p50_ms(),
            p99_ms: run.p99_ms(),
            per_op: false,
            has_latency: !run.latencies.is_empty(),
        }
    }

    /// A figure from a tool that reports only its rate (pgbench), or a rate found by search.
    pub fn rate(name: &str, rate: f64) -> Self {
        Self {
            name: name.into(),
            rate,
            p50_ms: 0.0,
            p99_ms: 0.0,
            per_op: false,
            has_latency: false,
        }
    }

    /// A CPU-bound loop: the rate is operations per second of one core.
    pub fn per_op(name: &str, run: &Run) -> Self {
        Self {
            per_op: true,
            ..Self::throughput(name, run)
        }
    }
}

/// A figure checked against its target.
struct Check {
    name: String,
    value: f64,
    target: f64,
    at_least: bool,
}

impl Check {
    fn holds(&self) -> bool {
        if self.at_least {
            self.value >= self.target
        } else {
            self.value <= self.target
        }
    }
}

/// A table of its own (the pipeline's steps): its text, and its JSON under `key`.
struct Section {
    key: String,
    text: String,
    json: Value,
}

pub struct Report {
    setup: Value,
    rows: Vec<Row>,
    checks: Vec<Check>,
    /// Ratios printed beside the checks, without a target of their own.
    figures: Vec<(String, f64)>,
    sections: Vec<Section>,
    /// What was skipped and why (a missing tool, a ratio without its other side).
    notes: Vec<String>,
    wal: super::wal::Table,
    cpu: super::cpu_table::Table,
}

impl Report {
    pub fn new(args: &BenchArgs) -> Self {
        Self {
            setup: json!({
                "events": args.events,
                "concurrency": args.concurrency,
                "body_bytes": args.body_bytes,
                "worker_concurrency": args.worker_concurrency,
                "pgbench_run_s": args.pgbench_run.as_secs_f64(),
                "pgbench_runs": args.pgbench_runs,
                "pipeline_step_s": args.pipeline_secs.as_secs_f64(),
                "pipeline_steps": args.pipeline_steps,
                "tenants_backlog_s": args.tenants_backlog.as_secs_f64(),
                "pipeline_topology": args.pipeline_topology.to_string(),
                "tenants_topology": args.tenants_topology.to_string(),
                "retention_events": args.retention_events,
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
                "host": super::host::describe(),
                "version": env!("CARGO_PKG_VERSION"),
                "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
                // The build measured, when it is not the bench's own.
                "hookgate": args.hookgate.as_ref().map(|p| p.display().to_string()),
            }),
            rows: Vec::new(),
            checks: Vec::new(),
            figures: Vec::new(),
            sections: Vec::new(),
            notes: Vec::new(),
            wal: Default::default(),
            cpu: Default::default(),
        }
    }

    pub fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    /// A table printed after the figures, and in the JSON under `key`.
    pub fn section(&mut self, key: &str, text: String, json: Value) {
        self.sections.push(Section {
            key: key.into(),
            text,
            json,
        });
    }

    /// What PostgreSQL wrote to its WAL during a measured run; `None` (its counters could not
    /// be read, or the run added no row) leaves the run out. A run that other databases'
    /// sessions shared the server with gets a note.
    pub fn wal(&mut self, run: &str, w: Option<super::wal::PerRow>) {
        if let Some(w) = w {
            if let Some(note) = super::wal::Table::disturbed(run, &w) {
                self.note(note);
            }
            self.wal.push(run, w);
        }
    }

    /// A run's CPU per request by party; `None` (`/proc` could not be read) leaves it out.
    pub fn cpu(&mut self, run: &str, split: Option<super::cpu::PerEvent>) {
        if let Some(split) = split {
            self.cpu.push(run, split, true);
        }
    }

    /// The same for a run without a server process of its own (pgbench).
    pub fn cpu_without_server(&mut self, run: &str, split: Option<super::cpu::PerEvent>) {
        if let Some(split) = split {
            self.cpu.push(run, split, false);
        }
    }

    /// A run's CPU per request, if it was measured.
    pub fn cpu_of(&self, run: &str) -> Option<super::cpu::PerEvent> {
        self.cpu.get(run)
    }

    /// Something the reader must know about this run (also said on stderr when it happens).
    pub fn note(&mut self, note: String) {
        eprintln!("bench: {note}");
        self.notes.push(note);
    }

    /// A ratio that must reach `target`.
    pub fn ratio(&mut self, name: &str, value: f64, target: f64) {
        self.check(name, value, target, true);
    }

    /// A ratio that must stay at or under `target`.
    pub fn ratio_max(&mut self, name: &str, value: f64, target: f64) {
        self.check(name, value, target, false);
    }

    /// A figure that must stay at or under `target`.
    pub fn limit(&mut self, name: &str, value: f64, target: f64) {
        self.check(name, value, target, false);
    }

    /// A figure that must reach `target`.
    pub fn limit_min(&mut self, name: &str, value: f64, target: f64) {
        self.check(name, value, target, true);
    }

    /// A ratio that explains a check (how much of its target a primitive uses by itself); it
    /// has no target and does not count among the targets held.
    pub fn figure(&mut self, name: &str, value: f64) {
        self.figures.push((name.into(), value));
    }

    fn check(&mut self, name: &str, value: f64, target: f64, at_least: bool) {
        self.checks.push(Check {
            name: name.into(),
            value,
            target,
            at_least,
        });
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "hookgate bench: {}", self.setup);
        let _ = writeln!(
            out,
            "\n{:<44} {:>12} {:>10} {:>10}",
            "phase", "ops/s", "p50", "p99"
        );
        for r in &self.rows {
            let (p50, p99) = if !r.has_latency {
                ("-".into(), "-".into())
            } else if r.per_op {
                (
                    format!("{:.2}µs", r.p50_ms * 1e3),
                    format!("{:.2}µs", r.p99_ms * 1e3),
                )
            } else {
                (format!("{:.2}ms", r.p50_ms), format!("{:.2}ms", r.p99_ms))
            };
            let _ = writeln!(
                out,
                "{:<44} {:>12.0} {:>10} {:>10}",
                r.name, r.rate, p50, p99
            );
        }
        for s in &self.sections {
            let _ = write!(out, "\n{}", s.text);
        }
        if let Some(wal) = self.wal.text() {
            let _ = write!(out, "\n{wal}");
        }
        if let Some(cpu) = self.cpu.text() {
            let _ = write!(out, "\n{cpu}");
        }
        let _ = writeln!(
            out,
            "\n{:<44} {:>10} {:>10}  result",
            "check", "value", "target"
        );
        for c in &self.checks {
            let op = if c.at_least { ">=" } else { "<=" };
            let verdict = if c.holds() { "ok" } else { "MISSED" };
            let _ = writeln!(
                out,
                "{:<44} {:>10.2} {:>3}{:>7.2}  {verdict}",
                c.name, c.value, op, c.target
            );
        }
        for (name, value) in &self.figures {
            let _ = writeln!(out, "{name:<44} {value:>10.2} {:>10}  (no target)", "");
        }
        let missed = self.checks.iter().filter(|c| !c.holds()).count();
        let _ = writeln!(
            out,
            "\n{} of {} targets held",
            self.checks.len() - missed,
            self.checks.len()
        );
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }

    pub fn json(&self) -> String {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                // No latency measured (pgbench, worker delivery, searched rates): null, not 0.
                let ms = |v: f64| r.has_latency.then_some(v);
                json!({"phase": r.name, "ops_per_s": r.rate, "p50_ms": ms(r.p50_ms), "p99_ms": ms(r.p99_ms)})
            })
            .collect();
        let checks: Vec<Value> = self
            .checks
            .iter()
            .map(|c| json!({"check": c.name, "value": c.value, "target": c.target, "at_least": c.at_least, "holds": c.holds()}))
            .collect();
        let figures: Vec<Value> = self
            .figures
            .iter()
            .map(|(name, value)| json!({"figure": name, "value": value}))
            .collect();
        let mut report = json!({"setup": self.setup, "phases": rows, "checks": checks,
            "figures": figures, "notes": self.notes});
        for s in &self.sections {
            report[&s.key] = s.json.clone();
        }
        report["wal"] = self.wal.json();
        report["cpu_per_request"] = self.cpu.json();
        serde_json::to_string_pretty(&report).expect("plain JSON")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_compare_in_their_direction() {
        let c = |value, target, at_least| Check {
            name: "x".into(),
            value,
            target,
            at_least,
        };
        assert!(c(1.5, 1.5, true).holds());
        assert!(!c(1.49, 1.5, true).holds());
        assert!(c(5.0, 5.0, false).holds());
        assert!(!c(5.01, 5.0, false).holds());
    }

    #[test]
    fn figures_are_printed_beside_the_checks_but_are_not_targets() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let args = <Cli as clap::Parser>::parse_from(["bench"]).bench;
        let mut report = Report::new(&args);
        report.ratio_max("verify / raw", 1.5, 1.2);
        report.figure("primitive / raw", 1.14);
        let text = report.text();
        assert!(text.contains("0 of 1 targets held"), "{text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("primitive / raw"))
            .unwrap();
        assert!(
            line.contains("1.14") && line.ends_with("(no target)"),
            "{line}"
        );
        let json: Value = serde_json::from_str(&report.json()).unwrap();
        assert_eq!(
            json["figures"],
            json!([{"figure": "primitive / raw", "value": 1.14}])
        );
        assert_eq!(json["checks"].as_array().unwrap().len(), 1);
    }
}
