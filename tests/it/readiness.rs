//! `/readyz` on the admin port follows the inbox, with the real binary: a throwaway PostgreSQL
//! cluster (faults.rs starts it with initdb/pg_ctl, never the shared server) is stopped under a
//! running `standalone` and a running `worker`; both report 503 `inbox unreachable` while it is
//! down and `ready` again once it is back, without a restart. `/healthz` stays 200 all along, so
//! a liveness probe never restarts a pod over a database outage.

use crate::common::procs::{BIN, Proc, free_port};
use crate::common::skip_or_fail;
use crate::faults::Cluster;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: r}
stringData: {k: readiness-test-secret}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: ready, namespace: r}
spec:
  scheme: {type: hmac-sha256, keyIdHeader: ""}
  keys: [{id: k, secretRef: {name: keys, key: k}}]
  delivery: {url: "http://127.0.0.1:9/nowhere"}
"#;

struct Role {
    name: &'static str,
    proc: Proc,
    admin: String,
}

fn start(dir: &Path, name: &'static str, args: &[&str], database_url: &str) -> Role {
    let admin = free_port();
    let child = Command::new(BIN)
        .args(args)
        .arg("-f")
        .arg(dir.join("m.yaml"))
        .args(["--database-url", database_url])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap())
        .spawn()
        .unwrap();
    Role {
        name,
        proc: Proc(child),
        admin: format!("http://127.0.0.1:{admin}"),
    }
}

/// `GET path` on the admin port: (status, body). The admin port must answer; while the inbox is
/// down the readiness check waits for the pool's acquire timeout (3 s), hence the generous bound.
async fn get(role: &Role, path: &str) -> (u16, String) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let res = client
        .get(format!("{}{path}", role.admin))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{}: {path} did not answer: {e}", role.name));
    (res.status().as_u16(), res.text().await.unwrap())
}

/// Polls `/readyz` until it answers `want` (bounded; the process must stay up).
async fn wait_readyz(dir: &Path, role: &mut Role, want: (u16, &str), within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let exited = role.proc.0.try_wait().unwrap();
        assert!(exited.is_none(), "{} exited: {exited:?}", role.name);
        let got = match reqwest::get(format!("{}/readyz", role.admin)).await {
            Ok(r) => Some((r.status().as_u16(), r.text().await.unwrap())),
            Err(_) => None,
        };
        if got.as_ref().is_some_and(|(s, b)| (*s, b.as_str()) == want) {
            return;
        }
        if Instant::now() > deadline {
            let log =
                std::fs::read_to_string(dir.join(format!("{}.log", role.name))).unwrap_or_default();
            panic!(
                "{}: /readyz never answered {want:?} within {within:?}; last {got:?}; log:\n{log}",
                role.name
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn readyz_is_503_while_the_inbox_is_unreachable_and_ready_once_it_is_back() {
    let cluster = match Cluster::start() {
        Ok(c) => c,
        Err(why) => {
            skip_or_fail(&format!("cannot start a throwaway PostgreSQL: {why}"));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.yaml"), MANIFESTS).unwrap();
    let url = cluster.url();
    let listen = format!("127.0.0.1:{}", free_port());
    // The receiver's check (standalone serves it) and the worker's: each pings the inbox.
    let mut standalone = start(
        dir.path(),
        "standalone",
        &["standalone", "--listen", &listen],
        &url,
    );
    let ready = (200, "ready");
    let within = Duration::from_secs(60);
    wait_readyz(dir.path(), &mut standalone, ready, within).await;
    // Started after the standalone migrated the database, so the two never race to migrate.
    let mut worker = start(dir.path(), "worker", &["worker"], &url);
    wait_readyz(dir.path(), &mut worker, ready, within).await;

    assert!(cluster.ctl("stop"), "pg_ctl stop");
    for role in [&standalone, &worker] {
        // The server is gone before pg_ctl returns: the first answer already says so.
        for _ in 0..2 {
            assert_eq!(
                get(role, "/readyz").await,
                (503, "inbox unreachable".to_string()),
                "{}: /readyz while PostgreSQL is down",
                role.name
            );
        }
        assert_eq!(
            get(role, "/healthz").await,
            (200, "ok".to_string()),
            "{}: /healthz while PostgreSQL is down",
            role.name
        );
    }

    assert!(cluster.ctl("start"), "pg_ctl start");
    for role in [&mut standalone, &mut worker] {
        // The same processes (wait_readyz fails if one exited): the pools reconnect by themselves.
        wait_readyz(dir.path(), role, ready, within).await;
    }
}
