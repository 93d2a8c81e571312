//! The cluster suite: hookgate against a real kube-apiserver + etcd on loopback (README "Testing
//! against a real API server"). The operator runs as real processes (`hookgate controller`,
//! `receiver`, `worker`, `kubectl-hookgate`) with kubeconfigs carrying tokens minted for the chart's
//! own ServiceAccounts, against a real PostgreSQL (DATABASE_URL).
//!
//! Without Go (so without kube-apiserver) every test prints why it is skipped, unless
//! HOOKGATE_REQUIRE_CLUSTER=1, which CI sets, turns the skip into a failure.

#[allow(dead_code)]
#[path = "../it/common/destination.rs"]
mod destination;
#[allow(dead_code)]
#[path = "../it/common/procs.rs"]
mod procs;

mod catch_up;
mod crd;
mod delivering_receiver;
mod fixtures;
mod harness;
mod helm;
mod leader;
mod operator;
mod outage;
mod ownership;
mod plugin;

pub fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}
