//! Connection-level limits of every listener, against the real receiver router and admin router
//! served on 127.0.0.1:0 through `hookgate::http::listener::serve`, with real TCP clients.

use crate::common::*;
use hookgate::http::listener::Limits;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);

/// Serves the harness's receiver with `limits`; the server stops when the guard is dropped.
async fn serve(h: &Harness, limits: Limits) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = h.receiver.router();
    // As the receiver role serves it: the listener's own 503s are counted by the receiver, and
    // its slots are reported in the receiver's metrics.
    tokio::spawn(hookgate::http::listener::serve_counting(
        listener,
        app,
        h.receiver.slots(limits),
        h.receiver.on_shed(),
        async {
            let _ = stopped.await;
        },
    ));
    (addr, stop)
}

/// [`serve`] with `cap` connections, whose silent clients are kept for 10 s: long enough for a
/// test to hold the cap without sending a request.
async fn serve_connection_cap(
    h: &Harness,
    cap: usize,
) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let limits = Limits {
        header_timeout: Duration::from_secs(10),
        ..limits(cap, 64)
    };
    serve(h, limits).await
}

fn limits(max_connections: usize, max_in_flight: usize) -> Limits {
    Limits {
        header_timeout: HEADER_TIMEOUT,
        max_connections,
        max_in_flight,
    }
}

/// Sends a request head one byte every 100 ms (about 10 s in all); returns how long the server
/// kept the connection and how many bytes it took before dropping it.
async fn slow_headers(addr: SocketAddr, path: &str) -> (Duration, usize, usize) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: hookgate\r\ncontent-type: application/json\r\nx-pad: {}\r\n\r\n",
        "a".repeat(20)
    );
    let (mut rd, mut wr) = TcpStream::connect(addr).await.unwrap().into_split();
    let start = Instant::now();
    // The server may answer before closing (hyper may send a 408); either way it lets go.
    let closed = tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n) = rd.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
        start.elapsed()
    });
    let mut sent = 0;
    for b in head.bytes() {
        if closed.is_finished() || wr.write_all(&[b]).await.is_err() {
            break;
        }
        sent += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let held = tokio::time::timeout(Duration::from_secs(10), closed)
        .await
        .expect("the slow client is still connected 10 s after its last byte")
        .unwrap();
    (held, sent, head.len())
}

#[tokio::test]
async fn slow_header_clients_are_dropped_on_the_receiver_and_admin_ports() {
    let (_dir, inbox) = sqlite_inbox().await;
    let h = harness(inbox);
    let (addr, _stop) = serve(&h, limits(64, 64)).await;
    let admin = hookgate::http::admin::spawn(
        "127.0.0.1:0".parse().unwrap(),
        h.metrics.clone(),
        hookgate::http::admin::always_ready(),
        limits(8, 8),
    )
    .await
    .unwrap();
    for (name, addr, path) in [
        ("receiver", addr, "/hooks/t/stripe"),
        ("admin", admin, "/metrics"),
    ] {
        let (held, sent, total) = slow_headers(addr, path).await;
        println!("{name}: slow client dropped after {held:?}, {sent} of {total} header bytes sent");
        assert!(sent < total, "{name}: the whole head got through");
        // A bound on hanging, not a speed target.
        assert!(held < HEADER_TIMEOUT * 3, "{name}: held for {held:?}");
    }
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed() {
    let (_dir, inbox) = sqlite_inbox().await;
    let h = harness(inbox);
    let (addr, _stop) = serve(&h, limits(64, 64)).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /nowhere HTTP/1.1\r\nhost: hookgate\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = conn.read(&mut buf).await.unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert!(!head.to_ascii_lowercase().contains("connection: close"));
    let idle = Instant::now();
    let eof = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf)).await;
    let held = idle.elapsed();
    println!("idle kept-alive connection closed after {held:?}");
    assert!(
        matches!(eof, Ok(Ok(0)) | Ok(Err(_))),
        "still open after {held:?}"
    );
    assert!(held < HEADER_TIMEOUT * 3, "held for {held:?}");
}

