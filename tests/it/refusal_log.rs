//! The refusal log over real HTTP: every refused request gets one `request refused` line with its
//! request id, integration, reason, peer and duration, never a signature; a flood is held to the
//! per-process line budget, and `hookgate_refusal_logs_dropped_total` counts exactly what was
//! left out. Logs are captured with a JSON subscriber on the test's own (current) thread, where
//! the served connections run too.

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
    (out, tracing::subscriber::set_default(subscriber))
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
        Default::default(),
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
        assert!(source.starts_with("127.0.0.1:"), "{source}");
        assert!(l["fields"]["duration_ms"].is_u64(), "{l}");
    }
    let all = logs.text();
    assert!(!all.contains("deadbeef"), "a signature reached the log");
    assert!(!all.contains("evt_f"), "a body reached the log");
}

#[tokio::test]
async fn a_flood_of_refusals_is_held_to_the_budget_and_the_rest_is_counted() {
    const RPS: u32 = 5;
    const FLOOD: usize = 300;
    let (_dir, inbox) = sqlite_inbox().await;
    let h = harness(inbox);
    let (logs, _guard) = capture();
    let (addr, _stop) = serve(&h, RPS).await;
    let c = client();
    let started = Instant::now();
    for i in 0..FLOOD {
        let r = c
            .post(format!("http://{addr}/hooks/scan-{i}"))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let written = logs.refusals().len();
    let dropped = h.metrics.refusal_logs_dropped.get() as usize;
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
    assert!(
        h.metrics
            .encode()
            .contains(&format!("hookgate_refusal_logs_dropped_total {dropped}\n")),
        "the counter is exposed"
    );
    // A line written after a gap reports how many were dropped before it.
    let suppressed: u64 = logs
        .refusals()
        .iter()
        .map(|l| l["fields"]["suppressed"].as_u64().unwrap())
        .sum();
    assert!(suppressed <= dropped as u64);
}
