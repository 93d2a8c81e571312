//! Why manifests could not be used. Every message names the file (or Secret), the object and the
//! field, so a user can fix the YAML without reading code.

use crate::crd::validate::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An object that cannot be used, named by file, object and field.
    #[error("{file}: {object}: {error}")]
    Invalid {
        file: String,
        object: String,
        error: FieldError,
    },
    /// A file or directory that cannot be read.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Two integrations claim one path.
    #[error("{0}")]
    PathConflict(String),
    /// A source that holds no usable manifest at all (a route Secret without its key, or with
    /// other than one integration).
    #[error("{origin}: {reason}")]
    Unusable { origin: String, reason: String },
}

impl Error {
    /// A fixed, snake_case name for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Invalid { .. } => "invalid_manifest",
            Error::Io { .. } => "unreadable_file",
            Error::PathConflict(_) => "path_conflict",
            Error::Unusable { .. } => "unusable_source",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_file_object_and_field_and_labels_are_distinct() {
        let all = [
            Error::Invalid {
                file: "a.yaml".into(),
                object: "WebhookIntegration payments/stripe".into(),
                error: FieldError::new("spec.keys[0].id", "must not be empty"),
            },
            Error::Io {
                path: "missing.yaml".into(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            },
            Error::PathConflict("path /hooks/x is claimed by both a/x and b/x".into()),
            Error::Unusable {
                origin: "Secret ns/route".into(),
                reason: "no manifests.yaml".into(),
            },
        ];
        assert_eq!(
            all[0].to_string(),
            "a.yaml: WebhookIntegration payments/stripe: spec.keys[0].id: must not be empty"
        );
        assert!(all[1].to_string().starts_with("missing.yaml: "));
        let mut labels: Vec<_> = all.iter().map(Error::metric_label).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), all.len());
    }
}
