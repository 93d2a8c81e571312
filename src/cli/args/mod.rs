//! The flags of every subcommand, and their conversion into the roles' configs.

pub mod bounds;
mod listener;
mod worker;

pub use listener::{CommitArgs, DbArgs, ListenerArgs};
pub use worker::WorkerArgs;

use crate::inbox::Status;
use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

pub(crate) const DEFAULT_DB: &str = "sqlite://hookgate.db";

#[derive(Parser, Debug)]
#[command(
    name = "hookgate",
    version,
    about = "Receive third-party webhooks safely: verify, dedupe, commit, deliver"
)]
pub struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "HOOKGATE_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the WebhookIntegration CustomResourceDefinition as YAML.
    Crdgen,
    /// Run the receiver from manifest files, on SQLite by default.
    Standalone(StandaloneArgs),
    /// Run the Kubernetes controller: WebhookIntegrations -> compiled routes, staged key rotation.
    Controller(ControllerArgs),
    /// Run the receiver in a cluster: routes come from the controller's compiled route Secrets.
    Receiver(ReceiverArgs),
    /// Run only the delivery workers (cluster mode: receivers run elsewhere).
    Worker(WorkerModeArgs),
    /// A local destination that prints every delivery (and checks its signature).
    Sink(crate::cli::sink::SinkArgs),
    /// Sign a request exactly like the integration's provider and send it.
    Send(SendArgs),
    /// Inspect the inbox.
    Inbox {
        #[command(subcommand)]
        command: InboxCommand,
    },
    /// Inspect, replay and purge dead letters.
    Dlq {
        #[command(subcommand)]
        command: crate::cli::dlq::DlqCommand,
    },
    /// Measure intake, duplicates, delivery and verification against plain PostgreSQL inserts.
    Bench(crate::cli::bench::BenchArgs),
    /// Apply database migrations and exit.
    Migrate {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
    },
}

#[derive(Args, Debug)]
pub struct StandaloneArgs {
    /// Manifest files or directories (WebhookIntegrations and v1 Secrets).
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    #[arg(long, default_value = "127.0.0.1:8080", env = "HOOKGATE_LISTEN")]
    pub listen: SocketAddr,
    /// Admin endpoints: /metrics, /healthz, /readyz. Empty string disables them.
    #[arg(long, default_value = "127.0.0.1:9090", env = "HOOKGATE_ADMIN_LISTEN")]
    pub admin_listen: String,
    #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
    pub database_url: String,
    /// Run the receiver only (deliver with `hookgate worker -f` elsewhere).
    #[arg(long)]
    pub no_workers: bool,
    #[command(flatten)]
    pub handoff: HandoffArgs,
    #[command(flatten)]
    pub commit: CommitArgs,
    #[command(flatten)]
    pub listener: ListenerArgs,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

impl StandaloneArgs {
    /// The workers' settings, with the receiver's hand-over to them; `None` with `--no-workers`.
    pub(crate) fn worker_config(
        &self,
        db: crate::inbox::DbLimits,
    ) -> anyhow::Result<Option<crate::worker::WorkerConfig>> {
        // Checked even when unused: a value out of range is a mistake either way.
        let cfg = self.handoff.apply(self.worker.config(db)?)?;
        Ok((!self.no_workers).then_some(cfg))
    }
}

/// How many new events a receiver holds for the workers of its own process.
#[derive(Args, Debug, Clone)]
pub struct HandoffArgs {
    /// New events the receiver may hold for the workers of this process, stored leased and
    /// handed over from memory without a claim while they wait for a slot (0: none; 0-1000000).
    /// Past the workers' slots, only while the workers keep taking them within a second.
    #[arg(long, default_value_t = crate::worker::defaults::HANDOFF_EVENTS, env = "HOOKGATE_HANDOFF_EVENTS")]
    pub handoff_events: usize,
    /// The most body bytes of the events held for the workers (default 32 MiB).
    #[arg(long, default_value_t = crate::worker::defaults::HANDOFF_BYTES, env = "HOOKGATE_HANDOFF_BYTES")]
    pub handoff_bytes: usize,
}

impl HandoffArgs {
    /// `cfg` with this hand-over room, once its bounds are checked.
    fn apply(
        &self,
        mut cfg: crate::worker::WorkerConfig,
    ) -> anyhow::Result<crate::worker::WorkerConfig> {
        let max = crate::worker::defaults::MAX_HANDOFF_EVENTS;
        cfg.handoff_events = bounds::count("--handoff-events", self.handoff_events, 0, max)?;
        cfg.handoff_bytes = self.handoff_bytes;
        Ok(cfg)
    }
}

/// `hookgate controller`.
#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// The controller's namespace: compiled routes and the leader-election Lease live here.
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: String,
    /// Only reconcile integrations in this namespace (default: all namespaces).
    #[arg(long)]
    pub watch_namespace: Option<String>,
    /// The inbox, for each key's lastUsedAt (optional).
    #[arg(long, env = "HOOKGATE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// This replica's identity in the leader Lease.
    #[arg(long, env = "POD_NAME", default_value = "hookgate-controller")]
    pub identity: String,
    /// Admin endpoints: /metrics, /healthz, /readyz. Empty string disables them.
    #[arg(long, default_value = "0.0.0.0:9092", env = "HOOKGATE_ADMIN_LISTEN")]
    pub admin_listen: String,
    /// The inbox's deadlines and pool cap, as for the other roles (used with --database-url).
    #[command(flatten)]
    pub db: DbArgs,
}

