//! One request through the fixed pipeline: route -> source address -> method / size / rate ->
//! signature -> window -> handshake? -> event id and type -> filter -> durable insert -> reply.
//! Nothing is answered 2xx before the insert has committed, except a provider's endpoint check,
//! which is never stored. The request's parts are read in `read.rs`; the insert and what follows
//! it (the hand-over, metrics, the log line) are in `store.rs`.

use super::Receiver;
use super::client::{self, Unknown};
use super::limits::RouteLimiter;
use super::read::{Read, read_body, stored_headers};
use super::refusal_log::{self, Refusal};
use super::reply;
use super::store::{self, Received};
use crate::http::reply::Reply;
use crate::inbox::NewEvent;
use crate::metrics::Metrics;
use crate::route::CompiledRoute;
use crate::signature::{Handshake, Rejection, Subscription};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// What a request gets: the ordinary reply (with the scheme's finer reason when verification
/// failed), or the answer to a provider's endpoint check.
enum Answer {
    Reply(Reply, Option<&'static str>),
    Handshake(Handshake),
}

impl From<Reply> for Answer {
    fn from(r: Reply) -> Self {
        Answer::Reply(r, None)
    }
}

pub(super) async fn handle(State(rx): State<Arc<Receiver>>, req: Request) -> Response {
    let started = std::time::Instant::now();
    let request_id = refusal_log::request_id(req.headers());
    let client = client::of_request(&req, rx.trusted_proxies);
    // Logged as the allowlist sees it; the peer (a proxy) when the forwarded entry is unusable.
    let source = client.ok().or_else(|| client::peer(&req).map(|p| p.ip()));
    let (route, answer) = answer(&rx, req, client).await;
    let integration = route.as_ref().map(|r| r.integration.as_str());
    let mut response = match answer {
        Answer::Reply(reply, detail) => {
            if let Some(integration) = integration {
                rx.metrics.request(integration, reply.outcome());
            }
            if !reply.status().is_success() {
                rx.refusal_log.record(&Refusal {
                    request_id: &request_id,
                    integration,
                    reason: reply.outcome(),
                    detail,
                    source,
                    elapsed: started.elapsed(),
                });
            }
            let mut res = reply.into_response();
            if reply == Reply::MethodNotAllowed
                && route.as_ref().is_some_and(|r| r.verify_token.is_some())
            {
                // Meta's endpoint also answers its GET subscription check.
                res.headers_mut()
                    .insert(header::ALLOW, header::HeaderValue::from_static("GET, POST"));
            }
            res
        }
        Answer::Handshake(h) => {
            let integration = integration.unwrap_or_default();
            rx.metrics.request(integration, "handshake");
            Metrics::count(&rx.metrics.handshakes, integration);
            tracing::info!(integration = %integration, answer = h.kind(), "endpoint handshake answered");
            handshake_response(h)
        }
    };
    // What a provider counts as delivered; refusals are counted by reason instead.
    if let Some(integration) = integration.filter(|_| response.status().is_success()) {
        let took = started.elapsed().as_secs_f64();
        Metrics::observe(&rx.metrics.answer_duration, integration, took);
    }
    if let Some(v) = refusal_log::header_value(&request_id) {
        response
            .headers_mut()
            .insert(refusal_log::REQUEST_ID_HEADER, v);
    }
    response
}

/// The route (none for an unknown path) and what the request gets.
async fn answer(
    rx: &Receiver,
    req: Request,
    client: Result<IpAddr, Unknown>,
) -> (Option<Arc<CompiledRoute>>, Answer) {
    let routing = rx.routes.load_full();
    let path = req.uri().path();
    let (Some(route), Some(limiter)) = (routing.table.get(path), routing.limiters.get(path)) else {
        return (None, Reply::UnknownRoute.into());
    };
    let answer = if let Err(reply) = from_allowed_source(route, client) {
        reply.into()
    } else if req.method() == Method::GET && route.verify_token.is_some() {
        subscribe(route, limiter, req.uri().query())
    } else {
        process(rx, route, limiter, req).await
    };
    (Some(route.clone()), answer)
}

fn handshake_response(h: Handshake) -> Response {
    let typed = |ct: &'static str, body: String| {
        (StatusCode::OK, [(header::CONTENT_TYPE, ct)], body).into_response()
    };
    match h {
        Handshake::Json(body) => typed("application/json", body),
        Handshake::Text(body) => typed("text/plain; charset=utf-8", body),
        Handshake::NoContent => StatusCode::NO_CONTENT.into_response(),
    }
}

/// `spec.sourceRanges`, before anything else, Meta's unsigned `GET` included. A refusal spends
/// neither rate budget: it costs no body read and no signature check, no more than a 404 for an
/// unknown path, and an outside flood must not make an allowed sender's bad signatures 429.
fn from_allowed_source(
    route: &CompiledRoute,
    client: Result<IpAddr, Unknown>,
) -> Result<(), Reply> {
    if route.source_ranges.is_empty() {
        return Ok(());
    }
    match client {
        Ok(ip) if route.source_ranges.allows(ip) => Ok(()),
        Ok(ip) => {
            tracing::debug!(integration = %route.integration, client = %ip, "source not allowed");
            Err(Reply::SourceNotAllowed)
        }
        Err(unknown) => {
            tracing::debug!(integration = %route.integration, reason = unknown.reason(), "client address unknown");
            Err(Reply::ClientAddressUnknown)
        }
    }
}

