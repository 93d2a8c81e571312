//! Flags shared by the roles that hold database connections and listen: the database limits, the
//! listener's limits and the receiver's group commit.

use super::bounds;
use anyhow::bail;
use clap::Args;

/// Deadlines of database calls (request path, worker claims and completions), and the pool's size.
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// How long a call may wait for a pooled database connection (100ms to 1day).
    #[arg(long, default_value_t = crate::inbox::DbLimits::default().acquire_timeout.into(), env = "HOOKGATE_DB_ACQUIRE_TIMEOUT")]
    pub db_acquire_timeout: humantime::Duration,
    /// How long one statement may run or wait for locks (PostgreSQL statement_timeout, SQLite
    /// busy timeout; 10ms to 1day). A request answers 503 within both timeouts together.
    #[arg(long, default_value_t = crate::inbox::DbLimits::default().statement_timeout.into(), env = "HOOKGATE_DB_STATEMENT_TIMEOUT")]
    pub db_statement_timeout: humantime::Duration,
    /// Most PostgreSQL connections this process opens (4 to 1000). Each catch-up pass in progress
    /// holds one more for its lock, so leave room for those.
    #[arg(long, default_value_t = crate::inbox::DbLimits::default().max_connections, env = "HOOKGATE_DB_MAX_CONNECTIONS")]
    pub db_max_connections: u32,
}

impl DbArgs {
    pub fn limits(&self) -> anyhow::Result<crate::inbox::DbLimits> {
        let acquire_timeout = bounds::DB_ACQUIRE_TIMEOUT.check(*self.db_acquire_timeout)?;
        let statement_timeout = bounds::DB_STATEMENT_TIMEOUT.check(*self.db_statement_timeout)?;
        let (min, max) = (crate::inbox::MIN_CONNECTIONS, crate::inbox::MAX_CONNECTIONS);
        if !(min..=max).contains(&self.db_max_connections) {
            bail!(
                "--db-max-connections must be from {min} to {max}, not {}: a worker holds one \
                 connection for LISTEN and one for its completions, and claims and timers need \
                 their own",
                self.db_max_connections
            );
        }
        Ok(crate::inbox::DbLimits {
            acquire_timeout,
            statement_timeout,
            max_connections: self.db_max_connections,
        })
    }
}

/// Connection-level limits of the receiver's listener (the admin port takes the header timeout).
#[derive(Args, Debug, Clone)]
pub struct ListenerArgs {
    /// How long a client may take to send a request's headers; a kept-alive connection idle this
    /// long is closed too. Slow-header clients are dropped (1ms to 1h).
    #[arg(long, default_value_t = crate::http::listener::HEADER_TIMEOUT.into(), env = "HOOKGATE_HEADER_TIMEOUT")]
    pub header_timeout: humantime::Duration,
    /// How long a client may take to send a request's body before it gets 408 (1ms to 1h).
    #[arg(long, default_value_t = crate::receiver::BODY_TIMEOUT.into(), env = "HOOKGATE_BODY_TIMEOUT")]
    pub body_timeout: humantime::Duration,
    /// Open connections at once (1-1000000); more are answered 503 `overloaded` and closed.
    #[arg(long, default_value_t = crate::http::listener::MAX_CONNECTIONS, env = "HOOKGATE_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// Requests being handled at once (1-1000000); more are answered 503 `overloaded`, never
    /// queued.
    #[arg(long, default_value_t = crate::http::listener::MAX_IN_FLIGHT, env = "HOOKGATE_MAX_IN_FLIGHT")]
    pub max_in_flight: usize,
    /// Requests per second (and burst) that may fail verification on one route before the rest
    /// get 429; they never spend the route's limits.requestsPerSecond. 0: no limit.
    #[arg(long, default_value_t = crate::receiver::limits::UNVERIFIED_RPS, env = "HOOKGATE_UNVERIFIED_RPS")]
    pub unverified_rps: u32,
    /// Refused requests logged per second (and burst) by this process, whatever the route; the
    /// rest are counted in hookgate_refusal_logs_dropped_total. 0: log every refusal.
    #[arg(long, default_value_t = crate::receiver::refusal_log::REFUSAL_LOG_RPS, env = "HOOKGATE_REFUSAL_LOG_RPS")]
    pub refusal_log_rps: u32,
    /// Proxies in front of the receiver that each append to X-Forwarded-For (a load balancer,
    /// an ingress controller). A route with spec.sourceRanges checks the entry this many from
    /// the right; 0: the connection's peer address, and X-Forwarded-For is ignored.
    #[arg(long, default_value_t = crate::receiver::client::TRUSTED_PROXIES, env = "HOOKGATE_TRUSTED_PROXIES")]
    pub trusted_proxies: u8,
}

