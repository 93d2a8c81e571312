//! The Kubernetes side: compiled routes and, in the controller, staged key rotation.
//!
//! `plan` and `phases` decide, `reconcile` reads and writes: nothing in `plan`, `phases`,
//! `generated`, `compiled` or `ownership` touches the API server or a clock.

pub mod compiled;
pub mod error;
pub mod generated;
pub mod ownership;
pub mod phases;
pub mod plan;
pub mod reconcile;

pub use error::Error;
