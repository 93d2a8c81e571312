//! Serving one listener (the receiver's or an admin port) with connection-level limits, so that
//! neither slow clients nor many clients can stall a role.

use crate::http::reply::Reply;
use crate::metrics::{ListenerLoad, Metrics};
use axum::error_handling::HandleErrorLayer;
use axum::extract::ConnectInfo;
use axum::http::Uri;
use axum::{Extension, Router};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{BoxError, Layer, ServiceBuilder};

/// How long a client may take to send a request's headers; also how long a kept-alive connection
/// may sit idle between requests (hyper runs one timer for both).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections the receiver holds at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 1024;
/// Requests the receiver works on at once; more are answered 503 at once, never queued. Each may
/// buffer a body of up to `limits.maxBodyBytes` (1 MiB by default): 128 of them fit the chart's
/// 256 MiB memory limit with room to spare.
pub const MAX_IN_FLIGHT: usize = 128;
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

/// The connection and request slots of one listener, shared with the metrics that report how
/// many are taken (`hookgate_http_*`).
#[derive(Clone, Debug)]
pub struct Slots {
    limits: Limits,
    connections: Arc<Semaphore>,
    in_flight: Arc<Semaphore>,
    /// Connections closed unanswered: over the cap while [`REFUSING`] others were answered 503.
    dropped: Arc<AtomicU64>,
    /// Requests the listener answered 503 `overloaded` itself, at either cap.
    refused: Arc<AtomicU64>,
}

impl Slots {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            connections: Arc::new(Semaphore::new(limits.max_connections)),
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
            dropped: Arc::default(),
            refused: Arc::default(),
        }
    }

    /// These slots, reported in `metrics` as the listener named `listener`.
    pub fn reported(self, metrics: &Metrics, listener: &'static str) -> Self {
        let slots = self.clone();
        metrics.watch_listener(listener, Arc::new(move || slots.load()));
        self
    }

    /// How many slots are taken now.
    pub fn load(&self) -> ListenerLoad {
        let taken = |cap: usize, free: &Semaphore| cap.saturating_sub(free.available_permits());
        ListenerLoad {
            open_connections: taken(self.limits.max_connections, &self.connections),
            max_connections: self.limits.max_connections,
            requests_in_flight: taken(self.limits.max_in_flight, &self.in_flight),
            max_requests_in_flight: self.limits.max_in_flight,
            connections_dropped: self.dropped.load(Ordering::Relaxed),
            requests_refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

impl From<Limits> for Slots {
    fn from(limits: Limits) -> Self {
        Self::new(limits)
    }
}

/// Connections over the cap are still answered (503, then closed) rather than left in the
/// kernel's backlog, but only this many at once; beyond that they are closed unanswered.
const REFUSING: usize = 64;

/// Told the path of each request the listener answers 503 `overloaded` itself (over the
/// in-flight or the connection cap), before `app` sees it: the role counts it where it counts
/// its other answers.
pub type OnShed = Arc<dyn Fn(&str) + Send + Sync>;

/// Serves `app` on `listener` within `slots` (reported ones, or fresh ones for plain [`Limits`])
/// until `shutdown` resolves, then lets open connections finish.
///
/// HTTP/1.1 only: hyper's header read timeout, which drops slow-header clients and idle
/// kept-alive connections, exists for HTTP/1 alone; webhook senders and probes speak HTTP/1.1.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    slots: impl Into<Slots>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_counting(
        listener,
        app,
        slots.into(),
        Arc::new(|_: &str| {}),
        shutdown,
    )
    .await
}

/// [`serve`], telling `on_shed` of every request the limits answer 503.
pub async fn serve_counting(
    listener: TcpListener,
    app: Router,
    slots: Slots,
    on_shed: OnShed,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let Slots {
        limits,
        connections,
        in_flight,
        dropped,
        refused,
    } = slots;
    // The listener counts every 503 of its own, whatever the path: the role's count (`on_shed`)
    // leaves out paths it serves no route for, and an admin port has none.
    let on_shed: OnShed = Arc::new(move |path: &str| {
        refused.fetch_add(1, Ordering::Relaxed);
        on_shed(path);
    });
    let app = shed_over(app, in_flight, on_shed.clone());
    let refuse = TowerToHyperService::new(Router::new().fallback(move |uri: Uri| async move {
        on_shed(uri.path());
        Reply::Overloaded
    }));
    let mut http = http1::Builder::new();
    // Without a timer hyper silently skips the header timeout.
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut refusing = http.clone();
    refusing.keep_alive(false);
    let refusals = Arc::new(Semaphore::new(REFUSING));
    let graceful = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors or a connection reset before accept: keep serving.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        if let Ok(permit) = connections.clone().try_acquire_owned() {
            // The peer address, as axum's `ConnectInfo`, for `spec.sourceRanges`.
            let app = TowerToHyperService::new(Extension(ConnectInfo(peer)).layer(app.clone()));
            let conn = graceful.watch(http.serve_connection(io, app));
            tokio::spawn(async move {
                let _ = conn.await;
                drop(permit);
            });
        } else if let Ok(permit) = refusals.clone().try_acquire_owned() {
            let conn = refusing.serve_connection(io, refuse.clone());
            tokio::spawn(async move {
                let _ = conn.await;
                drop(permit);
            });
        } else {
            // Closed as `io` drops; no log line, which a flood would turn into another flood.
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Caps the requests `app` handles at once to `in_flight`'s permits; one over the cap is answered
/// 503 at once.
fn shed_over(app: Router, in_flight: Arc<Semaphore>, on_shed: OnShed) -> Router {
    app.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(move |uri: Uri, _: BoxError| {
                on_shed(uri.path());
                async { Reply::Overloaded }
            }))
            .load_shed()
            // Global: one count for the whole router, whatever route a request takes.
            .layer(GlobalConcurrencyLimitLayer::with_semaphore(in_flight)),
    )
}
