//! The integration tests, one binary: each module is one file of today's suite and links the
//! crate once (the cluster suite against a real API server is `tests/kube/`, built apart, and
//! `hookgate bench`'s tests are `tests/bench/`, apart so that no other test writes to the
//! server while the bench measures the WAL it writes).
//! `common` comes first so that its `macro_rules!` helpers (every_scenario!, on_both_backends!,
//! on!) are in scope for every module after it.

#[macro_use]
mod common;

mod architecture;

mod catch_up;
mod catch_up_loop;
mod catch_up_provider;
mod cli_flags;
mod compiled_routes;
mod controller_plan;
mod controller_reconcile;
mod crd;
mod db_cancelled_begin;
mod db_connections;
mod db_deadline;
mod db_names;
mod db_pool_cap;
mod dedupe_cache;
mod delivery_fencing;
mod delivery_forward_headers;
mod destinations;
mod dlq;
mod dlq_audit;
mod event_versions;
mod extreme_values;
mod faults;
mod faults_delivery;
mod forget_versions;
mod fuzz_smoke;
mod group_commit;
mod handoff;
mod handoff_tenants;
mod hostile_http;
mod hostile_inputs;
mod inbox_figures_plans;
mod inbox_gauges;
mod intake_timing;
mod janitor;
mod janitor_locks;
mod janitor_stop;
mod listener_limits;
mod manifests;
mod notify;
mod ordering_fence;
mod plugin;
mod providers;
mod providers_fixtures;
mod providers_handshakes;
mod query_plans;
mod rate_limits;
mod readiness;
mod receiver_contract;
mod receiver_postgres;
mod receiver_sqlite;
mod refusal_log;
mod retention;
mod retention_plans;
mod send_providers;
mod signature_cap;
mod signers_forged;
mod signers_providers;
mod signers_python;
mod signers_rfc8032;
mod sigterm;
mod sink;
mod source_ranges;
mod standalone;
mod worker;
