//! The Kubernetes side: compiled routes and, in the controller, staged key rotation.

pub mod compiled;
pub mod generated;
pub mod ownership;
pub mod phases;
pub mod plan;
pub mod reconcile;
