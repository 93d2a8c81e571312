//! Every series hookgate serves, with its help text: the one list of names and meanings, but
//! for the listeners' `hookgate_http_*`, the pool's `hookgate_db_*` and the delivery slots, which
//! collectors read at each scrape (`listeners.rs`, `scraped.rs`).

use super::Metrics;
use prometheus_client::registry::Registry;

/// A registry of `m`'s series (they share their values with `m`).
pub(super) fn registry(m: &Metrics) -> Registry {
    let mut registry = Registry::with_prefix("hookgate");
    let r = &mut registry;
    r.register(
        "receiver_requests",
        "Webhook requests by integration and outcome",
        m.requests.clone(),
    );
    r.register(
        "signature_failures",
        "Requests refused at signature verification, by reason",
        m.signature_failures.clone(),
    );
    r.register(
        "duplicates",
        "Requests answered as duplicates (same event id, or a replayed signature)",
        m.duplicates.clone(),
    );
    r.register(
        "handshakes",
        "Provider endpoint checks answered (Slack url_verification, Discord PING, Twitch, Zoom, Meta subscribe); never stored",
        m.handshakes.clone(),
    );
    r.register(
        "dedupe_conflicts",
        "Known event ids that arrived again with a different body",
        m.dedupe_conflicts.clone(),
    );
    r.register(
        "delivery_attempts",
        "Delivery attempts and gate decisions by integration and result (processed, retry, dead_letter, ignored)",
        m.deliveries.clone(),
    );
    r.register(
        "ordering_ungated",
        "Events of an ordered integration delivered without the gate (no resource id or version, or a version of another kind)",
        m.ordering_ungated.clone(),
    );
    r.register(
        "deliveries_deferred",
        "Events given back to the inbox without an attempt while their integration held its share of the delivery slots and its destination did not answer",
        m.deferred.clone(),
    );
    r.register(
        "delivery_duration_seconds",
        "Duration of one delivery attempt",
        m.delivery_duration.clone(),
    );
    r.register(
        "completion_latency_seconds",
        "From the provider's signed timestamp (or receipt, when unsigned) to processed: the health of the whole pipeline",
        m.completion_latency.clone(),
    );
    r.register(
        "inbox_events",
        "Events waiting for delivery (pending, retry, processing) or dead-lettered, by integration and status",
        m.inbox_events.clone(),
    );
    r.register(
        "inbox_oldest_pending_seconds",
        "Age of the oldest event still waiting for delivery (pending, retry or processing)",
        m.oldest_pending.clone(),
    );
    r.register(
        "intake_batch_size",
        "Events committed together by the receiver's group commit, per transaction",
        m.intake_batch_size.clone(),
    );
    r.register(
        "intake_commit_duration_seconds",
        "Duration of one intake transaction (the receiver's group commit of one batch), from its start to its commit or failure",
        m.intake_commit_duration.clone(),
    );
    r.register(
        "receiver_request_duration_seconds",
        "From a request reaching the receiver's handler to its 2xx answer (accepted, duplicate, ignored, endpoint handshake)",
        m.answer_duration.clone(),
    );
    r.register(
        "claim_duration_seconds",
        "Duration of one claim statement by the workers, whether it found events or not (hookgate_claims_total counts them by that)",
        m.claim_duration.clone(),
    );
    r.register(
        "completion_commit_duration_seconds",
        "Duration of one transaction recording delivery outcomes, from its start to its commit or failure, by transaction: batch (completions batched on PostgreSQL) or single (one completion: on SQLite, and for an event that passed an ordering gate)",
        m.completion_commit_duration.clone(),
    );
    r.register(
        "completion_batch_size",
        "Delivery outcomes committed together by the workers' batched completions, per transaction (PostgreSQL)",
        m.completion_batch_size.clone(),
    );
    r.register(
        "reconcile_errors",
        "Failed reconciles of WebhookIntegrations, by the call that failed (read_secret, patch_status, ...); each is retried in 30 s",
        m.reconcile_errors.clone(),
    );
    r.register(
        "verified_requests",
        "Requests whose signature verified, by integration and the id of the key that verified them (receiver)",
        m.verified_requests.clone(),
    );
    r.register(
        "key_phase",
        "1 for each signing key's current phase (Active, Retiring, Retired) as the controller last wrote it to status (controller, leader only)",
        m.key_phase.clone(),
    );
    r.register(
        "refusal_logs_dropped",
        "Refused requests whose log line the receiver dropped to stay within its per-process line budget (--refusal-log-rps)",
        m.refusal_logs_dropped.clone(),
    );
    r.register(
        "duplicates_remembered",
        "Duplicates the receiver answered from its memory of the keys it committed recently, without a database statement (--dedupe-cache-mib, --dedupe-cache-ttl); also counted in duplicates",
        m.duplicates_remembered.clone(),
    );
    r.register(
        "dedupe_cache_bytes",
        "Bytes the receiver's memory of committed keys holds against its budget (--dedupe-cache-mib), read every second",
        m.dedupe_cache_bytes.clone(),
    );
    r.register(
        "dedupe_cache_evicted",
        "Entries the receiver's memory of committed keys dropped for room before --dedupe-cache-ttl: retries of those go to the database; rising means the budget holds less than the ttl",
        m.dedupe_cache_evicted.clone(),
    );
    r.register(
        "events_handed_over",
        "New events the receiver stored leased to the workers of its own process and handed over, so that no claim had to read them back (standalone, and receivers run with --with-workers)",
        m.handed_over.clone(),
    );
    r.register(
        "claims",
        "Claims the workers made, by whether they found any due event (found=some) or none (found=none) (workers)",
        m.claims.clone(),
    );
    r.register(
        "catch_up_missing",
        "Events catch-up found missing from the inbox: stored from the provider's API (Stripe, Paddle) or redelivered through it (GitHub) (workers)",
        m.catch_up_missing.clone(),
    );
    r.register(
        "catch_up_present",
        "Events catch-up listed that the inbox already held (workers)",
        m.catch_up_present.clone(),
    );
    r.register(
        "catch_up_errors",
        "Failed catch-up runs by reason (unauthorized, forbidden, rate_limited, provider_unavailable, network, bad_response, inbox) (workers)",
        m.catch_up_errors.clone(),
    );
    r.register(
        "catch_up_passes_running",
        "Catch-up passes in progress in this process, at most --catch-up-passes (workers)",
        m.catch_up_running.clone(),
    );
    r.register(
        "catch_up_passes_waiting",
        "Integrations whose catch-up pass is due but waits for a free slot of --catch-up-passes in this process (workers)",
        m.catch_up_waiting.clone(),
    );
    r.register(
        "retention_failures",
        "Steps of retention passes that failed by step (integrations, purge, delete, versions, nonces, records); their rows wait for the next pass (workers)",
        m.retention_failures.clone(),
    );
    // hookgate_http_*: each listener's slots, read at every scrape (listeners.rs).
    r.register_collector(Box::new(m.listeners.clone()));
    // hookgate_db_*, hookgate_delivery_*slots*: the process's database pool and delivery slots,
    // read at every scrape (scraped.rs).
    r.register_collector(Box::new(m.scraped.clone()));
    registry
}
