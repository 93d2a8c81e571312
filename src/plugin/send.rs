//! `kubectl hookgate send` and `dlq`: the `hookgate` commands, with the integration resolved
//! from the cluster instead of from manifest files.

use super::cluster::{Target, api_error};
use crate::cli::SendRequestArgs;
use crate::cli::dlq::DlqCommand;
use crate::controller::generated::{self, Owned};
use crate::controller::reconcile::read_secrets;
use crate::crd::WebhookIntegration;
use anyhow::{anyhow, bail};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

/// Signs a request with the integration's keys as the cluster has them (including keys the
/// controller generated) and sends it to `--url`.
pub async fn send(
    client: &Client,
    target: &Target,
    request: &SendRequestArgs,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    let api: Api<WebhookIntegration> = Api::namespaced(client.clone(), &target.namespace);
    let mut wi = api
        .get_opt(&target.name)
        .await
        .map_err(|e| api_error(e, &target.display()))?
        .ok_or_else(|| anyhow!("{} not found", target.display()))?;
    let (mut secrets, missing) = read_secrets(&wi, client, &target.namespace)
        .await
        .map_err(|e| anyhow!("{}: {e}", target.display()))?;
    if let Some(name) = missing.first() {
        bail!("{} not found", target.secret_display(name));
    }
    if wi.spec.rotation.as_ref().is_some_and(|r| r.generate) {
        let name = generated::secret_name(&target.name);
        let owned: Api<Secret> = Api::namespaced(client.clone(), &target.namespace);
        let secret = owned
            .get_opt(&name)
            .await
            .map_err(|e| api_error(e, &target.secret_display(&name)))?;
        let data = secret.map(crate::route::secret_values).unwrap_or_default();
        wi.spec
            .keys
            .extend(Owned::new(data.keys().cloned().collect(), None).key_specs(&target.name));
        secrets.insert((target.namespace.clone(), name), data);
    }
    let (status, text, key_id) =
        crate::cli::send::send_signed(&wi, &secrets, request, &target.display()).await?;
    writeln!(out, "{status} {text}")?;
    if key_id.is_empty() {
        eprintln!("(unsigned, as the provider sends it)");
    } else {
        eprintln!("(signed with key {key_id:?})");
    }
    Ok(())
}

/// `--integration name` means `<namespace>/name`, the namespace coming from `-n` or the context.
pub fn qualify(mut command: DlqCommand, namespace: &str) -> DlqCommand {
    let fix = |i: &mut Option<String>| {
        if let Some(name) = i.as_mut().filter(|n| !n.contains('/')) {
            *name = format!("{namespace}/{name}");
        }
    };
    match &mut command {
        DlqCommand::List { integration, .. } => fix(integration),
        DlqCommand::Replay { selection, .. } | DlqCommand::Purge { selection, .. } => {
            fix(&mut selection.integration)
        }
        DlqCommand::Show { .. } | DlqCommand::Audit { .. } => {}
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(subcommand)]
        cmd: DlqCommand,
    }

    fn integration(c: &DlqCommand) -> Option<&str> {
        match c {
            DlqCommand::List { integration, .. } => integration.as_deref(),
            DlqCommand::Replay { selection, .. } | DlqCommand::Purge { selection, .. } => {
                selection.integration.as_deref()
            }
            DlqCommand::Show { .. } | DlqCommand::Audit { .. } => None,
        }
    }

    #[test]
    fn bare_integration_names_get_the_plugin_namespace() {
        let parse =
            |args: &[&str]| Wrap::parse_from(std::iter::once("x").chain(args.iter().copied())).cmd;
        let c = qualify(parse(&["list", "--integration", "stripe"]), "pay");
        assert_eq!(integration(&c), Some("pay/stripe"));
        let c = qualify(parse(&["replay", "--integration", "other/stripe"]), "pay");
        assert_eq!(
            integration(&c),
            Some("other/stripe"),
            "an explicit namespace is kept"
        );
        let c = qualify(parse(&["purge", "--all"]), "pay");
        assert_eq!(integration(&c), None);
    }
}
