//! Fault injection with real processes on loopback: the receiver killed with SIGKILL under load,
//! and PostgreSQL stopped under load (a throwaway cluster this test starts, never the shared one).
//! Each test prints what it counted and fails on any acknowledged event that is missing.

use hookgate::cli::send::{SendOptions, sign_request};
use sqlx::{Connection, PgConnection};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::procs::{BIN, drop_database, free_port, fresh_database, wait_ready};
use crate::common::skip_or_fail;

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: f}
stringData: {k: fault-test-secret}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: load, namespace: f}
spec:
  scheme: {type: hmac-sha256, keyIdHeader: ""}
  keys: [{id: k, secretRef: {name: keys, key: k}}]
  delivery: {url: "http://127.0.0.1:9/nowhere"}
"#;

struct Receiver {
    child: Child,
    url: String,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_receiver(dir: &Path, database_url: &str) -> Receiver {
    std::fs::write(dir.join("m.yaml"), MANIFESTS).unwrap();
    let (port, admin) = (free_port(), free_port());
    let mut child = Command::new(BIN)
        .args(["standalone", "-f"])
        .arg(dir.join("m.yaml"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
        ])
        .args(["--database-url", database_url])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("receiver.log")).unwrap())
        .spawn()
        .unwrap();
    let ready = format!("http://127.0.0.1:{admin}/readyz");
    wait_ready(&ready, "receiver", &mut child, &dir.join("receiver.log")).await;
    Receiver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

