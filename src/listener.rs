//! Serving one listener (the receiver's or an admin port) with connection-level limits, so that
//! neither slow clients nor many clients can stall a role.

use axum::Router;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long a client may take to send a request's headers; also how long a kept-alive connection
/// may sit idle between requests (hyper runs one timer for both).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections the receiver holds at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 1024;
/// Requests the receiver works on at once; more are answered 503 at once, never queued.
pub const MAX_IN_FLIGHT: usize = 256;
/// The admin ports serve a scraper and probes: a handful of clients.
pub const ADMIN_MAX_CONNECTIONS: usize = 64;
pub const ADMIN_MAX_IN_FLIGHT: usize = 16;

/// Limits of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_timeout: Duration,
    pub max_connections: usize,
    pub max_in_flight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: HEADER_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            max_in_flight: MAX_IN_FLIGHT,
        }
    }
}

impl Limits {
    /// An admin port's limits, with the same header timeout as the role's receiver listener.
    pub fn admin(header_timeout: Duration) -> Self {
        Self {
            header_timeout,
            max_connections: ADMIN_MAX_CONNECTIONS,
            max_in_flight: ADMIN_MAX_IN_FLIGHT,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets open requests finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    _limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
