#![forbid(unsafe_code)]
//! hookgate: receive third-party webhooks safely — verify the signature on the raw bytes, check
//! freshness, dedupe, commit to a durable inbox, and only then answer 2xx.

pub mod admin;
pub mod bench;
pub mod cli;
pub mod controller;
pub mod crd;
pub mod dlq;
mod error;
pub mod inbox;
pub mod kube_api;
pub mod listener;
pub mod manifest;
pub mod metrics;
pub mod plugin;
pub mod receiver;
pub mod send;
pub mod standalone;
pub mod time;
pub mod tls;
pub mod watch_backoff;
pub mod worker;

pub use error::{Error, Result};
