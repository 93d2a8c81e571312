//! The worker's flags, turned into a `WorkerConfig` for files or for a cluster.

use super::bounds;
use crate::destination::{self, Policy, Scope};
use anyhow::bail;
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Deliveries in flight at once in this process (1-10000). A slot is free again once the
    /// destination has answered; the process holds at most eight times as many events.
    #[arg(long, default_value_t = crate::worker::defaults::CONCURRENCY, env = "HOOKGATE_CONCURRENCY")]
    pub concurrency: usize,
    /// How long a claimed event is leased. Each attempt ends by 3/4 of it, whatever the
    /// integration's delivery timeout, so that it never outlives its claim (1s to 1day).
    #[arg(long, default_value_t = crate::worker::defaults::LEASE.into())]
    pub lease: humantime::Duration,
    /// Pause between claims when nothing is due (10ms to 1h).
    #[arg(long, default_value_t = crate::worker::defaults::POLL.into())]
    pub poll: humantime::Duration,
    /// On SIGTERM, how long in-flight deliveries may finish before their claims are released
    /// (0s to 1h).
    #[arg(long, default_value_t = crate::worker::defaults::GRACE.into())]
    pub grace: humantime::Duration,
    /// How long an event whose integration is gone waits for it to come back before it is
    /// dead-lettered as `integration_missing` (counted from its arrival; 0s to 1year).
    #[arg(long, default_value_t = crate::worker::defaults::ORPHAN_GRACE.into(), env = "HOOKGATE_ORPHAN_GRACE")]
    pub orphan_grace: humantime::Duration,
    /// Where integrations may deliver: `open` (any Service, any external host) or `namespace`
    /// (Services of the integration's own namespace, plus --allow-destination-host). Metadata
    /// addresses and the API server are refused either way.
    #[arg(long, value_enum, default_value_t = Scope::default(), env = "HOOKGATE_DESTINATIONS")]
    pub destinations: Scope,
    /// With `--destinations namespace`: an external host every integration may deliver to
    /// (`api.example.com`, `*.example.com` for its subdomains, or an IP address). Repeat the flag,
    /// or separate with commas in the variable.
    #[arg(
        long = "allow-destination-host",
        value_name = "HOST",
        env = "HOOKGATE_ALLOW_DESTINATION_HOSTS",
        value_delimiter = ',',
        value_parser = destination::parse_allowed_host
    )]
    pub allow_destination_hosts: Vec<String>,
    /// Catch-up passes (`spec.catchUp`) of different integrations in progress at once in this
    /// process (1-256), so that a provider that hangs or rate-limits holds up only its own. On
    /// PostgreSQL each holds a connection: the process runs fewer when `--db-max-connections`
    /// leaves no room for them (one per two connections past eight, at least one).
    #[arg(long, default_value_t = crate::crd::defaults::CATCH_UP_PASSES, env = "HOOKGATE_CATCH_UP_PASSES")]
    pub catch_up_passes: usize,
    /// The cluster's DNS domain, for `<svc>.<namespace>.svc.<domain>` destinations.
    #[arg(long, default_value = destination::DEFAULT_CLUSTER_DOMAIN, env = "HOOKGATE_CLUSTER_DOMAIN")]
    pub cluster_domain: String,
}

impl WorkerArgs {
    pub(crate) fn config(
        &self,
        db: crate::inbox::DbLimits,
    ) -> anyhow::Result<crate::worker::WorkerConfig> {
        let max = crate::worker::defaults::MAX_CONCURRENCY;
        let concurrency = bounds::count("--concurrency", self.concurrency, 1, max)?;
        let catch_up_passes = bounds::count(
            "--catch-up-passes",
            self.catch_up_passes,
            1,
            crate::crd::defaults::CATCH_UP_MAX_PASSES,
        )?;
        let cluster_domain = self.cluster_domain.trim_matches('.').to_ascii_lowercase();
        if cluster_domain.is_empty() {
            bail!("--cluster-domain must not be empty");
        }
        Ok(crate::worker::WorkerConfig {
            concurrency,
            lease: bounds::LEASE.check(*self.lease)?,
            poll: bounds::POLL.check(*self.poll)?,
            grace: bounds::GRACE.check(*self.grace)?,
            orphan_grace: bounds::ORPHAN_GRACE.check(*self.orphan_grace)?,
            destinations: Policy {
                scope: self.destinations,
                allowed_hosts: self.allow_destination_hosts.clone(),
                cluster_domain,
                // Refused whenever the process runs in a pod, `worker -f` included.
                api_server: crate::worker::resolver::api_server_from_env(),
                ..Policy::default()
            },
            db,
            catch_up_passes,
            ..Default::default()
        })
    }

    /// `worker --namespace`: in a pod, loopback is the pod itself (and its sidecars), not a
    /// destination. Out of one (the cluster test suite runs roles as host processes), local
    /// sinks stay allowed.
    pub(crate) fn cluster_config(
        &self,
        in_pod: bool,
        db: crate::inbox::DbLimits,
    ) -> anyhow::Result<crate::worker::WorkerConfig> {
        let mut cfg = self.config(db)?;
        cfg.destinations.allow_loopback = !in_pod;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::WorkerArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        worker: WorkerArgs,
    }

    fn concurrency(value: &str) -> Result<usize, String> {
        let cli = Cli::try_parse_from(["hookgate", "--concurrency", value]).unwrap();
        cli.worker
            .config(Default::default())
            .map(|c| c.concurrency)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn catch_up_passes_are_bounded_with_an_error_that_names_the_flag() {
        let passes = |value: &str| {
            let cli = Cli::try_parse_from(["hookgate", "--catch-up-passes", value]).unwrap();
            cli.worker
                .config(Default::default())
                .map(|c| c.catch_up_passes)
                .map_err(|e| e.to_string())
        };
        assert_eq!(passes("1"), Ok(1));
        assert_eq!(passes("256"), Ok(256));
        for bad in ["0", "257"] {
            let e = passes(bad).unwrap_err();
            assert_eq!(
                e,
                format!("--catch-up-passes must be from 1 to 256, got {bad}")
            );
        }
        let cli = Cli::try_parse_from(["hookgate"]).unwrap();
        let cfg = cli.worker.config(Default::default()).unwrap();
        assert_eq!(cfg.catch_up_passes, crate::crd::defaults::CATCH_UP_PASSES);
    }

    #[test]
    fn concurrency_is_bounded_with_an_error_that_names_the_flag() {
        assert_eq!(concurrency("1"), Ok(1));
        assert_eq!(concurrency("10000"), Ok(10_000));
        for bad in ["0", "10001", "18446744073709551615"] {
            let e = concurrency(bad).unwrap_err();
            assert_eq!(
                e,
                format!("--concurrency must be from 1 to 10000, got {bad}")
            );
        }
    }
}
