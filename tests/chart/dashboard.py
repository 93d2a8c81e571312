#!/usr/bin/env python3
"""Generates charts/hookgate/files/dashboard.json, the Grafana dashboard the chart ships.

    python3 tests/chart/dashboard.py > charts/hookgate/files/dashboard.json

tests/chart/run.sh fails when the committed JSON differs from this script's output, so edit the
panels here and regenerate.
"""

import json

DS = {"type": "prometheus", "uid": "${datasource}"}
F = 'integration=~"$integration"'
R = "[$__rate_interval]"


class Dashboard:
    def __init__(self):
        self.panels = []
        self.y = 0

    def _id(self):
        return len(self.panels) + 1

    def row(self, title):
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def stats(self, items):
        w = 24 // len(items)
        for n, (title, desc, expr, unit) in enumerate(items):
            self.panels.append({
                "type": "stat", "title": title, "description": desc, "id": self._id(),
                "datasource": DS, "gridPos": {"h": 4, "w": w, "x": n * w, "y": self.y},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                            "colorMode": "value", "graphMode": "area"},
                "targets": [{"refId": "A", "datasource": DS, "expr": expr}],
            })
        self.y += 4

    def series(self, panels):
        """Each target is (expr, legend), or (expr, legend, unit) for a series in another unit than
        the panel's: it gets that unit and an axis of its own on the right."""
        w = 24 // len(panels)
        for n, p in enumerate(panels):
            title, desc, targets = p[:3]
            unit = p[3] if len(p) > 3 else "reqps"
            stack = p[4] if len(p) > 4 else False
            refs = [(chr(65 + i), t) for i, t in enumerate(targets)]
            self.panels.append({
                "type": "timeseries", "title": title, "description": desc, "id": self._id(),
                "datasource": DS, "gridPos": {"h": 8, "w": w, "x": n * w, "y": self.y},
                "fieldConfig": {"defaults": {"unit": unit, "custom": {
                    "drawStyle": "line", "fillOpacity": 10,
                    "stacking": {"mode": "normal" if stack else "none", "group": "A"}}},
                    "overrides": [{"matcher": {"id": "byFrameRefID", "options": ref},
                                   "properties": [{"id": "unit", "value": t[2]},
                                                  {"id": "custom.axisPlacement", "value": "right"}]}
                                  for ref, t in refs if len(t) > 2]},
                "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]},
                            "tooltip": {"mode": "multi", "sort": "desc"}},
                "targets": [{"refId": ref, "datasource": DS, "expr": t[0], "legendFormat": t[1]}
                            for ref, t in refs],
            })
        self.y += 8


def quantiles(metric):
    return [(f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{{{F}}}{R})))", f"p{round(q * 100)}")
            for q in (0.5, 0.95, 0.99)]


