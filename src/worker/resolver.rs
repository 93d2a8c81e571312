//! The delivery client's DNS hook: every address a destination name resolves to passes
//! [`destination::check_address`] before reqwest may connect to it, so a name that resolves, or
//! rebinds between two attempts, to a metadata address or the API server is refused, not just a
//! literal one. A refusal travels through reqwest's error as [`Refused`], which [`refusal_in`]
//! finds again to make it a final failure.

use crate::destination::{self, Policy, Refusal};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::error::Error;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The system resolver (getaddrinfo, as reqwest's default), run off the async threads.
pub struct System;

impl Resolve for System {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            // Port 0: reqwest puts the URL's (or the scheme's) port in.
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Resolves with `inner`, then refuses the whole name if any of its addresses is refused: a name
/// that can lead to a metadata address is not a destination, whichever address would be tried.
pub struct Guarded {
    policy: Arc<Policy>,
    inner: Arc<dyn Resolve>,
}

impl Guarded {
    pub fn new(policy: Arc<Policy>, inner: Arc<dyn Resolve>) -> Self {
        Self { policy, inner }
    }
}

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let (policy, inner) = (self.policy.clone(), self.inner.clone());
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = inner.resolve(name).await?.collect();
            for a in &addrs {
                destination::check_address(a.ip(), &policy).map_err(Refused)?;
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// A destination refused by policy.
#[derive(Debug, thiserror::Error)]
#[error("destination refused: {0}")]
pub struct Refused(pub Refusal);

/// The refusal somewhere in an error's source chain, if the error is one.
pub fn refusal_in<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a Refusal> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(Refused(r)) = err.downcast_ref::<Refused>() {
            return Some(r);
        }
        // io::Error hides its payload from `source()`; look inside.
        if let Some(Refused(r)) = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<Refused>())
        {
            return Some(r);
        }
        next = err.source();
    }
    None
}

/// Whether this process runs in a Kubernetes pod.
pub fn in_pod() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

/// The API server's address when running in a pod: the kubelet sets KUBERNETES_SERVICE_HOST in
/// every container, whatever `enableServiceLinks` says.
pub fn api_server_from_env() -> Vec<IpAddr> {
    match std::env::var("KUBERNETES_SERVICE_HOST") {
        Ok(h) => match h.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => {
                // A name here is unusual; its address is refused when its name is, below.
                tracing::warn!(host = %h, "KUBERNETES_SERVICE_HOST is not an IP address; only the API server's names are refused");
                Vec::new()
            }
        },
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    /// Answers every name with the given addresses: a stand-in for DNS that returns whatever an
    /// attacker's zone says, without sending anything anywhere.
    struct Fixed(Vec<IpAddr>);

    impl Resolve for Fixed {
        fn resolve(&self, _: Name) -> Resolving {
            let addrs: Vec<SocketAddr> = self.0.iter().map(|ip| SocketAddr::new(*ip, 0)).collect();
            Box::pin(async move { Ok(Box::new(addrs.into_iter()) as Addrs) })
        }
    }

    async fn resolve(answer: &[&str], policy: Policy) -> Result<Vec<SocketAddr>, String> {
        let inner = Fixed(answer.iter().map(|a| a.parse().unwrap()).collect());
        let guarded = Guarded::new(Arc::new(policy), Arc::new(inner));
        match guarded
            .resolve(Name::from_str("hooks.attacker.example").unwrap())
            .await
        {
            Ok(addrs) => Ok(addrs.collect()),
            Err(e) => Err(refusal_in(&*e).map_or(format!("not a refusal: {e}"), |r| r.to_string())),
        }
    }

    #[tokio::test]
    async fn a_name_resolving_to_a_refused_address_is_refused_before_any_connection() {
        let got = resolve(&["203.0.113.5", "169.254.169.254"], Policy::default()).await;
        assert_eq!(
            got,
            Err("169.254.169.254 is a cloud metadata address".to_string())
        );
        let got = resolve(&["fd00:ec2::254"], Policy::default()).await;
        assert_eq!(
            got,
            Err("fd00:ec2::254 is a cloud metadata address".to_string())
        );
        let cluster = Policy {
            allow_loopback: false,
            api_server: vec!["10.96.0.1".parse().unwrap()],
            ..Policy::default()
        };
        let got = resolve(&["10.96.0.1"], cluster.clone()).await;
        assert!(got.unwrap_err().contains("Kubernetes API server"));
        let got = resolve(&["127.0.0.1"], cluster).await;
        assert!(got.unwrap_err().contains("loopback"));
    }

    #[tokio::test]
    async fn allowed_addresses_pass_through_unchanged() {
        let got = resolve(&["203.0.113.5", "2001:db8::5"], Policy::default()).await;
        assert_eq!(
            got,
            Ok(vec![
                "203.0.113.5:0".parse().unwrap(),
                "[2001:db8::5]:0".parse().unwrap()
            ])
        );
    }

    #[test]
    fn a_refusal_is_found_behind_io_errors_and_sources() {
        let refusal = Refusal::LinkLocal("169.254.1.1".parse().unwrap());
        let io = std::io::Error::other(Refused(refusal.clone()));
        assert_eq!(refusal_in(&io), Some(&refusal));
        let other = std::io::Error::other("connection refused");
        assert_eq!(refusal_in(&other), None);
    }
}
