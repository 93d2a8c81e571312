//! One catch-up pass of one integration: take the integration's lock, check that a pass is due,
//! list the provider's events of the lookback page by page, store (Stripe, Paddle) or have
//! redelivered (GitHub) what the inbox lacks, and record the outcome.

use super::error::{Error, Result};
use super::http::Api;
use super::{Listed, github, paddle, schedule, stripe};
use crate::crd::{CatchUpProvider, defaults};
use crate::inbox::{Inbox, InsertOutcome, NewEvent, RunResult};
use crate::metrics::Metrics;
use crate::route::Source;
use crate::route::catch_up::CatchUpTarget;
use crate::route::fields::{pointer_value, storable};
use crate::route::json_pointers::Found;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;

/// Pages one pass reads at most: 72 h of a busy Stripe account at 100 a page is far below it,
/// and a provider that keeps answering `has_more` cannot hold a pass forever.
const MAX_PAGES: usize = 1000;

/// What a pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// Another process (or task) holds the integration's lock: it is running the pass.
    Locked,
    /// A pass ended less than an interval ago.
    NotDue,
    /// A pass ran: events found missing, events already held, and its error if it failed
    /// (what it stored before the error stays stored and counted).
    Done {
        missing: u64,
        present: u64,
        error: Option<Error>,
    },
    /// The process stopped during the pass: its lock was given back and nothing recorded, so the
    /// next process to look runs it (what it stored stays stored).
    Stopped,
}

/// What a pass needs besides its target.
pub struct Ctx<'a> {
    pub inbox: &'a Inbox,
    pub api: &'a Api,
    pub metrics: &'a Metrics,
    /// The longest a pass may run; the SQLite lease lasts a minute longer.
    pub run_timeout: Duration,
    /// Turns true when the process stops; `None`: never.
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
}

#[derive(Debug, Default)]
struct Tally {
    missing: u64,
    present: u64,
}

/// Runs one pass at `now`. `ignore_schedule` runs it even if one ended less than an interval ago
/// (tests, and a first run); the lock is taken either way.
pub async fn run(
    ctx: &Ctx<'_>,
    t: &CatchUpTarget,
    now: DateTime<Utc>,
    ignore_schedule: bool,
) -> Ran {
    let lease = ctx.run_timeout + Duration::from_secs(60);
    let lock = match ctx
        .inbox
        .try_lock_catch_up(&t.integration, now, lease)
        .await
    {
        Ok(Some(lock)) => lock,
        Ok(None) => return Ran::Locked,
        Err(e) => return finish(ctx, t, now, Tally::default(), Err(e.into())).await,
    };
    if !ignore_schedule {
        match ctx.inbox.catch_up_run(&t.integration).await {
            Ok(run)
                if !schedule::due(run.as_ref().and_then(|r| r.last_run_at), t.interval, now) =>
            {
                release(lock).await;
                return Ran::NotDue;
            }
            Ok(_) => {}
            Err(e) => {
                release(lock).await;
                return finish(ctx, t, now, Tally::default(), Err(e.into())).await;
            }
        }
    }
    let mut tally = Tally::default();
    let fetching = tokio::time::timeout(ctx.run_timeout, fetch(ctx, t, now, &mut tally));
    let result = tokio::select! {
        r = fetching => r.unwrap_or(Err(Error::Timeout(ctx.run_timeout))),
        () = stopped(ctx.stop.clone()) => {
            // Given back now rather than left to the session's end or the SQLite lease, which
            // would keep the next process from this integration for the run timeout and a minute.
            release(lock).await;
            tracing::info!(integration = %t.integration, "catch-up pass stopped with the process; its lock is given back");
            return Ran::Stopped;
        }
    };
    let ran = finish(ctx, t, Utc::now().max(now), tally, result).await;
    release(lock).await;
    ran
}

/// Resolves once `stop` turns true (or its sender is gone); never without one.
async fn stopped(stop: Option<tokio::sync::watch::Receiver<bool>>) {
    match stop {
        Some(mut rx) => {
            let _ = rx.wait_for(|s| *s).await;
        }
        None => std::future::pending().await,
    }
}

async fn release(lock: crate::inbox::CatchUpLock) {
    if let Err(e) = lock.release().await {
        tracing::warn!(error = %e, "catch-up lock release failed; it ends with the session or lease");
    }
}

/// Records the pass, counts it, logs it.
async fn finish(
    ctx: &Ctx<'_>,
    t: &CatchUpTarget,
    at: DateTime<Utc>,
    tally: Tally,
    result: Result<()>,
) -> Ran {
    let error = result.err();
    let record = RunResult {
        missing: tally.missing as i64,
        error: error.as_ref().map(|e| (e.metric_label(), e.to_string())),
    };
    if let Err(e) = ctx.inbox.record_catch_up(&t.integration, at, &record).await {
        tracing::warn!(integration = %t.integration, error = %e, "could not record the catch-up run");
    }
    ctx.metrics
        .catch_up_events(&t.integration, tally.missing, tally.present);
    match &error {
        Some(e) => {
            ctx.metrics.catch_up_error(&t.integration, e.metric_label());
            tracing::warn!(integration = %t.integration, provider = ?t.provider, reason = e.metric_label(), error = %e, missing = tally.missing, "catch-up failed");
        }
        None => {
            tracing::info!(integration = %t.integration, provider = ?t.provider, missing = tally.missing, present = tally.present, "catch-up done")
        }
    }
    Ran::Done {
        missing: tally.missing,
        present: tally.present,
        error,
    }
}

