//! The refusal log over real HTTP: every refused request gets one `request refused` line with its
//! request id, integration, reason, peer and duration, never a signature; a flood is held to the
//! per-process line budget, and `hookgate_refusal_logs_dropped_total` counts exactly what was
//! left out. The fields are checked with a JSON subscriber on the test's own (current) thread,
//! where the served connections run too; the flood runs the real binary and reads its stderr.

use crate::common::*;
use hookgate::receiver::refusal_log::REQUEST_ID_HEADER;
use serde_json::Value;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The `request refused` lines, as JSON objects.
    fn refusals(&self) -> Vec<Value> {
        self.text()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["fields"]["message"] == "request refused")
            .collect()
    }
}

fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    // Other tests' threads (no subscriber) may have registered the receiver's log callsites as
    // never enabled while this subscriber was being set: have tracing ask again.
    tracing::callsite::rebuild_interest_cache();
    (out, guard)
}

/// Serves `h`'s receiver, with `rps` refusal lines per second, on 127.0.0.1:0.
async fn serve(h: &Harness, rps: u32) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = h.receiver.clone().with_refusal_log_rps(rps).router();
    tokio::spawn(hookgate::http::listener::serve(
        listener,
        app,
        hookgate::http::listener::Limits::default(),
        async {
            let _ = stopped.await;
        },
    ));
    (addr, stop)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

#[tokio::test]
async fn each_refusal_is_one_line_with_its_fields_and_ids_are_echoed() {
    let (_dir, inbox) = sqlite_inbox().await;
    let h = harness(inbox);
    let (logs, _guard) = capture();
    let (addr, _stop) = serve(&h, 0).await;
    let base = format!("http://{addr}");
    let c = client();

    // Unknown route, with a sane request id: echoed and logged as given.
    let r = c
        .post(format!("{base}/hooks/nope"))
        .header(REQUEST_ID_HEADER, "req-42")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.headers()[REQUEST_ID_HEADER], "req-42");

    // A forged Stripe signature, with an id that is not sane: replaced, still echoed.
    let (path, headers) = h.sign("t/stripe", &stripe_body("evt_f", "invoice.paid"), opts());
    let forged = with_header(
        &headers,
        "stripe-signature",
        &format!("t={},v1={}", t0().timestamp(), "deadbeef".repeat(8)),
    );
    let mut req = c
        .post(format!("{base}{path}"))
        .header(REQUEST_ID_HEADER, "two words");
    for (k, v) in &forged {
        req = req.header(k, v);
    }
    let r = req
        .body(stripe_body("evt_f", "invoice.paid"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let generated = r.headers()[REQUEST_ID_HEADER].to_str().unwrap().to_string();
    assert_eq!(generated.len(), 32, "{generated}");

    // Wrong method on a known route.
    let r = c.get(format!("{base}{path}")).send().await.unwrap();
    assert_eq!(r.status(), 405);

    // Accepted: an id is echoed, no refusal line.
    let body = stripe_body("evt_ok", "invoice.paid");
    let (_, headers) = h.sign("t/stripe", &body, opts());
    let mut req = c.post(format!("{base}{path}"));
    for (k, v) in &headers {
        req = req.header(k, v);
    }
    let r = req.body(body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key(REQUEST_ID_HEADER));

    let lines = logs.refusals();
    let fields: Vec<_> = lines
        .iter()
        .map(|l| {
            let f = &l["fields"];
            (
                f["request_id"].as_str().unwrap().to_string(),
                f["integration"].as_str().unwrap().to_string(),
                f["reason"].as_str().unwrap().to_string(),
                f["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            (
                "req-42".into(),
                "none".into(),
                "unknown_route".into(),
                "-".into()
            ),
            (
                generated,
                "t/stripe".into(),
                "invalid_signature".into(),
                "signature_mismatch".into()
            ),
            (
                fields[2].0.clone(),
                "t/stripe".into(),
                "method_not_allowed".into(),
                "-".into()
            ),
        ]
    );
    for l in &lines {
        assert_eq!(l["level"], "INFO");
        let source = l["fields"]["source"].as_str().unwrap();
        assert_eq!(source, "127.0.0.1", "the client address, without the port");
        assert!(l["fields"]["duration_ms"].is_u64(), "{l}");
    }
    let all = logs.text();
    assert!(!all.contains("deadbeef"), "a signature reached the log");
    assert!(!all.contains("evt_f"), "a body reached the log");
}

/// The flood runs against the real binary and counts the lines on its stderr: a process of its
/// own, with its own logger, so no other test's threads share its tracing state.
#[tokio::test]
async fn a_flood_of_refusals_is_held_to_the_budget_and_the_rest_is_counted() {
    use crate::common::procs::{BIN, free_port, wait_ready};
    const RPS: u32 = 5;
    const FLOOD: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.yaml"), test_manifests()).unwrap();
    let (port, admin) = (free_port(), free_port());
    let log_path = dir.path().join("receiver.log");
    let mut child = std::process::Command::new(BIN)
        .args(["standalone", "--no-workers", "--log-format", "json", "-f"])
        .arg(dir.path().join("m.yaml"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .args(["--refusal-log-rps", &RPS.to_string()])
        .arg("--database-url")
        .arg(format!(
            "sqlite://{}",
            dir.path().join("inbox.db").display()
        ))
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let ready = format!("http://127.0.0.1:{admin}/readyz");
    wait_ready(&ready, "receiver", &mut child, &log_path).await;
    let c = client();
    let started = Instant::now();
    for i in 0..FLOOD {
        let r = c
            .post(format!("http://127.0.0.1:{port}/hooks/scan-{i}"))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let metrics = c
        .get(format!("http://127.0.0.1:{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped: usize = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hookgate_refusal_logs_dropped_total "))
        .expect("the counter is exposed")
        .parse()
        .unwrap();
    // A graceful stop flushes the log writer: every line written is in the file.
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let exited = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    if exited.is_err() {
        let _ = child.kill();
        panic!("the receiver did not stop after SIGTERM");
    }
    let text = std::fs::read_to_string(&log_path).unwrap();
    let refusals: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "request refused")
        .collect();
    let written = refusals.len();
    // The burst, plus what the rate refilled while the flood lasted.
    let most = RPS as usize + (elapsed * f64::from(RPS)).ceil() as usize;
    assert!(
        (RPS as usize..=most).contains(&written),
        "{written} lines in {elapsed:.2}s"
    );
    assert_eq!(
        written + dropped,
        FLOOD,
        "every refusal is written or counted"
    );
    // A line written after a gap reports how many were dropped before it.
    let suppressed: u64 = refusals
        .iter()
        .map(|l| l["fields"]["suppressed"].as_u64().unwrap())
        .sum();
    assert!(suppressed <= dropped as u64);
}
