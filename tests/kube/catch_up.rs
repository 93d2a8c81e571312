//! Catch-up in cluster mode: the API credential travels from the tenant's Secret, through the
//! compiled route Secret the controller writes, to `hookgate worker --namespace` under the
//! worker's own ServiceAccount. The worker lists a local Stripe stand-in, stores the event the
//! inbox never received and delivers it; the controller reports the run in status.

use crate::destination::Destination;
use crate::fixtures::{Release, Role, condition, get_json, wait_for, wait_ready};
use crate::harness::ApiServer;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const API_KEY: &str = "sk_test_cluster_catch_up_24680";

/// Stripe's `GET /v1/events` with one event an hour old; 401 for any other credential. Records
/// the `Authorization` headers it was sent.
struct StandIn {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl StandIn {
    async fn start() -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new().route(
            "/v1/events",
            axum::routing::get({
                let seen = seen.clone();
                async move |headers: HeaderMap| -> Response {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    seen.lock().unwrap().push(auth.clone());
                    if auth != format!("Bearer {API_KEY}") {
                        let error = serde_json::json!({"error": {"type": "invalid_request_error", "message": "Invalid API Key provided"}});
                        return (StatusCode::UNAUTHORIZED, axum::Json(error)).into_response();
                    }
                    let created = chrono::Utc::now().timestamp() - 3600;
                    axum::Json(serde_json::json!({
                        "object": "list",
                        "url": "/v1/events",
                        "has_more": false,
                        "data": [{
                            "id": "evt_cluster_lost_1",
                            "object": "event",
                            "type": "invoice.paid",
                            "created": created,
                            "data": {"object": {"id": "in_1"}}
                        }]
                    }))
                    .into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, seen }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_catches_up_with_the_tenants_credential_and_status_reports_the_run() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    let r = Release::install(server, "cu").await;
    let dest = Destination::start().await;
    let api = StandIn::start().await;
    let controller = Role::controller(server, &r, "cu-0");
    let mut worker = Role::worker(server, &r);
    let t = r.tenant.as_str();
    server.apply(&format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: stripe-keys, namespace: {t}}}
stringData: {{v1: whsec_test_cluster_catch_up, api: {API_KEY}}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: pay, namespace: {t}}}
spec:
  scheme: {{type: stripe}}
  keys: [{{id: v1, secretRef: {{name: stripe-keys, key: v1}}}}]
  delivery: {{url: "{}"}}
  catchUp: {{provider: stripe, credentialRef: {{name: stripe-keys, key: api}}, apiBaseUrl: "{}", interval: 1m}}
"#,
        dest.url, api.url
    ));
    wait_ready(server, t, "pay", Duration::from_secs(60)).await;
    worker.wait_ready("worker").await;

    // The worker's first look falls within a minute of its start.
    let delivered = dest.wait_for(1, Duration::from_secs(120)).await;
    let body = String::from_utf8_lossy(&delivered[0].body).to_string();
    assert!(body.contains("evt_cluster_lost_1"), "{body}");
    assert!(
        api.seen
            .lock()
            .unwrap()
            .iter()
            .all(|a| *a == format!("Bearer {API_KEY}")),
        "every list request carried the tenant's credential"
    );
    wait_for(
        "status: lastCatchUpAt, catchUpMissing 1, CatchUpFailing False",
        Duration::from_secs(60),
        async || {
            let wi = get_json(server, &["whi", "pay", "-n", t]);
            wi["status"]["lastCatchUpAt"].is_string()
                && wi["status"]["catchUpMissing"] == 1
                && condition(&wi, "CatchUpFailing").is_some_and(|c| c["status"] == "False")
        },
    )
    .await;
    let metrics = worker.metrics().await;
    for series in [
        format!("hookgate_catch_up_missing_total{{integration=\"{t}/pay\"}} 1"),
        "hookgate_catch_up_passes_waiting 0".to_string(),
    ] {
        assert!(
            metrics.contains(&series),
            "{series} missing from:\n{metrics}"
        );
    }
    for log in [worker.logs(), controller.logs()] {
        assert!(!log.contains(API_KEY), "the credential is in a log");
    }
    let status = serde_json::to_string(&get_json(server, &["whi", "pay", "-n", t])).unwrap();
    assert!(!status.contains(API_KEY), "the credential is in the object");
    r.drop_database().await;
}
