//! Where a pipeline step's CPU went, per accepted event: the `hookgate` children (receiver and
//! workers, in one process or two), the bench process (load generator and sink), and the rest of the machine, which on a
//! bench run on one box is PostgreSQL. Read from Linux's `/proc` counters before and after the
//! load; on other systems the figures are absent.
//!
//! The counters are in clock ticks of `USER_HZ`, which the kernel fixes at 100 for `/proc` on
//! every architecture hookgate builds for.
//!
//! The same split serves the intake's HTTP runs and pgbench's (`cpu_table.rs`).

use serde::Serialize;
use std::future::Future;

const TICKS_PER_SECOND: f64 = 100.0;

/// The counters at one instant, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    busy: u64,
    total: u64,
    stolen: u64,
    child: u64,
    me: u64,
}

/// CPU time per accepted event over a step, and how busy the machine's cores were.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerEvent {
    pub hookgate_us: f64,
    pub bench_us: f64,
    /// Everything else the machine ran: PostgreSQL when it shares the machine. Not the time
    /// the hypervisor took (`stolen_pct`), which no process here spent.
    pub rest_us: f64,
    /// Of all cores, in percent, the hypervisor's share included.
    pub busy_pct: f64,
    /// Of all cores, in percent: time the hypervisor ran something else while a process here
    /// was ready to run (`steal` in `/proc/stat`); 0 on a machine of its own.
    pub stolen_pct: f64,
}

/// The counters now, `children` counted together as hookgate's; `None` when `/proc` cannot be
/// read (not Linux, or a child is gone).
pub fn sample(children: &[u32]) -> Option<Sample> {
    let (busy, total, stolen) = machine(&std::fs::read_to_string("/proc/stat").ok()?)?;
    let mut child = 0;
    for pid in children {
        child += process(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    }
    // The bench's own CPU with that of the children it reaped meanwhile: pgbench, the load
    // generator of its runs, is one.
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    let me = process(&own)? + reaped(&own)?;
    Some(Sample {
        busy,
        total,
        stolen,
        child,
        me,
    })
}

/// From `before` to `after`, over `events` accepted events.
pub fn per_event(before: Sample, after: Sample, events: usize) -> Option<PerEvent> {
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
    let (busy, total) = (d(before.busy, after.busy), d(before.total, after.total));
    if events == 0 || total == 0.0 {
        return None;
    }
    let us = |ticks: f64| ticks / TICKS_PER_SECOND * 1e6 / events as f64;
    let (child, me) = (d(before.child, after.child), d(before.me, after.me));
    let stolen = d(before.stolen, after.stolen);
    Some(PerEvent {
        hookgate_us: us(child),
        bench_us: us(me),
        rest_us: us((busy - stolen - child - me).max(0.0)),
        busy_pct: 100.0 * busy / total,
        stolen_pct: 100.0 * stolen / total,
    })
}

/// The processes whose parent is `pid` (nginx's workers under its master), from `/proc`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok();
            stat.as_deref().and_then(parent) == Some(pid)
        })
        .collect()
}

/// Runs `load` and splits the machine's CPU over it per request, `servers` counted as the
/// server; `requests` says how many requests the load's outcome answered.
pub async fn measured<T>(
    servers: Vec<u32>,
    load: impl Future<Output = anyhow::Result<T>>,
    requests: impl Fn(&T) -> usize,
) -> anyhow::Result<(T, Option<PerEvent>)> {
    let before = sample(&servers);
    let out = load.await?;
    let after = sample(&servers);
    let split = before
        .zip(after)
        .and_then(|(b, a)| per_event(b, a, requests(&out)));
    Ok((out, split))
}

/// cutime + cstime from a `/proc/<pid>/stat` (fields 16 and 17): the CPU of the children it has
/// waited for.
fn reaped(stat: &str) -> Option<u64> {
    Some(field(stat, 16)? + field(stat, 17)?)
}

/// The parent's pid from a `/proc/<pid>/stat` (field 4).
fn parent(stat: &str) -> Option<u32> {
    field(stat, 4)?.try_into().ok()
}

