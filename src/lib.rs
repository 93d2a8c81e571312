#![forbid(unsafe_code)]
//! hookgate: receive third-party webhooks safely — verify the signature on the raw bytes, check
//! freshness, dedupe, commit to a durable inbox, and only then answer 2xx.
//!
//! Imports run one way, from the top of this list to the bottom (docs/architecture.md, and
//! `tests/it/architecture.rs` fails on an import against the direction):
//! - core, no I/O and no role: `time`, `redact`, `signature`, `destination`, `crd`, `route`;
//! - storage and plumbing: `inbox`, `logs`, `manifest`, `metrics`, `tls`, `http`;
//! - roles, which never import each other: `receiver`, `worker`, `controller`, `catch_up`;
//! - entry points: `run` (one per role, plus standalone);
//! - user interfaces: `cli`, then `plugin` (kubectl-hookgate).

// core
pub mod crd;
pub mod destination;
pub mod redact;
pub mod route;
pub mod signature;
pub mod time;
// storage and plumbing
pub mod http;
pub mod inbox;
pub mod logs;
pub mod manifest;
pub mod metrics;
pub mod tls;
// roles
pub mod catch_up;
pub mod controller;
pub mod receiver;
pub mod worker;
// entry points and interfaces
pub mod cli;
pub mod plugin;
pub mod run;
