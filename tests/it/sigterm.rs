//! A real SIGTERM (`kill -TERM`) to a running `hookgate standalone`, on SQLite and on PostgreSQL:
//! the request in flight at the signal still gets its 2xx and its row, the claim held by a
//! delivery that hangs past `--grace` is released without counting the attempt, the process
//! exits 0, and the next worker process delivers the released event as attempt 1.

use crate::common::destination::{Answer, Destination};
use crate::common::procs::{Proc, drop_database, free_port, fresh_database};
use crate::common::skip_or_fail;
use chrono::{DateTime, Utc};
use hookgate::inbox::Inbox;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn manifests(dest: &str) -> String {
    crate::common::hmac_integration(
        "s",
        "term",
        "sigterm-test-secret",
        &format!(r#"url: "{dest}", timeout: 5m"#),
    )
}

/// Path, headers and body of a request signed now for event `id`.
fn signed(dir: &Path, id: &str) -> (String, Vec<(String, String)>, String) {
    let m = hookgate::manifest::load(&[dir.join("m.yaml")]).unwrap();
    let body = format!(r#"{{"id":"{id}","padding":"{}"}}"#, "x".repeat(64));
    let (path, headers) = crate::common::signed_now(&m, "s/term", &body);
    (path, headers, body)
}

/// Starts `hookgate <args>` on `m.yaml`; waits for its /readyz.
async fn hookgate(dir: &Path, name: &str, args: &[&str], url: &str) -> Proc {
    crate::common::procs::start_ready(dir, name, args, url, &[("RUST_LOG", "info")]).await
}

fn log(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// Sends SIGTERM, the signal Kubernetes sends a pod it stops.
fn sigterm(proc: &Proc) {
    let status = Command::new("kill")
        .args(["-TERM", &proc.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -TERM: {status}");
}

/// Waits for the process to exit by itself (bounded: the grace is 1 s, the drain one request).
async fn exit_status(dir: &Path, name: &str, proc: &mut Proc) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = proc.0.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "{name} did not exit after SIGTERM:\n{}",
            log(dir, name)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An event row as the test reads it.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    status: String,
    attempts: i64,
    locked_until: Option<DateTime<Utc>>,
    next_attempt_at: Option<DateTime<Utc>>,
    /// Rows in `delivery_attempts`: every attempt that counted.
    recorded: i64,
}

async fn row(inbox: &Inbox, event_id: &str) -> Option<Row> {
    const SQL: &str = "SELECT status, attempts, locked_until, next_attempt_at, \
         (SELECT COUNT(*) FROM delivery_attempts a WHERE a.event_row = e.id) \
         FROM inbox_events e WHERE event_id = $1";
    type Tuple = (
        String,
        i64,
        Option<DateTime<Utc>>,
        Option<DateTime<Utc>>,
        i64,
    );
    let found: Option<Tuple> = on!(inbox, pool => sqlx::query_as(SQL)
        .bind(event_id)
        .fetch_optional(pool)
        .await
        .unwrap());
    found.map(
        |(status, attempts, locked_until, next_attempt_at, recorded)| Row {
            status,
            attempts,
            locked_until,
            next_attempt_at,
            recorded,
        },
    )
}

/// Polls until `done` holds for the row of `event_id` (bounded).
async fn wait_row(inbox: &Inbox, event_id: &str, what: &str, done: impl Fn(&Row) -> bool) -> Row {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = row(inbox, event_id).await;
        if let Some(r) = r.as_ref().filter(|r| done(r)) {
            return r.clone();
        }
        assert!(Instant::now() < deadline, "{what}: {event_id} is {r:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn sigterm_drains_requests_and_releases_claims(url: &str) {
    let dest = Destination::start().await;
    // The first delivery hangs (longer than any test); every later one is answered 200.
    dest.script([Answer::Hang]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.yaml"), manifests(&dest.url)).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut server = hookgate(
        dir.path(),
        "standalone",
        &[
            "standalone",
            "--listen",
            &listen,
            "--poll",
            "50ms",
            "--lease",
            "60s",
            "--grace",
            "1s",
            // One request at a time: a second one answered 503 `overloaded` shows that the
            // slow request below is inside the receiver, not waiting in the kernel's backlog.
            "--max-in-flight",
            "1",
        ],
        url,
    )
    .await;
    let inbox = Inbox::connect(url).await.unwrap();
    let client = reqwest::Client::new();

    // A delivery in flight: claimed, hanging at the destination.
    let (path, headers, body) = signed(dir.path(), "held");
    let mut req = client.post(format!("http://{listen}{path}")).body(body);
    for (k, v) in &headers {
        req = req.header(k, v);
    }
    assert_eq!(req.send().await.unwrap().status(), 200, "held accepted");
    let first = dest.wait_for(1, Duration::from_secs(60)).await;
    assert_eq!(first.len(), 1, "the held event reached the destination");
    assert_eq!(first[0].header("hookgate-attempt"), "1");
    let claimed = row(&inbox, "held").await.unwrap();
    assert_eq!(
        (claimed.status.as_str(), claimed.attempts),
        ("processing", 1),
        "{claimed:?}"
    );
    assert!(
        claimed.locked_until.is_some_and(|t| t > Utc::now()),
        "claimed under a lease: {claimed:?}"
    );

    // A request in flight: headers and half of the body sent, the rest held back.
    let (path, headers, body) = signed(dir.path(), "slow");
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nhost: {listen}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in &headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let (part, rest) = body.as_bytes().split_at(body.len() / 2);
    let open = async || {
        let mut slow = tokio::net::TcpStream::connect(&listen).await.unwrap();
        slow.write_all(head.as_bytes()).await.unwrap();
        slow.write_all(part).await.unwrap();
        slow
    };
    let mut slow = open().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let probe = client
            .post(format!("http://{listen}/hooks/s/probe"))
            .body("{}")
            .send()
            .await
            .unwrap();
        if probe.status() == 503 {
            let json: serde_json::Value = probe.json().await.unwrap();
            assert_eq!(json, serde_json::json!({"error": "overloaded"}));
            break;
        }
        // The probe may reach the receiver before the slow request's headers do, and then the
        // slow request is the one answered 503 `overloaded`: open it again.
        let mut early = [0; 512];
        match slow.try_read(&mut early) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok(n) => {
                let got = String::from_utf8_lossy(&early[..n]);
                assert!(
                    got.starts_with("HTTP/1.1 503 "),
                    "the slow request got {got:?}"
                );
                slow = open().await;
            }
            Err(e) => panic!("the slow request's connection failed: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "the slow request never occupied the receiver: probe got {}",
            probe.status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    sigterm(&server);
    // The listener closes at once (new connections are refused) while the slow request is
    // still open: it was in flight when shutdown began.
    let deadline = Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(&listen).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the listener still accepts after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The workers' grace (1 s) runs out and the hanging delivery's claim is released while the
    // slow request is still open: the process has to outlive its workers for that request.
    wait_row(&inbox, "held", "the claim released on shutdown", |r| {
        r.status != "processing"
    })
    .await;
    slow.write_all(rest).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), slow.read_to_end(&mut answer))
        .await
        .expect("the drained request is answered")
        .unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let (head, json) = answer.split_once("\r\n\r\n").expect("a whole response");
    assert!(head.starts_with("HTTP/1.1 200 "), "{answer}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(json).unwrap(),
        serde_json::json!({"received": true, "duplicate": false}),
        "{answer}"
    );

    let status = exit_status(dir.path(), "standalone", &mut server).await;
    assert_eq!(
        status.code(),
        Some(0),
        "exit after SIGTERM: {status}\n{}",
        log(dir.path(), "standalone")
    );

    // Its last word on the claim: held one, gave it back.
    let standalone_log = log(dir.path(), "standalone");
    let stopped = standalone_log
        .lines()
        .find(|l| l.contains("worker stopped; claims still held were released"))
        .unwrap_or_else(|| panic!("no line for the claims released:\n{standalone_log}"));
    assert!(
        stopped.contains("held=1") && stopped.contains("released=1"),
        "{stopped}"
    );

    // The drained request's row is committed; the workers had stopped claiming by then.
    let slow_row = row(&inbox, "slow")
        .await
        .expect("the drained request's row");
    assert_eq!(
        (slow_row.status.as_str(), slow_row.attempts),
        ("pending", 0),
        "{slow_row:?}"
    );
    // The hanging delivery's claim is released: claimable at once, the attempt not counted.
    let released = row(&inbox, "held").await.unwrap();
    assert_eq!(
        (
            released.status.as_str(),
            released.attempts,
            released.locked_until,
            released.recorded
        ),
        ("pending", 0, None, 0),
        "{released:?}"
    );
    assert!(
        released.next_attempt_at.is_some_and(|t| t <= Utc::now()),
        "due now: {released:?}"
    );

    // The next worker process takes it up as attempt 1, with the same webhook-id.
    let mut worker = hookgate(dir.path(), "worker", &["worker", "--poll", "50ms"], url).await;
    for id in ["held", "slow"] {
        let done = wait_row(&inbox, id, "delivered by the next worker", |r| {
            r.status == "processed"
        })
        .await;
        assert_eq!((done.attempts, done.recorded), (1, 1), "{id}: {done:?}");
    }
    let received = dest.received();
    let held: Vec<_> = received
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains(r#""id":"held""#))
        .collect();
    assert_eq!(held.len(), 2, "hung once, then delivered once");
    assert_eq!(held[1].header("hookgate-attempt"), "1");
    assert_eq!(held[0].header("webhook-id"), held[1].header("webhook-id"));
    sigterm(&worker);
    let status = exit_status(dir.path(), "worker", &mut worker).await;
    assert_eq!(
        status.code(),
        Some(0),
        "worker exit after SIGTERM: {status}"
    );
    inbox.close().await;
}

#[tokio::test]
async fn sigterm_drains_requests_and_releases_claims_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("inbox.db").display());
    sigterm_drains_requests_and_releases_claims(&url).await;
}

#[tokio::test]
async fn sigterm_drains_requests_and_releases_claims_on_postgres() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set (a PostgreSQL superuser URL; tests/run.sh sets it)");
        return;
    };
    sigterm_drains_requests_and_releases_claims(&url).await;
    drop_database(&admin_url, &url).await;
}