/// Meta's unsigned `GET ?hub.mode=subscribe`: a wrong token spends the unverified budget, as a
/// forged signature does, so the token cannot be guessed at full speed.
fn subscribe(route: &CompiledRoute, limiter: &RouteLimiter, query: Option<&str>) -> Answer {
    let token = route.verify_token.as_ref().expect("checked by the caller");
    match crate::signature::meta::subscribe(query, &token.0) {
        Subscription::Challenge(c) => Answer::Handshake(Handshake::Text(c)),
        Subscription::Malformed => Reply::Malformed.into(),
        Subscription::BadToken => over(limiter.unverified.as_ref())
            .unwrap_or(Reply::InvalidVerifyToken)
            .into(),
    }
}

async fn process(
    rx: &Receiver,
    route: &CompiledRoute,
    limiter: &RouteLimiter,
    req: Request,
) -> Answer {
    if req.method() != Method::POST {
        return Reply::MethodNotAllowed.into();
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > route.max_body_bytes as u64) {
        return Reply::BodyTooLarge.into();
    }
    let now = (rx.clock)();
    // Headers first: a request refused for its signature headers never costs a body read.
    let prepared = match route
        .verifier
        .prepare(req.headers(), req.uri().query(), now)
    {
        Ok(p) => p,
        Err(rejection) => return refused(rx, route, limiter, rejection),
    };
    let (parts, body) = req.into_parts();
    let body = match read_body(body, route.max_body_bytes, rx.body_timeout).await {
        Ok(b) => b,
        Err(reply) => return reply.into(),
    };
    let verified = match route.verifier.check(prepared, &body) {
        Ok(v) => v,
        Err(rejection) => return refused(rx, route, limiter, rejection),
    };
    // Counted before the rate limit and the window: any verified request shows its sender still
    // signs with this key, which is what the retiring-key alert asks.
    rx.metrics.verified(&route.integration, verified.key_id());
    // Only verified requests spend the route's limit: forgeries cannot lock the provider out.
    if let Some(reply) = over(limiter.verified.as_ref()) {
        return reply.into();
    }
    if let Some(ts) = verified.timestamp()
        && !reply::within_window(now, ts, route.tolerance)
    {
        return Reply::TimestampOutsideWindow.into();
    }
    // A provider checking the endpoint: answered, never stored.
    if let Some(h) = route.verifier.handshake(&verified, &parts.headers, &body) {
        return Answer::Handshake(h);
    }

    let json = (!route.json.is_empty())
        .then(|| route.json.read(&body))
        .flatten();
    let read = Read {
        headers: &parts.headers,
        json: json.as_ref(),
        body: &body,
        verified: &verified,
    };
    let Some(event_id) = read.value(&route.event_id).filter(|id| !id.is_empty()) else {
        return Reply::Malformed.into();
    };
    let event_type = read.value(&route.event_type);
    if !reply::storable(&event_id) || !event_type.as_deref().is_none_or(reply::storable) {
        return Reply::Malformed.into();
    }
    let ignored = !route.allows(event_type.as_deref());
    // Authentic, so stored and answered 200 either way; only a supported version is delivered.
    let unsupported = route
        .versions
        .as_ref()
        .filter(|_| !ignored)
        .and_then(|v| v.refuse(json.as_ref().and_then(|j| j.at(&v.pointer))));

    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let headers = stored_headers(&parts.headers, &route.verifier.scheme().signature_headers());
    let event = NewEvent::new(
        verified,
        &route.integration,
        route.verifier.scheme().name(),
        event_id.clone(),
        event_type.clone(),
        headers,
        content_type,
        body,
        ignored,
        now,
        route.nonce_retention,
        // An id read from the signed body (or the signature) needs no separate nonce.
        route.event_id.signed(),
    );
    let event = match unsupported.clone() {
        Some(reason) => event.dead_lettered(reason),
        None => event,
    };
    let received = Received {
        event_id: &event_id,
        event_type: event_type.as_deref(),
        ignored,
        unsupported: unsupported.as_deref(),
    };
    store::store(rx, route, event, received).await.into()
}

/// 429 when `limiter` has no room left for one more request.
fn over(limiter: Option<&governor::DefaultDirectRateLimiter>) -> Option<Reply> {
    let not_until = limiter?.check().err()?;
    Some(reply::rate_limited(not_until.wait_time_from(
        governor::clock::Clock::now(&governor::clock::DefaultClock::default()),
    )))
}

/// A request that failed verification spends the route's unverified budget, then gets 429.
/// Either way the refusal line carries the scheme's reason.
fn refused(
    rx: &Receiver,
    route: &CompiledRoute,
    limiter: &RouteLimiter,
    rejection: Rejection,
) -> Answer {
    rx.metrics
        .signature_failure(&route.integration, rejection.reason());
    let reply = over(limiter.unverified.as_ref()).unwrap_or_else(|| reply::refused(&rejection));
    Answer::Reply(reply, Some(rejection.reason()))
}
