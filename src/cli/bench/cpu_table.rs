//! The CPU per request of the intake's HTTP runs and of both sides of each pair, side by side:
//! the servers of the HTTP ceiling against the receiver, and pgbench against the intake, so that
//! each run says how much of the ceiling's gap is the receiver's own work and how much the
//! database's beside it on the same cores.

use super::cpu::PerEvent;
use serde_json::{Value, json};

/// CPU per request of each run, by party: the server (none for pgbench, whose server is
/// PostgreSQL, counted in the rest), the load generator, the rest.
#[derive(Debug, Default)]
pub struct Table(Vec<(String, PerEvent, bool)>);

impl Table {
    /// A run whose `servers` were counted as `hookgate_us`; without, that column is not shown.
    pub fn push(&mut self, run: &str, split: PerEvent, servers: bool) {
        self.0.push((run.into(), split, servers));
    }

    pub fn get(&self, run: &str) -> Option<PerEvent> {
        self.0.iter().find(|(r, ..)| r == run).map(|(_, p, _)| *p)
    }

    /// The table, or nothing when no run was measured (not Linux).
    pub fn text(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| {
            let mut out = format!(
                "{:<44} {:>12} {:>12} {:>12} {:>11} {:>8}\n",
                "CPU per request (µs)", "server", "load gen", "rest (PG)", "cores busy", "stolen"
            );
            for (run, p, servers) in &self.0 {
                let server = if *servers {
                    format!("{:.1}", p.hookgate_us)
                } else {
                    "-".into()
                };
                out += &format!(
                    "{run:<44} {server:>12} {:>12.1} {:>12.1} {:>10.0}% {:>7.1}%\n",
                    p.bench_us, p.rest_us, p.busy_pct, p.stolen_pct
                );
            }
            out
        })
    }

    pub fn json(&self) -> Value {
        self.0
            .iter()
            .map(|(run, p, servers)| {
                json!({"run": run, "server_us": servers.then_some(p.hookgate_us),
                    "load_generator_us": p.bench_us, "rest_us": p.rest_us, "busy_pct": p.busy_pct,
                    "stolen_pct": p.stolen_pct})
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_run_by_party() {
        let mut t = Table::default();
        assert_eq!(t.text(), None);
        let split = |server| PerEvent {
            hookgate_us: server,
            bench_us: 4.0,
            rest_us: 20.0,
            busy_pct: 66.4,
            stolen_pct: 2.3,
        };
        t.push("HTTP ceiling: nginx", split(6.5), true);
        t.push("hookgate intake", split(28.25), true);
        t.push("pair 1: pgbench 1-row", split(0.0), false);
        let text = t.text().unwrap();
        assert!(text.contains("hookgate intake"), "{text}");
        assert!(
            text.contains("28.2") && text.contains("6.5") && text.contains("66%"),
            "{text}"
        );
        assert!(
            text.lines().next().unwrap().ends_with("stolen") && text.contains(" 2.3%\n"),
            "{text}"
        );
        assert_eq!(t.get("hookgate intake").unwrap().hookgate_us, 28.25);
        assert_eq!(t.get("missing"), None);
        let json = t.json();
        assert_eq!(json[1]["run"], "hookgate intake");
        assert_eq!(json[1]["server_us"], 28.25);
        assert_eq!(json[0]["load_generator_us"], 4.0);
        // pgbench has no server of its own to count: a dash, and null in the JSON.
        let pgbench = text.lines().find(|l| l.starts_with("pair 1")).unwrap();
        assert_eq!(pgbench.split_whitespace().nth(4), Some("-"), "{pgbench}");
        assert!(json[2]["server_us"].is_null());
    }
}