impl ListenerArgs {
    pub fn limits(&self) -> anyhow::Result<crate::http::listener::Limits> {
        bounds::BODY_TIMEOUT.check(*self.body_timeout)?;
        Ok(crate::http::listener::Limits {
            header_timeout: bounds::HEADER_TIMEOUT.check(*self.header_timeout)?,
            max_connections: bounds::listener_count("--max-connections", self.max_connections)?,
            max_in_flight: bounds::listener_count("--max-in-flight", self.max_in_flight)?,
        })
    }
}

/// Group commit: how the receiver gathers concurrent requests into one transaction.
#[derive(Args, Debug, Clone)]
pub struct CommitArgs {
    /// How long a batch may wait for more requests once the receiver is busy. 0: a batch is
    /// whatever arrived while the previous one committed (0s to 1s). A lone request never waits.
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration, env = "HOOKGATE_COMMIT_WINDOW")]
    pub commit_window: std::time::Duration,
    /// Most events committed in one transaction (1-1000).
    #[arg(long, default_value_t = 64, env = "HOOKGATE_COMMIT_BATCH")]
    pub commit_batch: usize,
    /// Transactions in flight at once (1-1000) [default: 1].
    #[arg(long, env = "HOOKGATE_COMMIT_CONCURRENCY")]
    pub commit_concurrency: Option<usize>,
    /// MiB of memory for the keys this receiver committed recently, whose retries (same id, same
    /// body) it then answers as duplicates without a database statement. 0: every duplicate goes
    /// to the database.
    #[arg(long, default_value_t = crate::inbox::RecentConfig::default().bytes >> 20, env = "HOOKGATE_DEDUPE_CACHE_MIB")]
    pub dedupe_cache_mib: usize,
    /// How long a committed key is remembered (0s to 30days, and at most half the integration's
    /// `retention.dedupe`).
    #[arg(long, default_value_t = crate::inbox::RecentConfig::default().ttl.into(), env = "HOOKGATE_DEDUPE_CACHE_TTL")]
    pub dedupe_cache_ttl: humantime::Duration,
}

impl CommitArgs {
    pub fn config(
        &self,
        db: crate::inbox::DbLimits,
    ) -> anyhow::Result<crate::inbox::GroupCommitConfig> {
        let max_mib = crate::inbox::MAX_DEDUPE_CACHE_MIB;
        let mib = bounds::count("--dedupe-cache-mib", self.dedupe_cache_mib, 0, max_mib)?;
        Ok(crate::inbox::GroupCommitConfig {
            window: bounds::COMMIT_WINDOW.check(self.commit_window)?,
            max_batch: bounds::count(
                "--commit-batch",
                self.commit_batch,
                1,
                crate::inbox::MAX_BATCH,
            )?,
            concurrency: self
                .commit_concurrency
                .map(|n| {
                    let max = crate::inbox::MAX_COMMIT_CONCURRENCY;
                    bounds::count("--commit-concurrency", n, 1, max)
                })
                .transpose()?,
            db,
            recent: crate::inbox::RecentConfig {
                bytes: mib << 20,
                ttl: bounds::DEDUPE_CACHE_TTL.check(*self.dedupe_cache_ttl)?,
            },
        })
    }
}
