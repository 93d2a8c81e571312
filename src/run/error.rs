//! Why a role could not start or had to stop. Each lower layer's error passes through whole, so
//! the message keeps its file, object, field or address.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad flags or an empty configuration, named by what is wrong.
    #[error("{0}")]
    Config(String),
    /// No Kubernetes API client could be built or reached.
    #[error("cannot reach the Kubernetes API: {0}")]
    KubeConnect(#[source] kube::Error),
    #[error("leader election: {0}")]
    LeaderElection(String),
    #[error(transparent)]
    Manifest(#[from] crate::manifest::Error),
    #[error(transparent)]
    Inbox(#[from] crate::inbox::Error),
    #[error(transparent)]
    Listener(#[from] crate::http::Error),
    /// A listener failed while serving.
    #[error("{addr}: {source}")]
    Serve {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A fixed, snake_case name for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::KubeConnect(_) => "kube_connect",
            Error::LeaderElection(_) => "leader_election",
            Error::Manifest(e) => e.metric_label(),
            Error::Inbox(e) => e.metric_label(),
            Error::Listener(e) => e.metric_label(),
            Error::Serve { .. } => "serve",
        }
    }

    /// For `map_err`: serving on `addr` failed.
    pub fn serve(addr: std::net::SocketAddr) -> impl Fn(std::io::Error) -> Error {
        move |source| Error::Serve {
            addr: addr.to_string(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
