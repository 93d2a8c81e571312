//! The machine a report was measured on, in its `setup.host`: the CPU model, the kernel and the
//! instant the machine started. Reports are compared across days, and on 2026-12-06 a restart of
//! this virtual machine moved the intake's ratios with no change of code (docs/performance.md,
//! round 45); only `uptime -s` told it afterwards. Now the report itself says so: two reports
//! with different `booted_at` (or CPU models) were measured on different machines.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

/// `setup.host`, each field `null` where the machine does not say (not Linux, or no `/proc`).
pub fn describe() -> Value {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    json!({
        "cpu_model": read("/proc/cpuinfo").as_deref().and_then(cpu_model),
        "kernel": read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()),
        "booted_at": read("/proc/stat")
            .as_deref()
            .and_then(booted_at)
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
    })
}

/// The first `model name` of a `/proc/cpuinfo` (x86), else its first `Model` or `CPU part`
/// (arm64 names its cores there, if at all).
fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "CPU part"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    })
}

/// The instant the machine booted, from `/proc/stat`'s `btime` (seconds since the epoch).
fn booted_at(stat: &str) -> Option<DateTime<Utc>> {
    let secs = stat
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    DateTime::from_timestamp(secs, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_model_is_the_first_cores_model_name() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 143\n\
                   model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu sha_ni\n\n\
                   processor\t: 1\nmodel name\t: Other\n";
        assert_eq!(
            cpu_model(x86).as_deref(),
            Some("Intel(R) Xeon(R) Processor"),
            "not `model`, which is a number"
        );
        let arm =
            "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\nModel\t\t: Raspberry Pi 4\n";
        assert_eq!(cpu_model(arm).as_deref(), Some("Raspberry Pi 4"));
        assert_eq!(cpu_model("processor\t: 0\nmodel name\t:  \n"), None);
        assert_eq!(cpu_model(""), None);
    }

    #[test]
    fn the_boot_instant_is_btime() {
        let stat = "cpu  1 2 3 4\nintr 5\nctxt 6\nbtime 1796527983\nprocesses 7\n";
        assert_eq!(
            booted_at(stat).map(|t| t.to_rfc3339()),
            Some("2026-12-06T03:33:03+00:00".to_string())
        );
        assert_eq!(booted_at("cpu  1 2 3 4\n"), None);
        assert_eq!(booted_at("btime soon\n"), None);
    }
}
