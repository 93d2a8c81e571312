//! Which destinations a delivery may reach (SSRF): pure decisions on a host name or an address,
//! for one integration under one policy. The I/O beside it (`resolver.rs`) applies
//! [`check_address`] to every address a name resolves to, at connect time, so a name that
//! resolves (or rebinds) to a refused address is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The cluster DNS domain assumed unless `--cluster-domain` says otherwise.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// Addresses of cloud metadata services outside 169.254.0.0/16 and fe80::/10.
const METADATA_ADDRESSES: [IpAddr; 3] = [
    // AWS IMDS over IPv6.
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    // Alibaba Cloud.
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    // Azure's WireServer, which hands out VM configuration.
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
];

/// Names of metadata services; they resolve into the refused ranges anyway, but refusing the
/// name lets a manifest fail when it loads rather than at the first delivery.
const METADATA_HOSTS: [&str; 5] = [
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Where integrations may send their events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// Any Service in the cluster and any external host.
    #[default]
    Open,
    /// Only Services of the integration's own namespace, plus the allowed external hosts.
    Namespace,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub scope: Scope,
    /// External hosts every integration may use under [`Scope::Namespace`]: exact names or IP
    /// literals, or `*.example.com` for its subdomains. Normalized by [`parse_allowed_host`].
    pub allowed_hosts: Vec<String>,
    pub cluster_domain: String,
    /// Standalone delivers to local sinks; in a pod, loopback is the worker itself and its
    /// sidecars (an Envoy admin port, for one).
    pub allow_loopback: bool,
    /// The Kubernetes API server's addresses (KUBERNETES_SERVICE_HOST), when running in a pod.
    pub api_server: Vec<IpAddr>,
}

impl Default for Policy {
    /// Standalone: open, loopback allowed, no API server.
    fn default() -> Self {
        Self {
            scope: Scope::default(),
            allowed_hosts: Vec::new(),
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_string(),
            allow_loopback: true,
            api_server: Vec::new(),
        }
    }
}

/// Why a destination is refused. The text names the host or address, never the URL (which may
/// carry credentials).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0} is a cloud metadata address")]
    MetadataAddress(IpAddr),
    #[error("{0} is link-local (169.254.0.0/16, fe80::/10), where cloud metadata services answer")]
    LinkLocal(IpAddr),
    #[error("{0} is a cloud metadata host")]
    MetadataHost(String),
    #[error("{0} is the Kubernetes API server")]
    ApiServerHost(String),
    #[error("{0} is the Kubernetes API server's address (KUBERNETES_SERVICE_HOST)")]
    ApiServerAddress(IpAddr),
    #[error("{0} is loopback, which in a cluster is the worker's own pod")]
    Loopback(IpAddr),
    #[error(
        "{host} is neither a Service of namespace {namespace} nor an allowed external host (destinations: namespace)"
    )]
    OutsideNamespace { host: String, namespace: String },
}

/// A URL's host: a normalized name (lower case, no trailing dot) or an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl Host {
    /// The URL parser has already turned every IPv4 spelling (hex, octal, one number, a
    /// trailing dot) into dotted decimal, so what does not parse as an address is a name.
    pub fn of(url: &reqwest::Url) -> Option<Host> {
        let h = url.host_str()?;
        let bare = h
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(h);
        Some(match bare.parse::<IpAddr>() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Name(normalize(bare)),
        })
    }
}

