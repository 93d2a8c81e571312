//! The events the bench sends: Stripe-shaped bodies of a fixed size, signed with the bench
//! integration's key, either all beforehand (short phases) or one by one while the load generator
//! waits for each request's scheduled instant (the pipeline's minute-long runs, whose requests
//! would not fit in memory at once).

use super::load::Prepared;
use crate::signature::{Scheme, SignInput, SigningKey};
use anyhow::Context;
use axum::body::Bytes;
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

pub const SECRET: &str = "whsec_bench_only_0123456789abcdef";
pub const INTEGRATION: &str = "bench/stripe";
const ID_PREFIX: &str = "evt_bench_";

/// Event `i`'s id; [`index`] reads it back.
pub fn event_id(i: usize) -> String {
    format!("{ID_PREFIX}{i:08}")
}

/// The index in an event id written by [`event_id`].
pub fn index(event_id: &str) -> Option<usize> {
    event_id.strip_prefix(ID_PREFIX)?.parse().ok()
}

/// Event `i`'s body: a Stripe-shaped JSON object padded to exactly `len` bytes.
pub fn body(i: usize, len: usize) -> Bytes {
    let head = format!(
        r#"{{"id":"{}","object":"event","type":"invoice.paid","data":{{"object":{{"pad":""#,
        event_id(i)
    );
    let tail = r#""}}}"#;
    let pad = len.saturating_sub(head.len() + tail.len());
    Bytes::from(format!("{head}{}{tail}", "x".repeat(pad)))
}

/// Requests a load generator can send, by index.
pub trait Source: Send + Sync + 'static {
    fn count(&self) -> usize;
    fn request(&self, i: usize) -> Cow<'_, Prepared>;
}

impl Source for Vec<Prepared> {
    fn count(&self) -> usize {
        self.len()
    }

    fn request(&self, i: usize) -> Cow<'_, Prepared> {
        Cow::Borrowed(&self[i])
    }
}

/// The same requests sent round and round, `n` in all: for servers that do not deduplicate
/// (the HTTP ceiling), a long run without signing on the clock or holding millions of requests.
pub struct Cycle {
    pub requests: Arc<Vec<Prepared>>,
    pub n: usize,
}

impl Source for Cycle {
    fn count(&self) -> usize {
        self.n
    }

    fn request(&self, i: usize) -> Cow<'_, Prepared> {
        Cow::Borrowed(&self.requests[i % self.requests.len()])
    }
}

/// Signs events `from..from + n` on demand, each with the time it is signed at.
pub struct Signer {
    path: String,
    scheme: Scheme,
    key: SigningKey,
    body_bytes: usize,
    from: usize,
    n: usize,
}

impl Signer {
    /// For `integration` (`namespace/name`) as compiled from `manifest`; every bench integration
    /// is signed with [`SECRET`].
    pub fn new(
        manifest: &Path,
        integration: &str,
        body_bytes: usize,
        from: usize,
        n: usize,
    ) -> anyhow::Result<Self> {
        let table = crate::manifest::load(&[manifest.to_path_buf()])?.route_table()?;
        let route = table
            .iter()
            .find(|r| r.integration == integration)
            .with_context(|| format!("bench integration {integration} compiled"))?;
        Ok(Self {
            path: route.path.clone(),
            scheme: route.verifier.scheme().clone(),
            key: SigningKey::Hmac(SECRET.as_bytes().to_vec()),
            body_bytes,
            from,
            n,
        })
    }

    /// The `k`th request of this range (event `from + k`).
    pub fn sign(&self, k: usize) -> anyhow::Result<Prepared> {
        let i = self.from + k;
        let body = body(i, self.body_bytes);
        let event_id = event_id(i);
        let input = SignInput {
            key_id: "v1",
            timestamp: chrono::Utc::now().timestamp(),
            event_id: &event_id,
            event_type: Some("invoice.paid"),
            body: &body,
        };
        let mut headers = vec![("content-type".parse()?, "application/json".parse()?)];
        for (k, v) in self
            .scheme
            .sign(&self.key, &input)
            .map_err(anyhow::Error::msg)?
        {
            headers.push((k.parse()?, v.parse()?));
        }
        Ok(Prepared {
            path: self.path.clone(),
            headers,
            body,
        })
    }

    /// Every request of the range, signed now.
    pub fn all(&self) -> anyhow::Result<Arc<Vec<Prepared>>> {
        (0..self.n)
            .map(|k| self.sign(k))
            .collect::<anyhow::Result<Vec<_>>>()
            .map(Arc::new)
    }
}

impl Source for Signer {
    fn count(&self) -> usize {
        self.n
    }

    fn request(&self, k: usize) -> Cow<'_, Prepared> {
        // The route, key and headers were all checked when the signer was built and by the
        // first signed request; a failure here is a bug in the bench.
        Cow::Owned(self.sign(k).expect("a bench request signs"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_the_asked_size_and_ids_read_back() {
        assert_eq!(body(7, 1024).len(), 1024);
        assert_eq!(index(&event_id(7)), Some(7));
        assert_eq!(index(&event_id(123_456_789)), Some(123_456_789));
        assert_eq!(index("evt_other_1"), None);
    }
}
