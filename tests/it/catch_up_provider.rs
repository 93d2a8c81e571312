//! A local stand-in for the providers' list endpoints, implemented as their API references
//! document them: Stripe `GET /v1/events` (bearer key, `limit` 1..100, `created[gte]`,
//! `starting_after`, `has_more`, newest first, Stripe's error body), Paddle `GET /events`
//! (bearer key, `order_by=id[ASC|DESC]`, `per_page` up to 200, `after`, `meta.pagination`,
//! Paddle's error body) and GitHub's repository hook deliveries (bearer token, `per_page` up to
//! 100, `cursor` in the `Link` header, `POST …/deliveries/{id}/attempts` answering 202).
//! It counts every call, can answer a scripted status first (429 with `Retry-After`, 5xx), and
//! can hold each answer for a while so that two passes overlap.
#![allow(dead_code)]

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const KEY: &str = "sk_test_hookgate_catch_up_0123456789";

#[derive(Default)]
pub struct Provider {
    /// Stripe events, in creation order (oldest first).
    pub stripe: Vec<Value>,
    /// Paddle events, in id order (ids sort like their creation).
    pub paddle: Vec<Value>,
    /// GitHub deliveries of hook `octo/hello` #7.
    pub deliveries: Vec<Value>,
    /// Answers given before the real one: (status, Retry-After).
    pub script: VecDeque<(u16, Option<&'static str>)>,
    /// How long every answer is held.
    pub delay: Duration,
    /// Calls by endpoint: "stripe", "paddle", "github", "redeliver".
    pub calls: HashMap<&'static str, usize>,
    /// Delivery ids GitHub was asked to redeliver.
    pub redelivered: Vec<u64>,
    /// Query strings received, in order.
    pub queries: Vec<String>,
}

pub type Shared = Arc<Mutex<Provider>>;

pub struct Served {
    pub addr: SocketAddr,
    pub state: Shared,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Served {
    pub async fn start(provider: Provider) -> Self {
        let state = Arc::new(Mutex::new(provider));
        let app = Router::new()
            .route("/v1/events", get(stripe))
            .route("/events", get(paddle))
            .route(
                "/repos/{owner}/{repo}/hooks/{hook}/deliveries",
                get(deliveries),
            )
            .route(
                "/repos/{owner}/{repo}/hooks/{hook}/deliveries/{id}/attempts",
                post(redeliver),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            addr,
            state,
            _stop: stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn calls(&self, endpoint: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .calls
            .get(endpoint)
            .copied()
            .unwrap_or(0)
    }
}

fn query(raw: &Option<String>) -> HashMap<String, String> {
    form_urlencoded::parse(raw.as_deref().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::to_string)
}

fn answer(status: u16, retry_after: Option<&str>, body: Value) -> Response {
    let mut r = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
    if let Some(ra) = retry_after {
        r.headers_mut().insert("retry-after", ra.parse().unwrap());
    }
    r
}

/// Counts the call and holds it; `Some` when a scripted answer replaces the real one.
async fn enter(
    state: &Shared,
    endpoint: &'static str,
    raw: &Option<String>,
) -> Option<(u16, Option<&'static str>)> {
    let delay = {
        let mut s = state.lock().unwrap();
        *s.calls.entry(endpoint).or_default() += 1;
        s.queries.push(raw.clone().unwrap_or_default());
        s.delay
    };
    tokio::time::sleep(delay).await;
    state.lock().unwrap().script.pop_front()
}

fn stripe_error(status: u16, kind: &str, message: &str, retry_after: Option<&str>) -> Response {
    answer(
        status,
        retry_after,
        json!({"error": {"type": kind, "message": message}}),
    )
}

async fn stripe(
    State(state): State<Shared>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    if let Some((status, ra)) = enter(&state, "stripe", &raw).await {
        let kind = if status == 429 {
            "rate_limit_error"
        } else {
            "api_error"
        };
        return stripe_error(status, kind, "scripted", ra);
    }
    match bearer(&headers) {
        Some(k) if k == KEY => {}
        // Stripe masks all but the end of a wrong key; this echoes it whole, the worst case
        // for a client that shows provider messages.
        Some(k) => {
            return stripe_error(
                401,
                "invalid_request_error",
                &format!("Invalid API Key provided: {k}"),
                None,
            );
        }
        None => {
            return stripe_error(
                401,
                "invalid_request_error",
                "You did not provide an API key.",
                None,
            );
        }
    }
    let q = query(&raw);
    let limit: usize = match q.get("limit").map(|l| l.parse()) {
        None => 10,
        Some(Ok(l)) if (1..=100).contains(&l) => l,
        Some(_) => {
            return stripe_error(
                400,
                "invalid_request_error",
                "Invalid integer: limit must be between 1 and 100",
                None,
            );
        }
    };
    let gte: i64 = q
        .get("created[gte]")
        .and_then(|v| v.parse().ok())
        .unwrap_or(i64::MIN);
    let s = state.lock().unwrap();
    // Newest first.
    let mut all: Vec<&Value> = s
        .stripe
        .iter()
        .filter(|e| e["created"].as_i64().unwrap() >= gte)
        .collect();
    all.reverse();
    let start = match q.get("starting_after") {
        None => 0,
        Some(id) => match all.iter().position(|e| e["id"] == *id.as_str()) {
            Some(i) => i + 1,
            None => {
                return answer(
                    400,
                    None,
                    json!({"error": {"type": "invalid_request_error", "code": "resource_missing", "param": "starting_after", "message": format!("No such event: '{id}'")}}),
                );
            }
        },
    };
    let page: Vec<&Value> = all.iter().skip(start).take(limit).copied().collect();
    let has_more = start + page.len() < all.len();
    answer(
        200,
        None,
        json!({"object": "list", "url": "/v1/events", "has_more": has_more, "data": page}),
    )
}

fn paddle_error(status: u16, code: &str, detail: &str, retry_after: Option<&str>) -> Response {
    answer(
        status,
        retry_after,
        json!({
            "error": {"type": "request_error", "code": code, "detail": detail,
                      "documentation_url": format!("https://developer.paddle.com/errors/shared/{code}")},
            "meta": {"request_id": "00000000-0000-4000-8000-000000000000"}
        }),
    )
}

async fn paddle(
    State(state): State<Shared>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    if let Some((status, ra)) = enter(&state, "paddle", &raw).await {
        let code = if status == 429 {
            "too_many_requests"
        } else {
            "internal_error"
        };
        return paddle_error(status, code, "scripted", ra);
    }
    match bearer(&headers) {
        Some(k) if k == KEY => {}
        Some(_) => {
            return paddle_error(
                403,
                "forbidden",
                "You aren't permitted to perform this request.",
                None,
            );
        }
        None => {
            return paddle_error(
                401,
                "authentication_missing",
                "Authentication header missing.",
                None,
            );
        }
    }
    let q = query(&raw);
    let per_page: usize = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(50)
        .clamp(1, 200);
    let desc = match q.get("order_by").map(String::as_str) {
        None | Some("id[ASC]") => false,
        Some("id[DESC]") => true,
        Some(_) => return paddle_error(400, "invalid_field", "order_by: invalid", None),
    };
    let s = state.lock().unwrap();
    let mut all: Vec<&Value> = s.paddle.iter().collect();
    if desc {
        all.reverse();
    }
    let start = match q.get("after") {
        None => 0,
        Some(id) => all
            .iter()
            .position(|e| e["event_id"] == *id.as_str())
            .map_or(all.len(), |i| i + 1),
    };
    let page: Vec<&Value> = all.iter().skip(start).take(per_page).copied().collect();
    let has_more = start + page.len() < all.len();
    let next = page.last().map(|e| {
        format!(
            "https://api.paddle.com/events?after={}",
            e["event_id"].as_str().unwrap()
        )
    });
    answer(
        200,
        None,
        json!({
            "data": page,
            "meta": {"request_id": "00000000-0000-4000-8000-000000000001",
                     "pagination": {"per_page": per_page, "next": next, "has_more": has_more, "estimated_total": all.len()}}
        }),
    )
}

fn github_error(status: u16, message: &str) -> Response {
    answer(
        status,
        None,
        json!({"message": message, "documentation_url": "https://docs.github.com/rest", "status": status.to_string()}),
    )
}

async fn deliveries(
    State(state): State<Shared>,
    Path((owner, repo, hook)): Path<(String, String, u64)>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    if let Some((status, ra)) = enter(&state, "github", &raw).await {
        return answer(status, ra, json!({"message": "scripted"}));
    }
    if bearer(&headers).as_deref() != Some(KEY) {
        return github_error(401, "Bad credentials");
    }
    if (owner.as_str(), repo.as_str(), hook) != ("octo", "hello", 7) {
        return github_error(404, "Not Found");
    }
    let q = query(&raw);
    let per_page: usize = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let s = state.lock().unwrap();
    // Newest first; the cursor is an opaque "v1_<index>".
    let mut all: Vec<&Value> = s.deliveries.iter().collect();
    all.reverse();
    let start: usize = q
        .get("cursor")
        .and_then(|c| c.strip_prefix("v1_")?.parse().ok())
        .unwrap_or(0);
    let page: Vec<&Value> = all.iter().skip(start).take(per_page).copied().collect();
    let mut r = answer(200, None, json!(page));
    if start + page.len() < all.len() {
        let link = format!(
            "<https://api.github.com/repositories/1/hooks/{hook}/deliveries?per_page={per_page}&cursor=v1_{}>; rel=\"next\"",
            start + page.len()
        );
        r.headers_mut().insert("link", link.parse().unwrap());
    }
    r
}

async fn redeliver(
    State(state): State<Shared>,
    Path((_owner, _repo, _hook, id)): Path<(String, String, u64, u64)>,
    headers: HeaderMap,
) -> Response {
    if let Some((status, ra)) = enter(&state, "redeliver", &None).await {
        return answer(status, ra, json!({"message": "scripted"}));
    }
    if bearer(&headers).as_deref() != Some(KEY) {
        return github_error(401, "Bad credentials");
    }
    let mut s = state.lock().unwrap();
    if !s.deliveries.iter().any(|d| d["id"] == id) {
        return github_error(404, "Not Found");
    }
    s.redelivered.push(id);
    answer(202, None, json!({}))
}

/// A Stripe event as the API (and the webhook) renders it.
pub fn stripe_event(id: &str, ty: &str, created: i64) -> Value {
    json!({
        "id": id, "object": "event", "api_version": "2024-06-20", "created": created,
        "data": {"object": {"id": format!("in_{id}"), "object": "invoice"}},
        "livemode": false, "pending_webhooks": 1,
        "request": {"id": null, "idempotency_key": null}, "type": ty
    })
}

/// A Paddle event entity.
pub fn paddle_event(id: &str, ty: &str, occurred_at: chrono::DateTime<chrono::Utc>) -> Value {
    json!({
        "event_id": id, "event_type": ty,
        "occurred_at": occurred_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "data": {"id": format!("sub_{id}"), "status": "active"}
    })
}

/// A GitHub hook delivery as the list shows it.
pub fn delivery(id: u64, guid: &str, at: chrono::DateTime<chrono::Utc>, status_code: u16) -> Value {
    json!({
        "id": id, "guid": guid,
        "delivered_at": at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "redelivery": false, "duration": 0.3,
        "status": if status_code == 200 { "OK" } else { "Invalid HTTP Response: 503" },
        "status_code": status_code, "event": "push", "action": null,
        "installation_id": null, "repository_id": 1
    })
}