/// `hookgate receiver`: cluster mode.
#[derive(Args, Debug)]
pub struct ReceiverArgs {
    #[arg(long, default_value = "0.0.0.0:8080", env = "HOOKGATE_LISTEN")]
    pub listen: SocketAddr,
    /// Admin endpoints: /metrics, /healthz, /readyz. Empty string disables them.
    #[arg(long, default_value = "0.0.0.0:9090", env = "HOOKGATE_ADMIN_LISTEN")]
    pub admin_listen: String,
    #[arg(long, env = "HOOKGATE_DATABASE_URL")]
    pub database_url: String,
    /// The namespace holding compiled route Secrets (the receiver's own).
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: String,
    /// Also deliver: run workers in this process, to which the receiver hands its new events
    /// without a claim (the worker flags below apply). `hookgate worker` pods still deliver what
    /// the receivers have no room for, retries, and the events of a receiver that stopped.
    #[arg(long)]
    pub with_workers: bool,
    #[command(flatten)]
    pub handoff: HandoffArgs,
    #[command(flatten)]
    pub commit: CommitArgs,
    #[command(flatten)]
    pub listener: ListenerArgs,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

impl ReceiverArgs {
    /// With `--with-workers`, its workers' settings as a cluster worker's (`in_pod`: refuse
    /// loopback destinations), with the hand-over; `None` otherwise.
    pub(crate) fn worker_config(
        &self,
        in_pod: bool,
        db: crate::inbox::DbLimits,
    ) -> anyhow::Result<Option<crate::worker::WorkerConfig>> {
        // Checked even when unused: a value out of range is a mistake either way.
        let cfg = self
            .handoff
            .apply(self.worker.cluster_config(in_pod, db)?)?;
        Ok(self.with_workers.then_some(cfg))
    }
}

/// `hookgate worker`: the delivery workers alone, against a shared database.
#[derive(Args, Debug)]
pub struct WorkerModeArgs {
    /// Manifest files or directories: the integrations whose events this process delivers.
    #[arg(
        short = 'f',
        long = "filename",
        required_unless_present = "namespace",
        conflicts_with = "namespace"
    )]
    pub files: Vec<PathBuf>,
    /// In a cluster: take delivery targets from the compiled route Secrets of this namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
    pub database_url: String,
    /// Admin endpoints: /metrics, /healthz, /readyz. Empty string disables them.
    #[arg(long, default_value = "127.0.0.1:9091", env = "HOOKGATE_ADMIN_LISTEN")]
    pub admin_listen: String,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

pub(crate) fn admin_addr(s: &str) -> anyhow::Result<Option<SocketAddr>> {
    match s {
        "" => Ok(None),
        s => Ok(Some(
            s.parse().with_context(|| format!("--admin-listen {s:?}"))?,
        )),
    }
}

#[derive(Args, Debug)]
pub struct SendArgs {
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// `namespace/name` of the WebhookIntegration.
    #[arg(long)]
    pub integration: String,
    #[command(flatten)]
    pub request: SendRequestArgs,
}

/// What to send and where: shared by `hookgate send` and `kubectl hookgate send`.
#[derive(Args, Debug, Clone)]
pub struct SendRequestArgs {
    #[arg(
        long,
        conflicts_with_all = ["body", "handshake"],
        required_unless_present_any = ["body", "handshake"]
    )]
    pub body_file: Option<PathBuf>,
    #[arg(long, conflicts_with = "handshake")]
    pub body: Option<String>,
    /// Content-Type of the request. Default: `application/json` for a body that starts with `{`
    /// or `[`, else `application/x-www-form-urlencoded` (how Twilio tells the two apart).
    #[arg(long)]
    pub content_type: Option<String>,
    /// Send the provider's endpoint check instead of an event, signed like a real one, and check
    /// the answer (slack, discord, twitch, zoom, meta). `--handshake=events`: Discord's webhook
    /// events PING (`type` 0) instead of the interactions PING (`type` 1).
    // `=` is required so that `kubectl hookgate send --handshake NAME` keeps NAME as the
    // integration instead of reading it as the handshake's variant.
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, value_name = "VARIANT")]
    pub handshake: Option<Option<HandshakeVariant>>,
    /// Receiver URL. Without a path the integration's route is appended; with one it is used as is
    /// (for a receiver behind an ingress that rewrites paths).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Private key for schemes verified by a public key: Ed25519 (raw, base64, hex or PKCS#8 PEM)
    /// and SendGrid's ECDSA P-256 (PKCS#8 or SEC1 PEM, or base64 DER).
    #[arg(long)]
    pub signing_key_file: Option<PathBuf>,
    /// Sign with this key instead of the newest active one.
    #[arg(long)]
    pub key_id: Option<String>,
    /// Event id for schemes that send it in a header (default: random).
    #[arg(long)]
    pub event_id: Option<String>,
    /// Event type for schemes that send it in a header (GitHub, Shopify, Twitch, GitLab, Linear).
    #[arg(long)]
    pub event_type: Option<String>,
    /// Signed timestamp (unix seconds) instead of now, to try the replay window.
    #[arg(long, allow_hyphen_values = true)]
    pub timestamp: Option<i64>,
}

/// Which endpoint check `--handshake` sends, for a provider that has more than one.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeVariant {
    /// Discord's interactions endpoint PING (`"type":1`), answered `{"type":1}`: the default.
    Interactions,
    /// Discord's webhook events PING (`"type":0`), answered 204.
    Events,
}

#[derive(Subcommand, Debug)]
pub enum InboxCommand {
    /// List events, newest first, without bodies.
    List {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
        /// `namespace/name`
        #[arg(long)]
        integration: Option<String>,
        #[arg(long)]
        status: Option<Status>,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[arg(long, default_value_t = 100)]
        limit: i64,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Table,
    Json,
}

#[cfg(test)]
mod tests;
