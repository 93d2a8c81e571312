//! HTTP plumbing shared by every listener: the JSON answers of the product (`reply`), the
//! hardened connection loop (`listener`) and the metrics/readiness server (`admin`).

pub mod admin;
mod error;
pub mod listener;
pub mod reply;

pub use error::Error;
