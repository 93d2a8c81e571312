//! Why a reconcile failed, one variant per API call the reconciler makes, so the metric says which
//! call fails (a missing RBAC verb shows up as one label) without reading logs.
//!
//! Only failures that the controller retries are errors here. A missing Secret, a refused route
//! or an invalid spec are outcomes the plan reports in status; an unreachable inbox only costs the
//! traffic figures and `lastUsedAt`, so it is logged and the reconcile goes on.

use kube::runtime::finalizer;

/// The reconcile layer's error. Each variant holds only the API error: never a Secret's values,
/// which the reconciler has in hand when some of these calls fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a Secret the integration references, or the one holding its generated keys.
    #[error("Kubernetes API: {0}")]
    ReadSecret(#[source] kube::Error),
    /// Applying the Secret that holds the generated keys.
    #[error("Kubernetes API: {0}")]
    WriteKeys(#[source] kube::Error),
    /// Listing the compiled routes, for path claims and recorded retirements.
    #[error("Kubernetes API: {0}")]
    ListRoutes(#[source] kube::Error),
    /// Applying the compiled route, when the API server did not refuse it outright (those
    /// refusals go to status instead).
    #[error("Kubernetes API: {0}")]
    ApplyRoute(#[source] kube::Error),
    /// Deleting the compiled route (path lost to another integration, or cleanup).
    #[error("Kubernetes API: {0}")]
    DeleteRoute(#[source] kube::Error),
    /// Writing the integration's status.
    #[error("Kubernetes API: {0}")]
    PatchStatus(#[source] kube::Error),
}

impl Error {
    /// The `error` label of `hookgate_reconcile_errors_total`: a fixed, snake_case name.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::ReadSecret(_) => "read_secret",
            Error::WriteKeys(_) => "write_generated_keys",
            Error::ListRoutes(_) => "list_routes",
            Error::ApplyRoute(_) => "apply_route",
            Error::DeleteRoute(_) => "delete_route",
            Error::PatchStatus(_) => "patch_status",
        }
    }
}

/// The label of a failed reconcile as the controller sees it: the finalizer helper around
/// `apply`/`cleanup` adds failures of its own.
pub fn metric_label(error: &finalizer::Error<Error>) -> &'static str {
    match error {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.metric_label(),
        finalizer::Error::AddFinalizer(_) => "add_finalizer",
        finalizer::Error::RemoveFinalizer(_) => "remove_finalizer",
        finalizer::Error::UnnamedObject => "unnamed_object",
        finalizer::Error::InvalidFinalizer => "invalid_finalizer",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> kube::Error {
        kube::Error::LinesCodecMaxLineLengthExceeded
    }

    /// One of each variant, reconcile's and the finalizer helper's.
    fn one_of_each() -> Vec<finalizer::Error<Error>> {
        let own = [
            Error::ReadSecret(api()),
            Error::WriteKeys(api()),
            Error::ListRoutes(api()),
            Error::ApplyRoute(api()),
            Error::DeleteRoute(api()),
            Error::PatchStatus(api()),
        ];
        for e in &own {
            // No wildcard: a new variant stops this compiling until it is listed above.
            match e {
                Error::ReadSecret(_)
                | Error::WriteKeys(_)
                | Error::ListRoutes(_)
                | Error::ApplyRoute(_)
                | Error::DeleteRoute(_)
                | Error::PatchStatus(_) => {}
            }
        }
        let mut all: Vec<_> = own.into_iter().map(finalizer::Error::ApplyFailed).collect();
        all.extend([
            finalizer::Error::AddFinalizer(api()),
            finalizer::Error::RemoveFinalizer(api()),
            finalizer::Error::UnnamedObject,
            finalizer::Error::InvalidFinalizer,
        ]);
        all
    }

    #[test]
    fn every_variant_has_a_distinct_snake_case_label() {
        let labels: Vec<&str> = one_of_each().iter().map(metric_label).collect();
        for label in &labels {
            let snake = label.split('_').all(|w| {
                !w.is_empty()
                    && w.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            });
            assert!(snake, "{label:?} is not snake_case");
            assert!(label.as_bytes()[0].is_ascii_lowercase(), "{label:?}");
        }
        let mut distinct = labels.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            labels.len(),
            "duplicate label in {labels:?}"
        );
    }

    #[test]
    fn every_label_is_documented_with_the_metric() {
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));
        let row = readme
            .lines()
            .find(|l| l.starts_with("| `hookgate_reconcile_errors_total`"))
            .expect("README's metric table lists hookgate_reconcile_errors_total");
        for e in one_of_each() {
            let label = metric_label(&e);
            assert!(
                row.contains(&format!("`{label}`")),
                "{label} missing from {row}"
            );
        }
    }

    #[test]
    fn cleanup_failures_carry_the_label_of_the_call_that_failed() {
        let e = finalizer::Error::CleanupFailed(Error::DeleteRoute(api()));
        assert_eq!(metric_label(&e), "delete_route");
    }

    #[test]
    fn the_message_is_the_api_error_as_before() {
        // Logs and `kubectl hookgate send` print this; it read the same before the split.
        let e = Error::ReadSecret(api());
        assert_eq!(e.to_string(), format!("Kubernetes API: {}", api()));
    }
}
