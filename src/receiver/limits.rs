//! Per-route rate limiters, kept outside the routing table so that a reload of identical routes
//! (the controller's watch, a manifest reload) does not hand every route a fresh burst.
//!
//! Each route has two budgets: `limits.requestsPerSecond`, spent only by verified requests, so a
//! forged or unsigned flood cannot lock the provider out; and a smaller one of its own for
//! requests that fail verification, answered 429 once spent.

use crate::route::{CompiledRoute, RouteTable};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

/// Requests per second (and burst) that may fail verification on one route before the rest are
/// answered 429. A provider's own mistakes stay visible (401) at this rate.
pub const UNVERIFIED_RPS: u32 = 20;

/// The two budgets of one route.
#[derive(Debug)]
pub struct RouteLimiter {
    /// `limits.requestsPerSecond` and `burst`; none when unset.
    pub verified: Option<DefaultDirectRateLimiter>,
    /// Requests refused for their signature; none when turned off.
    pub unverified: Option<DefaultDirectRateLimiter>,
}

type Key = (String, Option<Quota>, Option<Quota>);

/// Limiters by integration, reused across table swaps while the route's quotas stay the same.
pub struct Limiters {
    unverified: Option<Quota>,
    known: Mutex<HashMap<String, (Key, Arc<RouteLimiter>)>>,
}

impl Limiters {
    /// `unverified_rps` 0 turns the unverified limit off.
    pub fn new(unverified_rps: u32) -> Self {
        Self {
            unverified: NonZeroU32::new(unverified_rps).map(Quota::per_second),
            known: Mutex::default(),
        }
    }

    /// The limiters of every route of `table`, by path: the same ones as before for a route
    /// whose integration and quotas did not change, fresh ones otherwise. Routes gone are forgotten.
    pub fn bind(&self, table: &RouteTable) -> HashMap<String, Arc<RouteLimiter>> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let mut kept = HashMap::new();
        let bound = table
            .iter()
            .map(|route| {
                let key = self.key(route);
                let limiter = match known.remove(&route.integration) {
                    Some((k, l)) if k == key => l,
                    _ => Arc::new(RouteLimiter {
                        verified: key.1.map(RateLimiter::direct),
                        unverified: key.2.map(RateLimiter::direct),
                    }),
                };
                kept.insert(route.integration.clone(), (key, limiter.clone()));
                (route.path.clone(), limiter)
            })
            .collect();
        *known = kept;
        bound
    }

    fn key(&self, route: &CompiledRoute) -> Key {
        (route.integration.clone(), route.rate, self.unverified)
    }
}
