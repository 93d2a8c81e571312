//! The `kubectl hookgate` plugin: inspect and rotate the keys of WebhookIntegrations in a cluster.
//!
//! [`run`] does everything given a [`kube::Client`], so tests drive it against a scripted API
//! server; [`main`] only parses arguments, builds the client from the kubeconfig and prints errors.
//! Secret values are printed by `secret` alone, never in any other output or error.

mod add_key;
mod cluster;
mod identity;
mod keys;
mod rotate;
mod send;

use crate::cli::Output;
use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Field manager of every write the plugin makes.
pub const FIELD_MANAGER: &str = "kubectl-hookgate";

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-hookgate",
    bin_name = "kubectl hookgate",
    version,
    about = "Inspect and rotate the signing keys of hookgate WebhookIntegrations"
)]
pub struct PluginArgs {
    /// Namespace of the integration. Default: the kubeconfig context's namespace, else `default`.
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Kubeconfig context to use. Default: the current context.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Kubeconfig file. Default: `$KUBECONFIG`, else `~/.kube/config`.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    pub command: PluginCommand,
}

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// List an integration's keys with their phase (Active, Retiring, Retired, Pending).
    Keys {
        /// `name` or `namespace/name` of the WebhookIntegration.
        integration: String,
        /// `json` prints `status.keys` as the controller wrote it.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Set a key's `retireAt`: from that instant, signatures made with it are rejected.
    Retire {
        /// `name` or `namespace/name` of the WebhookIntegration.
        integration: String,
        /// The key id (`spec.keys[].id`).
        key_id: String,
        /// When: RFC 3339 (`2026-12-31T00:00:00Z`) or a duration from now (`24h`, `7d`).
        /// Default: now.
        #[arg(long)]
        at: Option<String>,
    },
    /// Store a provider-issued key in a Secret and append it to `spec.keys`; it becomes the
    /// active key and the previous one starts retiring.
    AddKey {
        /// `name` or `namespace/name` of the WebhookIntegration.
        integration: String,
        /// Id of the new key; also its data key in the Secret.
        #[arg(long)]
        id: String,
        /// File holding the key exactly as the provider issued it.
        #[arg(long)]
        from_file: PathBuf,
        /// Secret in the integration's namespace to store it in. Default: `<name>-keys`.
        #[arg(long)]
        secret: Option<String>,
    },
    /// Rotate now: with `spec.rotation.generate`, ask the controller for a new key; for
    /// provider-issued keys, print the steps (nothing is changed).
    Rotate {
        /// `name` or `namespace/name` of the WebhookIntegration.
        integration: String,
        /// Also set `spec.rotation.overlap`: how long the superseded key stays accepted (`24h`).
        #[arg(long)]
        overlap: Option<String>,
    },
    /// Print a generated signing secret (only with `spec.rotation.generate`), to configure the
    /// sender with.
    Secret {
        /// `name` or `namespace/name` of the WebhookIntegration.
        integration: String,
        /// Key id. Default: the active key.
        #[arg(long)]
        key: Option<String>,
    },
    /// `hookgate dlq` (list, show, replay, purge, audit) on the inbox database; a bare
    /// `--integration name` means the integration in the plugin's namespace. Replays and purges
    /// are recorded as made by your Kubernetes user.
    Dlq {
        #[command(subcommand)]
        command: crate::cli::dlq::DlqCommand,
    },
    /// `hookgate send`, with the integration and its keys (also generated ones) read from the
    /// cluster: sign a request as the provider would and send it to `--url`.
    Send {
        /// `name` or `namespace/name` of the WebhookIntegration.
        integration: String,
        #[command(flatten)]
        request: crate::cli::SendRequestArgs,
    },
}

/// Runs one command against the cluster behind `client`, writing its output to `out`.
/// `default_namespace` applies when neither `-n` nor `namespace/name` gives one.
pub async fn run(
    client: kube::Client,
    default_namespace: &str,
    args: PluginArgs,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    let ns = args.namespace.as_deref();
    let target = |integration: &str| cluster::Target::parse(integration, ns, default_namespace);
    match args.command {
        PluginCommand::Keys {
            integration,
            output,
        } => keys::keys(&client, &target(&integration)?, output, out).await,
        PluginCommand::Retire {
            integration,
            key_id,
            at,
        } => keys::retire(&client, &target(&integration)?, &key_id, at.as_deref(), out).await,
        PluginCommand::AddKey {
            integration,
            id,
            from_file,
            secret,
        } => {
            let target = target(&integration)?;
            add_key::add_key(&client, &target, &id, &from_file, secret.as_deref(), out).await
        }
        PluginCommand::Rotate {
            integration,
            overlap,
        } => rotate::rotate(&client, &target(&integration)?, overlap.as_deref(), out).await,
        PluginCommand::Secret { integration, key } => {
            rotate::secret(&client, &target(&integration)?, key.as_deref(), out).await
        }
        PluginCommand::Send {
            integration,
            request,
        } => send::send(&client, &target(&integration)?, &request, out).await,
        PluginCommand::Dlq { command } => {
            let actor = identity::dlq_actor(Some(&client), &command).await;
            let command = send::qualify(command, ns.unwrap_or(default_namespace));
            crate::cli::dlq::run_as(command, &actor).await
        }
    }
}

/// Entry point of the `kubectl-hookgate` binary. Exits 1 with `error: ...` on stderr on failure.
pub async fn main() {
    let args = match PluginArgs::try_parse() {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            // clap's message already starts with `error: `.
            eprint!("{e}");
            std::process::exit(1);
        }
    };
    let client = connect(args.context.as_deref(), args.kubeconfig.as_deref()).await;
    if let PluginCommand::Dlq { command } = args.command {
        // The inbox is a database, not the cluster: a kubeconfig only supplies the namespace.
        let context_ns = client
            .as_ref()
            .map_or("default".into(), |c| c.default_namespace().to_string());
        let namespace = args.namespace.unwrap_or(context_ns);
        let actor = identity::dlq_actor(client.as_ref().ok(), &command).await;
        if let Err(e) = crate::cli::dlq::run_as(send::qualify(command, &namespace), &actor).await {
            fail(e);
        }
        return;
    }
    let client = match client {
        Ok(client) => client,
        Err(e) => fail(e),
    };
    let default_namespace = client.default_namespace().to_string();
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = run(client, &default_namespace, args, &mut stdout).await {
        fail(e);
    }
}

fn fail(e: anyhow::Error) -> ! {
    eprintln!("error: {}", one_line(&e));
    std::process::exit(1);
}

/// The error and its causes joined by `: `, skipping causes whose text is already shown (kube's
/// errors repeat their sources in their own message).
fn one_line(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&cause);
        }
    }
    text
}

/// A client from the kubeconfig (`--kubeconfig`, `--context`); without either flag, falls back
/// to the in-cluster configuration when there is no kubeconfig.
async fn connect(
    context: Option<&str>,
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<kube::Client> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("--kubeconfig {}", path.display()))?
        }
        None => match kube::Config::from_kubeconfig(&options).await {
            Ok(config) => config,
            Err(e) => {
                if let Some(context) = context {
                    return Err(e).with_context(|| format!("--context {context}"));
                }
                return kube::Client::try_default()
                    .await
                    .context("no usable kubeconfig and not running in a cluster");
            }
        },
    };
    kube::Client::try_from(config).context("cannot build a Kubernetes client from the kubeconfig")
}
