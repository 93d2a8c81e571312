//! What each answer of the destination makes of an event: processed, retried (timeouts,
//! connection errors, `Retry-After`), dead-lettered (redirects, an exhausted schedule), and an
//! event whose worker was killed, delivered once its lease ran out.

use super::*;

async fn each_destination_answer_has_its_outcome(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    let cases: Vec<(Answer, &str, &str)> = vec![
        (Answer::Status(204), "processed", ""),
        (Answer::Status(500), "retry", "HTTP 500"),
        (Answer::Status(503), "retry", "HTTP 503"),
        (Answer::Status(408), "retry", "HTTP 408"),
        (Answer::Status(425), "retry", "HTTP 425"),
        (Answer::Status(429), "retry", "HTTP 429"),
        (Answer::Status(404), "dead_letter", "HTTP 404"),
        (Answer::Status(410), "dead_letter", "HTTP 410"),
    ];
    for (i, (answer, status, error)) in cases.into_iter().enumerate() {
        let id = format!("case-{i}");
        s.dest.script([answer.clone()]);
        s.event("w/orders", &id, &format!(r#"{{"id":"{id}"}}"#))
            .await;
        let before = Utc::now();
        assert_eq!(w.run_once().await.unwrap(), 1);
        let after = Utc::now();
        let (got, attempts, last_error, next) = s.row(&id).await;
        assert_eq!((got.as_str(), attempts), (status, 1), "{answer:?}");
        assert_eq!(last_error.unwrap_or_default(), error, "{answer:?}");
        if status == "retry" {
            // First step of the default schedule (30 s), ±10 % jitter, from the instant the
            // attempt ended.
            assert_between(
                next.unwrap(),
                before + secs(27),
                after + secs(33),
                &format!("{answer:?}"),
            );
        } else {
            assert_eq!(next, None, "{answer:?}");
        }
    }
    assert_eq!(s.dest.received().len(), 8);
}

/// A destination that answers every request with `code` and a `Location` naming `to`.
async fn redirecting(code: u16, to: &str) -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = hits.clone();
    let to = to.to_string();
    let app = axum::Router::new().fallback(move || {
        let (seen, to) = (seen.clone(), to.clone());
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            (
                axum::http::StatusCode::from_u16(code).unwrap(),
                [(axum::http::header::LOCATION, to)],
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/moved", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, hits)
}

/// A redirect is final and never followed: the signed body must not go to a host the
/// integration never named. Each 3xx carries a `Location` to a second recording destination,
/// which must see nothing.
async fn redirects_are_dead_letters_and_never_followed(inbox: Inbox) {
    let elsewhere = Destination::start().await;
    let codes = [301, 302, 303, 307, 308];
    let mut yaml = SECRET.to_string();
    let mut redirectors = Vec::new();
    for code in codes {
        let (url, hits) = redirecting(code, &elsewhere.url).await;
        yaml += &format!(
            r#"
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: r{code}, namespace: w}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  delivery: {{url: "{url}"}}
"#
        );
        redirectors.push(hits);
    }
    let s = Setup::with_yaml(inbox, Destination::start().await, &yaml);
    for code in codes {
        s.event(&format!("w/r{code}"), &format!("moved-{code}"), "{}")
            .await;
    }
    assert_eq!(s.worker().run_once().await.unwrap(), codes.len());
    assert!(
        elsewhere.received().is_empty(),
        "a redirect was followed: {:?}",
        elsewhere.received()
    );
    for (code, hits) in codes.iter().zip(&redirectors) {
        let (status, attempts, error, _) = s.row(&format!("moved-{code}")).await;
        let want = format!("HTTP {code}");
        assert_eq!(
            (status.as_str(), attempts, error.as_deref()),
            ("dead_letter", 1, Some(want.as_str()))
        );
        assert_eq!(hits.load(Ordering::SeqCst), 1, "{code}");
    }
}

async fn timeouts_and_connection_errors_are_retried(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    s.dest.script([Answer::Hang]);
    s.event("w/fast", "slow", "{}").await;
    s.event("w/closed", "refused", "{}").await;
    assert_eq!(w.run_once().await.unwrap(), 2);
    let (status, attempts, error, _) = s.row("slow").await;
    assert_eq!(
        (status.as_str(), attempts, error.as_deref()),
        ("retry", 1, Some("timeout"))
    );
    let (status, attempts, error, _) = s.row("refused").await;
    assert_eq!((status.as_str(), attempts), ("retry", 1));
    let error = error.unwrap();
    assert!(error.starts_with("connect: "), "{error}");
    assert!(
        !error.contains("127.0.0.1:1"),
        "errors leave the URL out: {error}"
    );
}

async fn retry_after_is_honoured(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.script([
        Answer::StatusRetryAfter(429, "7"),
        Answer::StatusRetryAfter(500, "7"),
    ]);
    s.event("w/orders", "ra-429", "{}").await;
    let before = Utc::now();
    assert_eq!(s.worker().run_once().await.unwrap(), 1);
    let after = Utc::now();
    // Exactly the 7 s asked for: no jitter on a time the destination named.
    let next = s.row("ra-429").await.3.unwrap();
    assert_between(
        next,
        before + secs(7),
        after + secs(7),
        "429 Retry-After: 7",
    );
    // On a 500 Retry-After is not part of the contract: the schedule applies.
    s.event("w/orders", "ra-500", "{}").await;
    let before = Utc::now();
    assert_eq!(s.worker().run_once().await.unwrap(), 1);
    let after = Utc::now();
    let next = s.row("ra-500").await.3.unwrap();
    assert_between(
        next,
        before + secs(27),
        after + secs(33),
        "500 ignores Retry-After",
    );
}

async fn exhausted_schedule_dead_letters_after_exactly_three_attempts(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.always(Answer::Status(500));
    s.event("w/fast", "doomed", "{}").await;
    s.run_until(vec![s.worker()], Duration::from_secs(30), || async {
        s.row("doomed").await.0 == "dead_letter"
    })
    .await;
    let got = s.dest.received();
    assert_eq!(got.len(), 3);
    let (_, attempts, error, _) = s.row("doomed").await;
    assert_eq!(attempts, 3);
    assert_eq!(
        error.unwrap(),
        "HTTP 500 (retry schedule exhausted after 3 attempts)"
    );
    let outcomes: Vec<String> = s
        .attempts("doomed")
        .await
        .into_iter()
        .map(|a| a.3)
        .collect();
    assert_eq!(outcomes, ["retry", "retry", "dead_letter"]);
    let numbers: Vec<String> = got.iter().map(|r| r.header("hookgate-attempt")).collect();
    assert_eq!(numbers, ["1", "2", "3"]);
    let ids: HashSet<String> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids.len(), 1, "one webhook-id across the attempts");
}

/// The worker dies mid-delivery (its task is dropped: nothing is released). After the lease the
/// event is claimed again and delivered, with the same webhook-id.
async fn event_of_a_killed_worker_is_delivered_after_its_lease(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.script([Answer::Hang]);
    s.event("w/orders", "crash", "{}").await;
    let lease = WorkerConfig {
        lease: Duration::from_secs(1),
        ..cfg()
    };
    let first = s.worker_with(lease.clone());
    let killed = tokio::spawn(async move { first.run(std::future::pending()).await });
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    killed.abort();
    assert!(killed.await.unwrap_err().is_cancelled());
    assert_eq!(s.row("crash").await.0, "processing");

    let second = s.worker_with(lease);
    s.run_until(vec![second], Duration::from_secs(15), || async {
        s.row("crash").await.0 == "processed"
    })
    .await;
    let got = s.dest.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    assert_eq!(
        (
            got[0].header("hookgate-attempt"),
            got[1].header("hookgate-attempt")
        ),
        ("1".into(), "2".into())
    );
    // The first attempt never finished, so only the second is recorded.
    assert_eq!(
        s.attempts("crash").await,
        vec![(2, Some(200), None, "processed".to_string())]
    );
}

on_both_backends!(
    each_destination_answer_has_its_outcome,
    redirects_are_dead_letters_and_never_followed,
    timeouts_and_connection_errors_are_retried,
    retry_after_is_honoured,
    exhausted_schedule_dead_letters_after_exactly_three_attempts,
    event_of_a_killed_worker_is_delivered_after_its_lease,
);