/// Field `n` (counted from 1, as proc(5) does) of a `/proc/<pid>/stat`, read past the command
/// name, which is in parentheses and may hold spaces and parentheses itself.
fn field(stat: &str, n: usize) -> Option<u64> {
    // The name is field 2, so field 3 is the first after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// `(busy, total, stolen)` ticks of all cores from `/proc/stat`'s `cpu` line: busy is user,
/// nice, system, irq, softirq and steal; total adds idle and iowait; stolen is steal alone.
fn machine(stat: &str) -> Option<(u64, u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    Some((busy, busy + at(3) + at(4), at(7)))
}

/// utime + stime of one process from its `/proc/<pid>/stat` (fields 14 and 15; the command name
/// before them is in parentheses and may hold spaces).
fn process(stat: &str) -> Option<u64> {
    Some(field(stat, 14)? + field(stat, 15)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_counts_busy_and_idle_ticks() {
        let stat = "cpu  100 5 40 800 20 3 2 1 0 0\ncpu0 50 2 20 400 10 1 1 0 0 0\n";
        assert_eq!(machine(stat), Some((151, 971, 1)));
        assert_eq!(machine("intr 1 2\n"), None);
    }

    #[test]
    fn process_reads_past_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (tokio (rt) 1) S 1 4242 4242 0 -1 4194304 10 0 0 0 731 269 0 0 20 0 8";
        assert_eq!(process(stat), Some(1000));
        assert_eq!(process("4242 (x) S 1"), None);
    }

    #[test]
    fn parent_is_read_past_the_name() {
        let stat = "4242 (nginx: worker (x)) S 4200 4242 4242 0 -1 4194304 10 0 0 0 731 269";
        assert_eq!(parent(stat), Some(4200));
        assert_eq!(parent("4242 (x)"), None);
    }

    #[test]
    fn children_of_finds_a_spawned_child_and_only_its_own() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let found = children_of(std::process::id());
        let theirs = children_of(child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found.contains(&child.id()), "{found:?}");
        assert!(!found.contains(&std::process::id()));
        assert!(theirs.is_empty(), "{theirs:?}");
    }

    #[test]
    fn reaped_reads_the_waited_for_childrens_time() {
        let stat = "4242 (bench (x)) S 1 4242 4242 0 -1 4194304 10 0 0 0 731 269 40 2 20 0 8";
        assert_eq!(reaped(stat), Some(42));
        assert_eq!(reaped("4242 (x) S 1 2 3"), None);
    }

    #[test]
    fn a_child_reaped_during_the_load_counts_as_the_load_generators() {
        let own = || std::fs::read_to_string("/proc/self/stat").unwrap();
        let (before, reaped_before) = (sample(&[]).unwrap(), reaped(&own()).unwrap());
        // A child that spends a few hundred ms of CPU, waited for (as pgbench's runs are).
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(status.success());
        let (after, reaped_after) = (sample(&[]).unwrap(), reaped(&own()).unwrap());
        let child = reaped_after - reaped_before;
        assert!(child >= 5, "{reaped_before} -> {reaped_after}");
        assert!(after.me - before.me >= child, "{before:?} {after:?}");
    }

    #[tokio::test]
    async fn measured_counts_the_cpu_the_load_used_per_request() {
        let ticks = || process(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap();
        let machine_ticks = || {
            machine(&std::fs::read_to_string("/proc/stat").unwrap())
                .unwrap()
                .1
        };
        let load = async {
            // Two ticks of this process's CPU (20 ms), spent by the load itself. The process's
            // counter sums all its threads, so the tests running beside this one can move it by
            // two ticks before the machine's clock has moved at all; the load also lasts until
            // it has, or there is no time to split.
            let (start, machine_start) = (ticks(), machine_ticks());
            let mut x = 0u64;
            while ticks() < start + 2 || machine_ticks() == machine_start {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            Ok(10usize)
        };
        let (n, split) = measured(vec![std::process::id()], load, |n| *n)
            .await
            .unwrap();
        assert_eq!(n, 10);
        // At least 20 ms over 10 requests, counted as the server's (the pid given) and this
        // process's alike.
        let split = split.unwrap();
        assert!(split.hookgate_us >= 2_000.0, "{split:?}");
        assert!(split.bench_us >= 2_000.0, "{split:?}");
    }

    #[test]
    fn every_child_given_is_counted() {
        // Some CPU of this process's own first, so that its counter is not zero.
        let me = std::process::id();
        let mut x = 0u64;
        while process(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap() == 0 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let once = sample(&[me]).unwrap();
        let twice = sample(&[me, me]).unwrap();
        assert!(once.child > 0);
        assert!(twice.child >= 2 * once.child, "{once:?} {twice:?}");
    }

    #[test]
    fn per_event_splits_the_machine_between_child_bench_and_the_rest() {
        let before = Sample {
            busy: 1_000,
            total: 2_000,
            stolen: 10,
            child: 100,
            me: 50,
        };
        // 2 s of both cores (400 ticks), 300 of them busy: child 1.5 s, bench 0.5 s, rest 0.8 s,
        // and 0.2 s the hypervisor took, which is nobody's here.
        let after = Sample {
            busy: 1_300,
            total: 2_400,
            stolen: 30,
            child: 250,
            me: 100,
        };
        let p = per_event(before, after, 1_000).unwrap();
        assert_eq!(p.hookgate_us, 1_500.0);
        assert_eq!(p.bench_us, 500.0);
        assert_eq!(p.rest_us, 800.0);
        assert_eq!(p.busy_pct, 75.0);
        assert_eq!(p.stolen_pct, 5.0);
        assert_eq!(per_event(before, after, 0), None);
    }
}
