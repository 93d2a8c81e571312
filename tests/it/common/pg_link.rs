//! A PostgreSQL pool whose link to the server the test controls. Its connections go through a
//! loopback proxy that can cut them all at once (the sockets closed without a word from the
//! server, as a dead network path or a failed-over address does), and every connection it opens
//! or hands out can be held at a gate, so that what a role does before it has a connection again
//! can be watched.

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Holds connections while closed; counts the requests that reached it closed.
#[derive(Clone)]
pub struct Gate {
    open: watch::Sender<bool>,
    held: Arc<AtomicUsize>,
}

impl Gate {
    fn new() -> Self {
        Self {
            open: watch::Sender::new(true),
            held: Arc::default(),
        }
    }

    pub fn close(&self) {
        self.open.send_replace(false);
    }

    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Until `n` requests for a connection in all have reached the gate closed (a request the
    /// pool gave up on at its acquire timeout counts too).
    pub async fn until_held(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.held.load(Ordering::SeqCst) < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} of {n} requests for a connection within 20 s",
                self.held.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn pass(&self) {
        let mut open = self.open.subscribe();
        if *open.borrow_and_update() {
            return;
        }
        self.held.fetch_add(1, Ordering::SeqCst);
        let _ = open.wait_for(|o| *o).await;
    }
}

/// The pool, its gate, and the proxy its connections go through.
pub struct Link {
    pub pool: PgPool,
    pub gate: Gate,
    cut: watch::Sender<u64>,
}

impl Link {
    /// A pool of at most `max` connections to the database of `direct` (a test's own pool),
    /// giving up a request for a connection after `acquire_timeout`.
    pub async fn to(direct: &PgPool, max: u32, acquire_timeout: Duration) -> Self {
        let opts = (*direct.connect_options()).clone();
        let upstream = format!("{}:{}", opts.get_host(), opts.get_port());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = watch::Sender::new(0u64);
        tokio::spawn(proxy(listener, upstream, cut.subscribe()));
        let gate = Gate::new();
        let (g1, g2) = (gate.clone(), gate.clone());
        let pool = PgPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(acquire_timeout)
            .after_connect(move |_, _| {
                let g = g1.clone();
                Box::pin(async move {
                    g.pass().await;
                    Ok(())
                })
            })
            .before_acquire(move |_, _| {
                let g = g2.clone();
                Box::pin(async move {
                    g.pass().await;
                    Ok(true)
                })
            })
            .connect_lazy_with(opts.host("127.0.0.1").port(port));
        Self { pool, gate, cut }
    }

    /// Closes every connection open through the proxy now; later ones pass.
    pub fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }
}

/// Forwards each connection to `upstream` until the [`Link`] is dropped, closing all of them
/// at each cut.
async fn proxy(listener: TcpListener, upstream: String, mut cuts: watch::Receiver<u64>) {
    let mut pipes = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut client, _)) = accepted else { return };
                let upstream = upstream.clone();
                pipes.spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
            changed = cuts.changed() => {
                if changed.is_err() {
                    return;
                }
                // Dropping a pipe's task closes both of its sockets.
                pipes.abort_all();
            }
            Some(_) = pipes.join_next(), if !pipes.is_empty() => {}
        }
    }
}