async fn fetch(
    ctx: &Ctx<'_>,
    t: &CatchUpTarget,
    now: DateTime<Utc>,
    tally: &mut Tally,
) -> Result<()> {
    let since = crate::time::before(now, t.lookback);
    let settled = crate::time::before(now, defaults::CATCH_UP_SETTLE);
    if t.provider == CatchUpProvider::Github {
        return redeliver(ctx, t, since, settled, tally).await;
    }
    let base = t.api_base_url.as_str();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page = match t.provider {
            CatchUpProvider::Paddle => {
                let req = paddle::request(base, cursor.as_deref())?;
                paddle::parse(&ctx.api.send(&req, &t.credential).await?.body, since)?
            }
            _ => {
                let req = stripe::request(base, since, cursor.as_deref())?;
                stripe::parse(&ctx.api.send(&req, &t.credential).await?.body)?
            }
        };
        // Each page is stored as it comes: a later failure keeps what was found.
        store(ctx, t, page.events, settled, now, tally).await?;
        cursor = page.next;
        if cursor.is_none() {
            return Ok(());
        }
    }
    Err(Error::BadResponse(format!("more than {MAX_PAGES} pages")))
}

/// GitHub: every delivery of the lookback first (a GUID's attempts may span pages), then one
/// redelivery per GUID the inbox lacks.
async fn redeliver(
    ctx: &Ctx<'_>,
    t: &CatchUpTarget,
    since: DateTime<Utc>,
    settled: DateTime<Utc>,
    tally: &mut Tally,
) -> Result<()> {
    let base = t.api_base_url.as_str();
    let hook = t
        .github
        .as_ref()
        .ok_or_else(|| Error::BadResponse("catchUp.github is missing".into()))?;
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0.. {
        if page == MAX_PAGES {
            return Err(Error::BadResponse(format!("more than {MAX_PAGES} pages")));
        }
        let req = github::list_request(base, hook, cursor.as_deref())?;
        let answer = ctx.api.send(&req, &t.credential).await?;
        let (deliveries, past) = github::parse(&answer.body, since)?;
        all.extend(deliveries);
        cursor = github::next_cursor(answer.link.as_deref()).filter(|_| !past);
        if cursor.is_none() {
            break;
        }
    }
    let mut guids: Vec<String> = all.iter().map(|d| d.guid.clone()).collect();
    guids.sort();
    guids.dedup();
    let mut known = std::collections::HashSet::new();
    for chunk in guids.chunks(500) {
        known.extend(ctx.inbox.known_event_ids(&t.integration, chunk).await?);
    }
    tally.present += known.len() as u64;
    for d in github::to_redeliver(&all, &known, settled) {
        ctx.api
            .send(&github::redeliver_request(base, hook, d.id), &t.credential)
            .await?;
        tally.missing += 1;
        tracing::info!(integration = %t.integration, guid = %d.guid, delivery = d.id, "catch-up: redelivery requested");
    }
    Ok(())
}

/// Stores the settled events of a page the inbox does not hold, in one transaction.
async fn store(
    ctx: &Ctx<'_>,
    t: &CatchUpTarget,
    listed: Vec<Listed>,
    settled: DateTime<Utc>,
    now: DateTime<Utc>,
    tally: &mut Tally,
) -> Result<()> {
    let mut events = Vec::with_capacity(listed.len());
    for ev in listed {
        // Young events are left to their webhook, probably in flight.
        if ev.created.is_some_and(|c| c > settled) {
            continue;
        }
        let json: Value = serde_json::from_slice(&ev.body)
            .map_err(|e| Error::BadResponse(format!("listed event: {e}")))?;
        let Some(id) = value(&json, &t.event_id).filter(|id| storable(id) && !id.is_empty()) else {
            return Err(Error::BadResponse(
                "a listed event has no usable event id where the route reads it".into(),
            ));
        };
        let event_type = value(&json, &t.event_type).filter(|v| storable(v));
        let ignored = !t.allows(event_type.as_deref());
        // The receiver's rule: authentic events of a version nobody supports are never delivered.
        let unsupported = t
            .versions
            .as_ref()
            .filter(|_| !ignored)
            .and_then(|v| v.refuse(json.pointer(&v.pointer).map(Found::from).as_ref()));
        let event = NewEvent::caught_up(
            &t.integration,
            t.scheme,
            id,
            event_type,
            ev.body,
            ev.created,
            &t.credential_name,
            ignored,
            now,
        );
        events.push(match unsupported {
            Some(reason) => event.dead_lettered(reason),
            None => event,
        });
    }
    if events.is_empty() {
        return Ok(());
    }
    let outcomes = ctx.inbox.insert_many(&events).await?;
    if outcomes
        .iter()
        .any(|o| matches!(o, InsertOutcome::Inserted { .. }))
    {
        // Caught-up events are verified by no key: their use is the empty key id's.
        ctx.inbox
            .record_key_use(&[(&t.integration, "", now)])
            .await?;
    }
    for (ev, outcome) in events.iter().zip(outcomes) {
        match outcome {
            InsertOutcome::Inserted { .. } => {
                tally.missing += 1;
                tracing::info!(integration = %t.integration, event_id = %ev.event_id(), event_type = ev.event_type().unwrap_or("-"), "catch-up: stored an event the inbox never received");
            }
            _ => tally.present += 1,
        }
    }
    Ok(())
}

/// The route's source read from a listed event's JSON; headers do not exist there.
fn value(json: &Value, source: &Source) -> Option<String> {
    match source {
        Source::Pointer(p) => pointer_value(json, p),
        Source::FirstOf(all) => all.iter().find_map(|s| value(json, s)),
        Source::Headers(_) | Source::Form(_) | Source::SignatureDigest => None,
    }
}