/// A request whose head is complete and whose body never comes: it holds an in-flight slot in
/// the handler (reading the body) until its connection closes.
async fn stalled_request(addr: SocketAddr, path: &str, headers: &[(String, String)]) -> TcpStream {
    let mut head = format!("POST {path} HTTP/1.1\r\nhost: hookgate\r\ncontent-length: 100\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn
}

/// A fresh connection per request: a refused connection is closed by the server.
async fn post(addr: SocketAddr, path: &str, headers: &[(String, String)], body: &str) -> Reply {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut req = client
        .post(format!("http://{addr}{path}"))
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let res = req.send().await.expect("an answer, not a hang");
    let status = axum::http::StatusCode::from_u16(res.status().as_u16()).unwrap();
    let mut headers = axum::http::HeaderMap::new();
    for (k, v) in res.headers() {
        headers.insert(
            axum::http::HeaderName::from_bytes(k.as_str().as_bytes()).unwrap(),
            axum::http::HeaderValue::from_bytes(v.as_bytes()).unwrap(),
        );
    }
    let json = res.json().await.unwrap_or(serde_json::Value::Null);
    Reply {
        status,
        headers,
        json,
    }
}

/// `hookgate_receiver_requests_total{outcome="overloaded"}` of `integration`.
fn overloaded_count(h: &Harness, integration: &str) -> u64 {
    let series = format!(
        "hookgate_receiver_requests_total{{integration=\"{integration}\",outcome=\"overloaded\"}}"
    );
    hookgate::metrics::counter_sum(&h.metrics.encode(), &series) as u64
}

/// `hookgate_http_<series>{listener="<listener>"}` as the harness's metrics expose it now; the
/// series must be there.
fn listener_series(h: &Harness, listener: &str, series: &str) -> u64 {
    let name = format!("hookgate_http_{series}{{listener=\"{listener}\"}}");
    let text = h.metrics.encode();
    assert!(text.contains(&format!("{name} ")), "no {name} in:\n{text}");
    hookgate::metrics::counter_sum(&text, &name) as u64
}

/// [`listener_series`] of the webhook port.
fn receiver_gauge(h: &Harness, series: &str) -> u64 {
    listener_series(h, "receiver", series)
}

/// Waits until `listener` reports `want` for `series`: the server has taken up (or let go of)
/// what the test's clients opened. Gives up after 10 s.
async fn until_series(h: &Harness, listener: &str, series: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = listener_series(h, listener, series);
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{listener} {series}: {now} after 10 s, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`until_series`] of the webhook port.
async fn until_gauge(h: &Harness, series: &str, want: u64) {
    until_series(h, "receiver", series, want).await
}

fn assert_overloaded(r: &Reply, took: Duration, what: &str) {
    println!("{what}: {} {} after {took:?}", r.status, r.json);
    assert_eq!((r.status.as_u16(), &r.json), (503, &error("overloaded")));
    assert!(
        r.headers.contains_key("retry-after"),
        "{what}: no Retry-After"
    );
    assert!(
        took < Duration::from_secs(3),
        "{what}: answered after {took:?}"
    );
}

#[tokio::test]
async fn requests_over_the_in_flight_cap_get_503_at_once() {
    const CAP: usize = 4;
    let (_dir, inbox) = sqlite_inbox().await;
    let h = harness(inbox);
    let (addr, _stop) = serve(&h, limits(64, CAP)).await;
    let body = stripe_body("evt_cap", "invoice.paid");
    let (path, headers) = h.sign("t/stripe", &body, opts());
    let mut stalled = Vec::new();
    for _ in 0..CAP {
        stalled.push(stalled_request(addr, &path, &headers).await);
    }
    // The server has read the stalled heads, and says so.
    until_gauge(&h, "requests_in_flight", CAP as u64).await;
    assert_eq!(receiver_gauge(&h, "max_requests_in_flight"), CAP as u64);
    assert_eq!(receiver_gauge(&h, "requests_refused_total"), 0);

    let start = Instant::now();
    let extra = post(addr, &path, &headers, &body).await;
    assert_overloaded(&extra, start.elapsed(), "request over the in-flight cap");
    assert_eq!(h.receiver.inbox().counts().await.unwrap().0, 0);
    // Counted like every answer, so the receiver-503 alert sees overload too.
    assert_eq!(overloaded_count(&h, "t/stripe"), 1);
    assert_eq!(receiver_gauge(&h, "requests_refused_total"), 1);
    // A request refused at the cap never held a slot.
    assert_eq!(receiver_gauge(&h, "requests_in_flight"), CAP as u64);

    // The slots come back when the stalled requests go away.
    drop(stalled);
    until_gauge(&h, "requests_in_flight", 0).await;
    let r = post(addr, &path, &headers, &body).await;
    assert_eq!((r.status.as_u16(), r.json), (200, accepted()));
}

#[tokio::test]
async fn connections_over_the_cap_get_503_at_once() {
    const CAP: usize = 3;
    let (_dir, inbox) = sqlite_inbox().await;
    let h = harness(inbox);
    let (addr, _stop) = serve_connection_cap(&h, CAP).await;
    let mut idle = Vec::new();
    for _ in 0..CAP {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    until_gauge(&h, "open_connections", CAP as u64).await;
    assert_eq!(receiver_gauge(&h, "max_connections"), CAP as u64);
    let start = Instant::now();
    let extra = post(addr, "/nowhere", &[], "{}").await;
    assert_overloaded(&extra, start.elapsed(), "connection over the cap");
    // A route's request refused at the connection cap is counted under its integration; a path
    // no route serves is not, as for unknown_route.
    let (path, _) = h.sign("t/stripe", "{}", opts());
    let refused = post(addr, &path, &[], "{}").await;
    assert_overloaded(
        &refused,
        start.elapsed(),
        "a route's connection over the cap",
    );
    assert_eq!(overloaded_count(&h, "t/stripe"), 1);
    // The listener counts both, whatever their path.
    assert_eq!(receiver_gauge(&h, "requests_refused_total"), 2);
    // The refused connections were answered outside the cap, and have gone.
    assert_eq!(receiver_gauge(&h, "open_connections"), CAP as u64);

    drop(idle);
    until_gauge(&h, "open_connections", 0).await;
    let r = post(addr, "/nowhere", &[], "{}").await;
    assert_eq!((r.status.as_u16(), r.json), (404, error("unknown_route")));
}

#[tokio::test]
async fn connections_past_those_being_refused_are_closed_unanswered_and_counted() {
    // The listener answers at most this many connections over its cap at once (REFUSING).
    const REFUSING: usize = 64;
    let (_dir, inbox) = sqlite_inbox().await;
    let h = harness(inbox);
    let (addr, _stop) = serve_connection_cap(&h, 1).await;
    let held = TcpStream::connect(addr).await.unwrap();
    until_gauge(&h, "open_connections", 1).await;
    // Over the cap, and silent: each waits for a request head to answer 503 to.
    let mut refused = Vec::new();
    for _ in 0..REFUSING {
        refused.push(TcpStream::connect(addr).await.unwrap());
    }
    assert_eq!(receiver_gauge(&h, "connections_dropped_total"), 0);
    let mut extra = TcpStream::connect(addr).await.unwrap();
    until_gauge(&h, "connections_dropped_total", 1).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), extra.read_to_end(&mut answer))
        .await
        .expect("the dropped connection is closed, not left open");
    println!("dropped connection: {read:?}, {} bytes", answer.len());
    assert!(
        answer.is_empty(),
        "answered: {:?}",
        String::from_utf8_lossy(&answer)
    );
    // The connections being refused still get their 503.
    let mut first = refused.swap_remove(0);
    first
        .write_all(b"GET /nowhere HTTP/1.1\r\nhost: hookgate\r\n\r\n")
        .await
        .unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), first.read_to_end(&mut reply))
        .await
        .expect("a refused connection is answered and closed")
        .unwrap();
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    assert!(reply.contains(r#"{"error":"overloaded"}"#), "{reply}");
    assert_eq!(receiver_gauge(&h, "open_connections"), 1);
    // The answered one is a refused request; the dropped ones sent none, and count only as drops.
    assert_eq!(receiver_gauge(&h, "requests_refused_total"), 1);
    assert_eq!(receiver_gauge(&h, "connections_dropped_total"), 1);
    drop(held);
}

#[tokio::test]
async fn the_admin_port_counts_the_requests_it_refuses() {
    let (_dir, inbox) = sqlite_inbox().await;
    let h = harness(inbox);
    // One connection, whose silent client holds it for the test.
    let limits = Limits {
        header_timeout: Duration::from_secs(10),
        ..limits(1, 8)
    };
    let admin = hookgate::http::admin::spawn(
        "127.0.0.1:0".parse().unwrap(),
        h.metrics.clone(),
        hookgate::http::admin::always_ready(),
        limits,
    )
    .await
    .unwrap();
    assert_eq!(listener_series(&h, "admin", "requests_refused_total"), 0);
    let held = TcpStream::connect(admin).await.unwrap();
    until_series(&h, "admin", "open_connections", 1).await;
    let start = Instant::now();
    let r = post(admin, "/metrics", &[], "").await;
    assert_overloaded(&r, start.elapsed(), "a scrape over the admin port's cap");
    // No role counts the admin port's 503s: the listener does.
    assert_eq!(listener_series(&h, "admin", "requests_refused_total"), 1);
    drop(held);
    until_series(&h, "admin", "open_connections", 0).await;
}
