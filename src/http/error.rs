//! Why a listener could not start.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address is taken, not ours, or not allowed.
    #[error("{addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A fixed, snake_case name for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Bind { .. } => "bind",
        }
    }

    /// For `map_err`: a bind failure on `addr`.
    pub fn bind(addr: std::net::SocketAddr) -> impl Fn(std::io::Error) -> Error {
        move |source| Error::Bind {
            addr: addr.to_string(),
            source,
        }
    }
}