/// Signed requests with unique event ids, built up front so the load is only HTTP.
fn requests(dir: &Path, n: usize) -> Vec<Req> {
    let path = dir.join("m.yaml");
    std::fs::write(&path, MANIFESTS).unwrap();
    let m = hookgate::manifest::load(&[path]).unwrap();
    let wi = &m.find("f/load").unwrap().integration;
    (0..n)
        .map(|i| {
            let id = format!("evt-{i}");
            let opts = SendOptions {
                event_id: Some(id.clone()),
                ..Default::default()
            };
            let body = format!(r#"{{"n":{i}}}"#);
            let req = sign_request(
                wi,
                &m.secrets,
                body.clone().into_bytes(),
                &opts,
                chrono::Utc::now(),
            )
            .unwrap();
            (id, body, req.headers)
        })
        .collect()
}

/// Event id, body and signed headers.
type Req = (String, String, Vec<(String, String)>);

/// One answer: the event id, the status (0 when no answer came: a timeout, a refused or reset
/// connection) and the Retry-After header.
type Answer = (String, u16, Option<String>);

/// Answers in the order they arrived.
type Answers = Arc<Mutex<Vec<Answer>>>;

async fn send_all(url: String, reqs: Vec<Req>, answers: Answers, concurrency: usize) {
    // Generous, so that a slow answer on a loaded machine is still an answer: during the outage
    // one request waits for the batch before it and then its own (3 s acquire timeout each),
    // and a status of 0 must mean the receiver gave none.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let queue = Arc::new(Mutex::new(reqs));
    let workers = (0..concurrency).map(|_| {
        let (client, queue, answers, url) =
            (client.clone(), queue.clone(), answers.clone(), url.clone());
        tokio::spawn(async move {
            loop {
                let Some((id, body, headers)) = queue.lock().unwrap().pop() else {
                    return;
                };
                let mut req = client.post(format!("{url}/hooks/f/load")).body(body);
                for (k, v) in &headers {
                    req = req.header(k, v);
                }
                let (status, retry_after) = match req.send().await {
                    Ok(r) => (
                        r.status().as_u16(),
                        r.headers()
                            .get("retry-after")
                            .map(|v| v.to_str().unwrap_or("(not ASCII)").to_string()),
                    ),
                    Err(_) => (0, None),
                };
                answers.lock().unwrap().push((id, status, retry_after));
            }
        })
    });
    futures::future::join_all(workers).await;
}

async fn stored_ids(database_url: &str) -> std::collections::HashSet<String> {
    let mut conn = PgConnection::connect(database_url).await.unwrap();
    sqlx::query_scalar::<_, String>(
        "SELECT event_id FROM inbox_events WHERE integration = 'f/load'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

fn count(answers: &[Answer], status: u16) -> usize {
    answers.iter().filter(|(_, s, _)| *s == status).count()
}

/// Fails unless every answer of `phase` has one of the `allowed` statuses.
fn assert_statuses(phase: &str, answers: &[Answer], allowed: &[u16]) {
    let by_status: std::collections::BTreeMap<u16, usize> =
        answers.iter().fold(Default::default(), |mut m, (_, s, _)| {
            *m.entry(*s).or_default() += 1;
            m
        });
    eprintln!("{phase}: answers by status {by_status:?}");
    assert!(
        !answers.is_empty(),
        "{phase}: no answers, the phase proved nothing"
    );
    assert!(
        by_status.keys().all(|s| allowed.contains(s)),
        "{phase}: answers by status {by_status:?}, but only {allowed:?} may occur (0: no answer)"
    );
}

/// Every request answered 2xx must have its row, whatever happened after the answer.
fn assert_nothing_acknowledged_is_lost(
    label: &str,
    answers: &[Answer],
    stored: &std::collections::HashSet<String>,
) {
    let acked: Vec<&String> = answers
        .iter()
        .filter(|(_, s, _)| (200..300).contains(s))
        .map(|(id, _, _)| id)
        .collect();
    let lost: Vec<&&String> = acked
        .iter()
        .filter(|id| !stored.contains(id.as_str()))
        .collect();
    eprintln!(
        "{label}: sent {}, 2xx {}, 503 {}, connection errors {}, rows {}, lost {}",
        answers.len(),
        acked.len(),
        count(answers, 503),
        count(answers, 0),
        stored.len(),
        lost.len()
    );
    assert!(
        !acked.is_empty(),
        "{label}: nothing was acknowledged, the test proved nothing"
    );
    assert!(
        lost.is_empty(),
        "{label}: acknowledged but missing: {lost:?}"
    );
}

#[tokio::test]
async fn receiver_killed_under_load_loses_no_acknowledged_event() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set (a PostgreSQL superuser URL; tests/run.sh sets it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut receiver = start_receiver(dir.path(), &url).await;
    let answers: Answers = Arc::default();
    let load = tokio::spawn(send_all(
        receiver.url.clone(),
        requests(dir.path(), 3000),
        answers.clone(),
        16,
    ));
    // Kill it mid-stream, once a few hundred events are in.
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&answers.lock().unwrap(), 200) < 300 {
        assert!(Instant::now() < deadline, "load did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    receiver.child.kill().unwrap(); // SIGKILL
    receiver.child.wait().unwrap();
    tokio::time::timeout(Duration::from_secs(60), load)
        .await
        .expect("load ends")
        .unwrap();
    let answers = answers.lock().unwrap().clone();
    assert!(
        count(&answers, 0) > 0,
        "the kill happened while requests were in flight"
    );
    // The database stays up: an answer is a 2xx, or none at all once the process is gone.
    assert_statuses("SIGKILL under load", &answers, &[200, 0]);
    assert_nothing_acknowledged_is_lost("SIGKILL", &answers, &stored_ids(&url).await);
    drop(receiver);
    drop_database(&admin_url, &url).await;
}

/// A PostgreSQL cluster of the test's own (initdb + pg_ctl), so it can be stopped safely.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    pg_ctl: PathBuf,
    port: u16,
    user: Option<String>,
}

impl Cluster {
    pub(crate) fn start() -> Result<Self, String> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .map_err(|_| "no /usr/lib/postgresql".to_string())?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .max()
            .ok_or("no PostgreSQL server binaries")?;
        let root = nix_is_root();
        if root
            && Command::new("id")
                .arg("postgres")
                .output()
                .map(|o| !o.status.success())
                .unwrap_or(true)
        {
            return Err("running as root without a postgres user for initdb".into());
        }
        let dir = tempfile::tempdir().unwrap();
        let user = root.then(|| "postgres".to_string());
        if let Some(u) = &user {
            Command::new("chown")
                .args([u.as_str()])
                .arg(dir.path())
                .status()
                .unwrap();
        }
        let port = free_port();
        let run = |program: &Path, args: &[&str]| -> bool {
            let mut cmd = match &user {
                Some(u) => {
                    let mut c = Command::new("runuser");
                    c.args(["-u", u, "--"]).arg(program);
                    c
                }
                None => Command::new(program),
            };
            cmd.args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let data = dir.path().join("data");
        let data = data.to_str().unwrap();
        if !run(
            &bin.join("initdb"),
            &["-D", data, "-U", "postgres", "-A", "trust", "--no-sync"],
        ) {
            return Err("initdb failed".into());
        }
        let cluster = Cluster {
            dir,
            pg_ctl: bin.join("pg_ctl"),
            port,
            user,
        };
        if !cluster.ctl("start") {
            return Err("pg_ctl start failed".into());
        }
        Ok(cluster)
    }

    pub(crate) fn ctl(&self, action: &str) -> bool {
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("server.log");
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {}",
            self.port,
            self.dir.path().display()
        );
        let mut args = vec!["-D", data.to_str().unwrap(), "-w", "-m", "fast"];
        if action == "start" {
            args.extend(["-l", log.to_str().unwrap(), "-o", &opts]);
        }
        args.push(action);
        let mut cmd = match &self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(&self.pg_ctl);
                c
            }
            None => Command::new(&self.pg_ctl),
        };
        cmd.args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.ctl("stop");
    }
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[tokio::test]
async fn postgres_outage_is_503_with_retry_after_and_recovers_without_restart() {
    let cluster = match Cluster::start() {
        Ok(c) => c,
        Err(why) => {
            skip_or_fail(&format!("cannot start a throwaway PostgreSQL: {why}"));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let receiver = start_receiver(dir.path(), &cluster.url()).await;
    let mut reqs = requests(dir.path(), 600);
    let answers: Answers = Arc::default();
    let before: Vec<_> = reqs.drain(..200).collect();
    send_all(receiver.url.clone(), before, answers.clone(), 8).await;
    assert_statuses("before the outage", &answers.lock().unwrap()[..], &[200]);

    assert!(cluster.ctl("stop"), "pg_ctl stop");
    // Each answer now waits for the pool's 3 s acquire timeout: keep this phase small.
    let during: Vec<_> = reqs.drain(..24).collect();
    send_all(receiver.url.clone(), during, answers.clone(), 8).await;
    {
        let answers = answers.lock().unwrap();
        let during = &answers[200..];
        // While it is down: every request answered, 503 with Retry-After, never a 2xx and never
        // left without an answer.
        assert_statuses("while PostgreSQL is down", during, &[503]);
        let retry_after: Vec<_> = during.iter().map(|(_, _, r)| r.as_deref()).collect();
        assert!(
            retry_after.iter().all(|r| *r == Some("5")),
            "Retry-After on every 503: {retry_after:?}"
        );
    }

    assert!(cluster.ctl("start"), "pg_ctl start");
    // The pool reconnects by itself: one request at a time until a 2xx (bounded), then the rest.
    let started = Instant::now();
    loop {
        let Some(next) = reqs.pop() else {
            panic!("ran out of requests before recovering")
        };
        send_all(receiver.url.clone(), vec![next], answers.clone(), 1).await;
        if answers
            .lock()
            .unwrap()
            .last()
            .is_some_and(|(_, s, _)| *s == 200)
        {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let log = std::fs::read_to_string(dir.path().join("receiver.log")).unwrap_or_default();
            let last: Vec<_> = answers
                .lock()
                .unwrap()
                .iter()
                .rev()
                .take(5)
                .cloned()
                .collect();
            panic!(
                "no recovery within 60 s of PostgreSQL coming back; last answers {last:?}; receiver log tail:\n{}",
                log.lines().rev().take(15).collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "PostgreSQL outage: recovered {:?} after the restart",
        started.elapsed()
    );
    let recovering = answers.lock().unwrap().len();
    if recovering - 1 > 224 {
        // Until the pool has reconnected a request may still be refused, never left unanswered.
        assert_statuses(
            "while the pool reconnects",
            &answers.lock().unwrap()[224..recovering - 1],
            &[503],
        );
    }
    let after = std::mem::take(&mut reqs);
    send_all(receiver.url.clone(), after, answers.clone(), 8).await;
    let answers = answers.lock().unwrap().clone();
    assert_statuses("after recovery", &answers[recovering - 1..], &[200]);
    assert_nothing_acknowledged_is_lost(
        "PostgreSQL outage",
        &answers,
        &stored_ids(&cluster.url()).await,
    );
    drop(receiver);
}