def build():
    d = Dashboard()
    d.row("Overview")
    d.stats([
        ("Accepted / s", "New events committed to the inbox.",
         f'sum(rate(hookgate_receiver_requests_total{{{F},outcome="accepted"}}{R}))', "reqps"),
        ("Signature failures / s", "Requests refused at signature verification.",
         f"sum(rate(hookgate_signature_failures_total{{{F}}}{R}))", "reqps"),
        ("Processed / s", "Delivery attempts answered 2xx.",
         f'sum(rate(hookgate_delivery_attempts_total{{{F},outcome="processed"}}{R}))', "reqps"),
        ("Dead letters (24h)", "Events dead-lettered in the last 24 hours.",
         f'sum(increase(hookgate_delivery_attempts_total{{{F},outcome="dead_letter"}}[24h]))', "short"),
        ("Oldest pending", "Age of the oldest event still waiting for delivery.",
         f"max(hookgate_inbox_oldest_pending_seconds{{{F}}})", "s"),
        ("Completion p95", "From the provider's signed timestamp to processed, 95th percentile.",
         f"histogram_quantile(0.95, sum by (le) (rate(hookgate_completion_latency_seconds_bucket{{{F}}}{R})))", "s"),
    ])
    d.row("Receiver")
    d.series([
        ("Requests by outcome",
         "hookgate_receiver_requests_total by outcome (accepted, duplicate, ignored, invalid_signature, ...).",
         [(f"sum by (outcome) (rate(hookgate_receiver_requests_total{{{F}}}{R}))", "{{outcome}}")], "reqps", True),
        ("Signature failures", "hookgate_signature_failures_total by integration and reason.",
         [(f"sum by (integration, reason) (rate(hookgate_signature_failures_total{{{F}}}{R}))",
           "{{integration}} {{reason}}")]),
        ("Duplicates and dedupe conflicts",
         "Duplicates (same event id, or a replayed signature) and dedupe conflicts (same id, different body: "
         "investigate). 'from memory' (all integrations): the duplicates the receivers answered from their "
         "memory of the keys they committed, without the database.",
         [(f"sum by (integration) (rate(hookgate_duplicates_total{{{F}}}{R}))", "duplicates {{integration}}"),
          (f"sum by (integration) (rate(hookgate_dedupe_conflicts_total{{{F}}}{R}))", "conflicts {{integration}}"),
          (f"sum(rate(hookgate_duplicates_remembered_total{R}))", "from memory (all integrations)")]),
        ("Memory of committed keys",
         "hookgate_dedupe_cache_bytes: what the fullest receiver's memory of committed keys holds against "
         "--dedupe-cache-mib (receiver.dedupeCache.mib). Dropped for room: entries let go before "
         "--dedupe-cache-ttl (hookgate_dedupe_cache_evicted_total, per second, all receivers); their "
         "retries go to the database. Steadily above zero: the budget holds less than the ttl.",
         [("max(hookgate_dedupe_cache_bytes)", "held (fullest receiver)"),
          (f"sum(rate(hookgate_dedupe_cache_evicted_total{R}))", "dropped for room", "ops")], "bytes"),
        ("Endpoint handshakes",
         "hookgate_handshakes_total by integration: provider endpoint checks answered (Slack url_verification, "
         "Discord PING, Twitch callback verification, Zoom url_validation, Meta subscribe). Never stored.",
         [(f"sum by (integration) (rate(hookgate_handshakes_total{{{F}}}{R}))", "{{integration}}")], "reqps"),
        ("Refusal log lines dropped",
         "hookgate_refusal_logs_dropped_total, all integrations: refused requests whose log line the receiver left "
         "out to stay within --refusal-log-rps. Rising: a flood of refusals (scanner, forger, misconfigured provider); "
         "the requests themselves are in Requests by outcome.",
         [(f"sum(rate(hookgate_refusal_logs_dropped_total{R}))", "dropped")]),
        ("Group commit: events per transaction",
         "hookgate_intake_batch_size, all integrations: events each receiver transaction held. Near 1: the "
         "database keeps up with every request; near --commit-batch: commits are the bottleneck.",
         [(f"histogram_quantile({q}, sum by (le) (rate(hookgate_intake_batch_size_bucket{R})))", f"p{round(q * 100)}")
          for q in (0.5, 0.99)], "short"),
        ("Receiver answers: p99 against the commits'",
         "hookgate_receiver_request_duration_seconds: from a request reaching a receiver's handler to its 2xx answer, "
         "by integration (refusals are not timed); hookgate_intake_commit_duration_seconds, all receivers: each "
         "group-commit transaction. When the answers' p99 follows the commits', the database is the wait (see "
         "Database connections against the cap); when it rises alone, the receivers' CPU or connections are. "
         "Providers give up after seconds (Slack 3 s, GitHub and Stripe 10 s); HookgateReceiverSlow fires on the "
         "answers' p99.",
         [(f"histogram_quantile(0.99, sum by (integration, le) (rate(hookgate_receiver_request_duration_seconds_bucket{{{F}}}{R})))",
           "answers p99 {{integration}}"),
          (f"histogram_quantile(0.99, sum by (le) (rate(hookgate_intake_commit_duration_seconds_bucket{R})))",
           "commits p99 (all receivers)"),
          (f"histogram_quantile(0.5, sum by (le) (rate(hookgate_intake_commit_duration_seconds_bucket{R})))",
           "commits p50 (all receivers)")], "s"),
        ("Verified requests by key",
         "hookgate_verified_requests_total by integration and the id of the key that verified each request. "
         "During a rotation, the old key's line should fall to zero before it retires.",
         [(f"sum by (integration, key) (rate(hookgate_verified_requests_total{{{F}}}{R}))", "{{integration}} {{key}}")]),
    ])
    d.series([
        ("Listener connections against the cap",
         "hookgate_http_open_connections / hookgate_http_max_connections in the pod nearest its cap, for the "
         "webhook port (receiver) and the admin ports (admin). At 100% one more connection is answered 503 "
         "overloaded (receiver.listener.maxConnections); closed unanswered (hookgate_http_connections_dropped_total, "
         "per second, all pods): connections past the 64 a pod answers 503 at once; see the HookgateConnectionsDropped "
         "alert. A receiver pod whose average stays high fires HookgateReceiverNearCapacity. Not per "
         "integration, so the integration filter does not apply.",
         [("max by (listener) (hookgate_http_open_connections / hookgate_http_max_connections)", "{{listener}}"),
          (f"sum by (listener) (rate(hookgate_http_connections_dropped_total{R}))", "{{listener}} closed unanswered",
           "ops")],
         "percentunit"),
        ("Listener requests in flight against the cap",
         "hookgate_http_requests_in_flight / hookgate_http_max_requests_in_flight in the pod nearest its cap. At "
         "100% one more request is answered 503 overloaded (receiver.listener.maxInFlight): add receivers, or "
         "raise the cap within the pods' memory; a receiver pod whose average stays high fires "
         "HookgateReceiverNearCapacity. Held at the cap while little is accepted: slow bodies or a slow "
         "database. Refused (hookgate_http_requests_refused_total, per second, all pods): the requests the "
         "listeners answered 503 overloaded at either cap, whatever their path. Not per integration, so the "
         "integration filter does not apply.",
         [("max by (listener) (hookgate_http_requests_in_flight / hookgate_http_max_requests_in_flight)",
           "{{listener}}"),
          (f"sum by (listener) (rate(hookgate_http_requests_refused_total{R}))", "{{listener}} refused 503",
           "ops")], "percentunit"),
    ])
    d.series([
        ("Delivery slots against the cap",
         "hookgate_delivery_slots_in_use / hookgate_delivery_max_slots in the pod nearest its cap, by role (job): "
         "slots held by deliveries whose destination has not answered yet. At 100% due events wait for a slot: add "
         "workers or raise worker.concurrency, unless slow destinations hold the slots (Delivery duration). Not per "
         "integration, so the integration filter does not apply.",
         [("max by (job) (hookgate_delivery_slots_in_use / hookgate_delivery_max_slots)", "{{job}}")],
         "percentunit"),
    ])
    d.series([
        ("Database connections against the cap",
         "hookgate_db_connections{state=\"in_use\"} / hookgate_db_max_connections in the pod nearest its cap, by "
         "role (job). At 100% a call of that pod waits for a connection, up to database.acquireTimeout: past it "
         "receivers answer 503 inbox_unavailable and workers retry their claims. Raise "
         "<role>.database.maxConnections within the server's max_connections (README: Sizing PostgreSQL). Not per "
         "integration, so the integration filter does not apply.",
         [('max by (job) (hookgate_db_connections{state="in_use"} / ignoring (state) hookgate_db_max_connections)',
           "{{job}}")], "percentunit"),
        ("Database connections held",
         "hookgate_db_connections summed over each role's pods (job), in use by a call or idle in the pool: "
         "what hookgate holds of the server's max_connections. Not per integration, so the integration filter "
         "does not apply.",
         [("sum by (job, state) (hookgate_db_connections)", "{{job}} {{state}}")], "short", True),
    ])
    d.row("Delivery")
    d.series([
        ("Delivery attempts by result",
         "hookgate_delivery_attempts_total by result (processed, retry, dead_letter, ignored).",
         [(f"sum by (outcome) (rate(hookgate_delivery_attempts_total{{{F}}}{R}))", "{{outcome}}")], "reqps", True),
        ("Dead letters",
         "Events dead-lettered per interval, and dead letters waiting in the inbox. "
         "Inspect with `hookgate dlq list`, replay with `hookgate dlq replay`.",
         [(f'sum by (integration) (increase(hookgate_delivery_attempts_total{{{F},outcome="dead_letter"}}{R}))',
           "dead-lettered {{integration}}"),
          (f'max by (integration) (hookgate_inbox_events{{{F},status="dead_letter"}})', "waiting {{integration}}")],
         "short"),
        ("Delivery duration", "One delivery attempt (hookgate_delivery_duration_seconds).",
         quantiles("hookgate_delivery_duration_seconds"), "s"),
        ("Ordering: ungated deliveries",
         "Events of an ordered integration delivered without the ordering gate (hookgate_ordering_ungated_total).",
         [(f"sum by (integration) (rate(hookgate_ordering_ungated_total{{{F}}}{R}))", "{{integration}}")]),
        ("Stuck destinations: deferred events",
         "hookgate_deliveries_deferred_total: events given back to the inbox without an attempt while their "
         "integration held its share of the delivery slots and its destination did not answer. Rising: that "
         "integration's destination hangs (README, Each integration's share of the slots); the others keep delivering.",
         [(f"sum by (integration) (rate(hookgate_deliveries_deferred_total{{{F}}}{R}))", "{{integration}}")]),
    ])
    d.row("Inbox and latency")
    d.series([
        ("Backlog by status",
         "hookgate_inbox_events: events waiting for delivery (pending, retry, processing) and dead "
         "letters of the whole database, refreshed every 15 s; every worker pod exports the same figures, so "
         "they are summed over integrations, not pods. Processed events: the 'Delivery attempts by result' panel.",
         [(f"sum by (status) (max by (integration, status) (hookgate_inbox_events{{{F}}}))", "{{status}}")], "short"),
        ("Oldest pending event", "hookgate_inbox_oldest_pending_seconds by integration.",
         [(f"max by (integration) (hookgate_inbox_oldest_pending_seconds{{{F}}})", "{{integration}}")], "s"),
        ("Completion latency",
         "From the provider's signed timestamp (receipt when unsigned) to processed, retries included "
         "(hookgate_completion_latency_seconds).",
         quantiles("hookgate_completion_latency_seconds"), "s"),
        ("Deliveries handed over at intake",
         "hookgate_events_handed_over_total over hookgate_delivery_attempts_total: the share of attempts whose "
         "event the receiver handed to the workers of its own process, with no claim (hookgate standalone only; "
         "empty for the chart's separate pods). Falling under load: the workers are saturated and events wait for "
         "claims.",
         [(f"sum(rate(hookgate_events_handed_over_total{{{F}}}{R})) / "
           f"sum(rate(hookgate_delivery_attempts_total{{{F}}}{R}))", "handed over")], "percentunit"),
        ("Worker claims",
         "hookgate_claims_total by whether the claim found due events (some) or none. Empty claims come at "
         "most once per --poll per worker process while idle, plus one after each notice of events stored "
         "for a claim; a high rate of 'some' with few events each means many events wait for claims.",
         [(f"sum by (found) (rate(hookgate_claims_total{R}))", "{{found}}")], "ops"),
        ("Workers' transactions: claims and completions, p99",
         "hookgate_claim_duration_seconds: each claim statement, found events or not; "
         "hookgate_completion_commit_duration_seconds: each transaction recording outcomes, by transaction (batch: "
         "outcomes batched on PostgreSQL, their count in hookgate_completion_batch_size; single: one outcome, every "
         "one on SQLite and an ordered event's on either backend), all workers. A claim's events wait for it, and a delivered "
         "event keeps its lease until its completion commits: when these rise with the backlog, the database is the "
         "wait (see Database connections against the cap), not the destinations or the slots.",
         [(f"histogram_quantile(0.99, sum by (le) (rate(hookgate_claim_duration_seconds_bucket{R})))", "claims p99"),
          (f"histogram_quantile(0.99, sum by (le, transaction) "
           f"(rate(hookgate_completion_commit_duration_seconds_bucket{R})))", "completions p99, {{transaction}}"),
          (f"histogram_quantile(0.5, sum by (le) (rate(hookgate_completion_batch_size_bucket{R})))",
           "outcomes per completion, p50", "short")], "s"),
    ])
    d.row("Controller and keys")
    d.series([
        ("Reconcile errors by API call",
         "hookgate_reconcile_errors_total by the call that failed (read_secret, apply_route, patch_status, ...). "
         "The controller retries with backoff; a steady rate means the API server or RBAC refuses it.",
         [(f"sum by (error) (rate(hookgate_reconcile_errors_total{R}))", "{{error}}")], "ops"),
        ("Keys by phase",
         "hookgate_key_phase: signing keys in each phase (Active, Retiring, Retired) as the leading controller "
         "last wrote them to status.",
         [(f"count by (phase) (max by (integration, key, phase) (hookgate_key_phase{{{F}}}))", "{{phase}}")],
         "short"),
        ("Requests verified by retiring keys",
         "Requests verified by a key that is Retiring (hookgate_verified_requests_total joined with "
         "hookgate_key_phase): senders that have not switched yet. See the HookgateRetiringKeyInUse alert.",
         [(f"sum by (integration, key) (rate(hookgate_verified_requests_total{{{F}}}{R})) and on (integration, key) "
           f'max by (integration, key) (hookgate_key_phase{{{F},phase="Retiring"}}) == 1',
           "{{integration}} {{key}}")]),
    ])
    d.row("Catch-up")
    d.series([
        ("Events found missing by catch-up",
         "hookgate_catch_up_missing_total: events the provider's API listed that the inbox never received "
         "(stored, or redelivered for GitHub), and hookgate_catch_up_present_total: listed events it already held.",
         [(f"sum by (integration) (increase(hookgate_catch_up_missing_total{{{F}}}[1h]))", "{{integration}} missing"),
          (f"sum by (integration) (increase(hookgate_catch_up_present_total{{{F}}}[1h]))", "{{integration}} present")],
         "short"),
        ("Catch-up failures by reason",
         "hookgate_catch_up_errors_total by integration and reason (unauthorized, rate_limited, "
         "provider_unavailable, network, ...). See the HookgateCatchUpFailing alert.",
         [(f"sum by (integration, reason) (increase(hookgate_catch_up_errors_total{{{F}}}[1h]))",
           "{{integration}} {{reason}}")], "short"),
        ("Catch-up passes",
         "hookgate_catch_up_passes_running: passes in progress in all workers (each pod runs at most "
         "worker.catchUpPasses); hookgate_catch_up_passes_waiting: integrations whose pass is due but waits "
         "for a free slot, in the pod with the most. Waiting for minutes: raise worker.catchUpPasses. Not "
         "per integration, so the integration filter does not apply.",
         [("sum(hookgate_catch_up_passes_running)", "running (all workers)"),
          ("max(hookgate_catch_up_passes_waiting)", "waiting (most in one worker)")],
         "short"),
        ("Retention failures by step",
         "hookgate_retention_failures_total by step (purge, delete, versions, nonces, records, "
         "integrations): the janitor's failed steps, whose rows wait for the next pass. See the "
         "HookgateRetentionFailing alert.",
         [(f"sum by (step) (increase(hookgate_retention_failures_total{{{F}}}[1h]))",
           "{{step}}")], "short"),
    ])
    return {
        "uid": "hookgate", "title": "hookgate", "description": "Webhook receiver, inbox and delivery (hookgate)",
        "tags": ["hookgate", "webhooks"], "timezone": "browser", "editable": True, "graphTooltip": 1,
        "schemaVersion": 39, "version": 1, "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
        "annotations": {"list": []}, "links": [],
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1},
            {"name": "integration", "label": "Integration", "type": "query", "datasource": DS,
             "query": {"query": "label_values(hookgate_receiver_requests_total, integration)",
                       "refId": "integration"},
             "definition": "label_values(hookgate_receiver_requests_total, integration)",
             "includeAll": True, "allValue": ".*", "multi": True, "refresh": 2, "sort": 1,
             "current": {}, "hide": 0},
        ]},
        "panels": d.panels,
    }


def render():
    return json.dumps(build(), indent=2) + "\n"


if __name__ == "__main__":
    print(render(), end="")