fn normalize(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// Whether a connection to `ip` is allowed. Applied to literal addresses and to every address a
/// name resolves to.
pub fn check_address(ip: IpAddr, policy: &Policy) -> Result<(), Refusal> {
    // The kernel connects an IPv4-mapped IPv6 address over IPv4, so it is judged as that.
    let canonical = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    if METADATA_ADDRESSES.contains(&canonical) || canonical == IpAddr::from([169, 254, 169, 254]) {
        return Err(Refusal::MetadataAddress(ip));
    }
    let link_local = match canonical {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_unicast_link_local(),
    };
    if link_local {
        return Err(Refusal::LinkLocal(ip));
    }
    if policy
        .api_server
        .iter()
        .any(|a| *a == ip || *a == canonical)
    {
        return Err(Refusal::ApiServerAddress(ip));
    }
    // Connecting to the unspecified address reaches this host, like loopback.
    if !policy.allow_loopback && (canonical.is_loopback() || canonical.is_unspecified()) {
        return Err(Refusal::Loopback(ip));
    }
    Ok(())
}

/// Whether `host` may be the destination of an integration in `namespace`. Addresses are also
/// checked with [`check_address`]; a name's addresses are checked once it resolves.
pub fn check_host(host: &Host, namespace: &str, policy: &Policy) -> Result<(), Refusal> {
    match host {
        Host::Ip(ip) => check_address(*ip, policy)?,
        Host::Name(name) => {
            if METADATA_HOSTS.contains(&name.as_str()) {
                return Err(Refusal::MetadataHost(name.clone()));
            }
            if is_api_server_name(name) {
                return Err(Refusal::ApiServerHost(name.clone()));
            }
        }
    }
    if policy.scope != Scope::Namespace {
        return Ok(());
    }
    // Runs before every attempt, so an address is written out only when the scope asks.
    let name = match host {
        Host::Name(n) if is_service_of(n, namespace, &policy.cluster_domain) => return Ok(()),
        Host::Name(n) => n.clone(),
        Host::Ip(ip) => ip.to_string(),
    };
    if !is_allowed(&name, &policy.allowed_hosts) {
        return Err(Refusal::OutsideNamespace {
            host: name,
            namespace: namespace.to_string(),
        });
    }
    Ok(())
}

/// `kubernetes.default`, `kubernetes.default.svc` and `kubernetes.default.svc.<any domain>`.
fn is_api_server_name(name: &str) -> bool {
    name.strip_prefix("kubernetes.default")
        .is_some_and(|rest| rest.is_empty() || rest == ".svc" || rest.starts_with(".svc."))
}

/// `<svc>.<ns>`, `<svc>.<ns>.svc` or `<svc>.<ns>.svc.<cluster domain>`. A bare `<svc>` is not: it
/// is looked up relative to the worker's namespace, not the integration's.
fn is_service_of(name: &str, namespace: &str, cluster_domain: &str) -> bool {
    let Some((service, rest)) = name.split_once('.') else {
        return false;
    };
    let Some(after) = rest.strip_prefix(namespace) else {
        return false;
    };
    !service.is_empty()
        && !namespace.is_empty()
        && (after.is_empty()
            || after == ".svc"
            || after.strip_prefix(".svc.") == Some(cluster_domain))
}

fn is_allowed(host: &str, allowed: &[String]) -> bool {
    allowed.iter().any(|entry| match entry.strip_prefix("*.") {
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
        None => entry == host,
    })
}

/// What is refused whatever the policy, for `spec.delivery.url` as it loads: metadata and
/// link-local addresses, metadata hosts and the API server's names.
pub fn check_url(url: &reqwest::Url) -> Result<(), Refusal> {
    match Host::of(url) {
        Some(host) => check_host(&host, "", &Policy::default()),
        None => Ok(()),
    }
}

/// Normalizes one `--allow-destination-host` entry: a name, an address, or `*.` and a domain.
pub fn parse_allowed_host(entry: &str) -> Result<String, String> {
    let e = entry.trim();
    let bare = e
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(e);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(ip.to_string());
    }
    let name = normalize(e);
    let domain = name.strip_prefix("*.").unwrap_or(&name);
    let valid = !domain.is_empty()
        && domain.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if valid {
        Ok(name)
    } else {
        Err(format!(
            "{entry:?} is not a host name, an IP address or *.<domain>"
        ))
    }
}

#[cfg(test)]
mod tests;
