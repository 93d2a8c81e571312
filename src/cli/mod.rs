//! Command-line interface: one binary, a subcommand per role or task. Flags live in `args`, each
//! task beside them; the roles themselves start from `crate::run`.

mod args;
pub mod bench;
pub mod dlq;
mod inbox;
pub mod send;
pub mod sink;

use crate::crd::WebhookIntegration;
use crate::run::standalone;
pub use args::*;
use kube::CustomResourceExt;

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Crdgen => {
            print!("{}", crd_yaml());
            Ok(())
        }
        Command::Standalone(a) => {
            let db = a.db.limits()?;
            let worker = a.worker_config(db)?;
            let cfg = standalone::Config {
                files: a.files,
                listen: Some(a.listen),
                admin_listen: admin_addr(&a.admin_listen)?,
                database_url: a.database_url,
                worker,
                commit: a.commit.config(db)?,
                db,
                listener: a.listener.limits()?,
                body_timeout: *a.listener.body_timeout,
                unverified_rps: a.listener.unverified_rps,
                refusal_log_rps: a.listener.refusal_log_rps,
                trusted_proxies: a.listener.trusted_proxies,
            };
            standalone::run(cfg, shutdown_signal()).await?;
            Ok(())
        }
        Command::Controller(a) => {
            let cfg = crate::run::controller::Config {
                namespace: a.namespace,
                watch_namespace: a.watch_namespace,
                database_url: a.database_url,
                identity: a.identity,
                admin_listen: admin_addr(&a.admin_listen)?,
                db: a.db.limits()?,
            };
            crate::run::controller::run(cfg, shutdown_signal()).await?;
            Ok(())
        }
        Command::Receiver(a) => {
            let db = a.db.limits()?;
            let worker = a.worker_config(crate::worker::resolver::in_pod(), db)?;
            let cfg = crate::run::receiver::Config {
                worker,
                listen: a.listen,
                admin_listen: admin_addr(&a.admin_listen)?,
                database_url: a.database_url,
                namespace: a.namespace,
                commit: a.commit.config(db)?,
                db,
                listener: a.listener.limits()?,
                body_timeout: *a.listener.body_timeout,
                unverified_rps: a.listener.unverified_rps,
                refusal_log_rps: a.listener.refusal_log_rps,
                trusted_proxies: a.listener.trusted_proxies,
            };
            crate::run::receiver::run(cfg, shutdown_signal()).await?;
            Ok(())
        }
        Command::Worker(a) if a.files.is_empty() => {
            let namespace = a.namespace.clone().expect("clap: -f or --namespace");
            crate::run::worker::run(
                namespace,
                &a.database_url,
                admin_addr(&a.admin_listen)?,
                a.worker
                    .cluster_config(crate::worker::resolver::in_pod(), a.db.limits()?)?,
                shutdown_signal(),
            )
            .await?;
            Ok(())
        }
        Command::Worker(a) => {
            let db = a.db.limits()?;
            let cfg = standalone::Config {
                files: a.files,
                listen: None,
                admin_listen: admin_addr(&a.admin_listen)?,
                database_url: a.database_url,
                worker: Some(a.worker.config(db)?),
                commit: Default::default(),
                db,
                listener: Default::default(),
                body_timeout: crate::receiver::BODY_TIMEOUT,
                unverified_rps: crate::receiver::limits::UNVERIFIED_RPS,
                refusal_log_rps: crate::receiver::refusal_log::REFUSAL_LOG_RPS,
                trusted_proxies: crate::receiver::client::TRUSTED_PROXIES,
            };
            standalone::run(cfg, shutdown_signal()).await?;
            Ok(())
        }
        Command::Sink(a) => crate::cli::sink::run(a, shutdown_signal()).await,
        Command::Send(a) => send::run(a).await,
        Command::Inbox { command } => inbox::run(command).await,
        Command::Dlq { command } => crate::cli::dlq::run(command).await,
        Command::Bench(a) => crate::cli::bench::run(a).await,
        Command::Migrate { database_url } => {
            crate::inbox::Inbox::connect_as(&database_url, "hookgate migrate", Default::default())
                .await?
                .migrate()
                .await?;
            eprintln!("migrations applied");
            Ok(())
        }
    }
}

/// The CRD as committed in `crds/`.
pub fn crd_yaml() -> String {
    serde_yaml::to_string(&WebhookIntegration::crd()).expect("CRD serializes")
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}
