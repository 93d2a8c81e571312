//! Watch the compiled route Secrets of our own namespace and hand over a whole routing table
//! whenever one changes. The table is rebuilt whole from the current set, so a missed
//! intermediate event cannot leave a stale route behind. Receivers and in-cluster workers share it.

use crate::controller::compiled::{self, ROUTE_LABEL};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;

/// The route Secrets currently known, fed by watch events.
#[derive(Default)]
pub struct RouteSecrets {
    current: BTreeMap<String, Secret>,
    /// Objects of a (re)list in progress; swapped in whole at `InitDone`.
    listing: Option<BTreeMap<String, Secret>>,
    /// Whether a complete list has been seen, i.e. the table may be published.
    synced: bool,
}

impl RouteSecrets {
    /// Applies one watch event; `true` when the table should be rebuilt.
    pub fn apply(&mut self, event: Event<Secret>) -> bool {
        match event {
            Event::Init => {
                self.listing = Some(BTreeMap::new());
                false
            }
            Event::InitApply(s) => {
                self.listing.get_or_insert_default().insert(s.name_any(), s);
                false
            }
            Event::InitDone => {
                self.current = self.listing.take().unwrap_or_default();
                self.synced = true;
                true
            }
            Event::Apply(s) => {
                self.current.insert(s.name_any(), s);
                self.synced
            }
            Event::Delete(s) => {
                self.current.remove(&s.name_any());
                self.synced
            }
        }
    }

    pub fn secrets(&self) -> Vec<Secret> {
        self.current.values().cloned().collect()
    }
}

/// Watches `namespace` until the stream ends (it retries with backoff on API errors), handing
/// every rebuilt table to `publish`.
pub async fn watch_routes(
    client: Client,
    namespace: String,
    publish: impl Fn(crate::route::RouteTable),
) {
    let api: Api<Secret> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().labels(ROUTE_LABEL);
    let mut events = watcher::watcher(api, config)
        .backoff(crate::run::watch_backoff::WatchBackoff::default())
        .boxed();
    let mut state = RouteSecrets::default();
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                if state.apply(event) {
                    let table = compiled::table(&state.secrets());
                    tracing::info!(routes = table.len(), "routing table updated");
                    publish(table);
                }
            }
            Err(e) => tracing::warn!(error = %e, "watching route Secrets failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn s(name: &str) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn names(r: &RouteSecrets) -> Vec<String> {
        r.secrets().iter().map(|s| s.name_any()).collect()
    }

    #[test]
    fn table_is_published_only_after_a_complete_list() {
        let mut r = RouteSecrets::default();
        assert!(!r.apply(Event::Init));
        assert!(!r.apply(Event::InitApply(s("a"))));
        assert!(
            !r.apply(Event::Apply(s("early"))),
            "no partial table before the first list completes"
        );
        assert!(r.apply(Event::InitDone));
        assert_eq!(
            names(&r),
            ["a"],
            "the list replaces whatever came before it"
        );
        assert!(r.apply(Event::Apply(s("b"))));
        assert!(r.apply(Event::Delete(s("a"))));
        assert_eq!(names(&r), ["b"]);
    }

    #[test]
    fn a_relist_replaces_the_set_whole() {
        let mut r = RouteSecrets::default();
        r.apply(Event::Init);
        r.apply(Event::InitApply(s("a")));
        r.apply(Event::InitApply(s("b")));
        r.apply(Event::InitDone);
        // The watch restarts; `a` was deleted while we were disconnected.
        assert!(!r.apply(Event::Init));
        assert!(!r.apply(Event::InitApply(s("b"))));
        assert_eq!(
            names(&r),
            ["a", "b"],
            "the old set serves until the relist is complete"
        );
        assert!(r.apply(Event::InitDone));
        assert_eq!(names(&r), ["b"]);
    }
}
