//! GitHub: a repository webhook's deliveries ("List deliveries for a repository webhook",
//! `GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries`, newest first, `per_page` up to 100,
//! the next page's `cursor` in the `Link` header). A delivery whose GUID the inbox does not hold
//! and that no attempt delivered (2xx) is redelivered ("Redeliver a delivery for a repository
//! webhook", `POST …/deliveries/{delivery_id}/attempts`): it comes back signed through the
//! receiver, so it is verified and deduplicated like any webhook. The credential is a token
//! with write access to the repository's hooks. App webhooks (which need an App JWT) are not
//! supported yet.

use super::error::{Error, Result};
use super::http::Request;
use crate::route::catch_up::GithubHook;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};

pub const PAGE_SIZE: u32 = 100;
const API_VERSION: &str = "2022-11-28";

fn headers() -> Vec<(&'static str, String)> {
    vec![
        ("accept", "application/vnd.github+json".into()),
        ("x-github-api-version", API_VERSION.into()),
    ]
}

fn hook_url(base: &str, hook: &GithubHook) -> String {
    format!(
        "{base}/repos/{}/{}/hooks/{}/deliveries",
        hook.owner, hook.repo, hook.hook_id
    )
}

pub fn list_request(base: &str, hook: &GithubHook, cursor: Option<&str>) -> Result<Request> {
    let mut url = reqwest::Url::parse(&hook_url(base, hook))
        .map_err(|e| Error::BadResponse(format!("api base URL: {e}")))?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("per_page", &PAGE_SIZE.to_string());
        if let Some(c) = cursor {
            q.append_pair("cursor", c);
        }
    }
    Ok(Request {
        post: false,
        url: url.into(),
        headers: headers(),
    })
}

pub fn redeliver_request(base: &str, hook: &GithubHook, delivery_id: u64) -> Request {
    Request {
        post: true,
        url: format!("{}/{delivery_id}/attempts", hook_url(base, hook)),
        headers: headers(),
    }
}

/// One delivery attempt as the list shows it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Delivery {
    pub id: u64,
    pub guid: String,
    pub delivered_at: DateTime<Utc>,
    /// The receiver's answer; 0 when GitHub could not connect.
    #[serde(default)]
    pub status_code: u16,
}

/// One page of deliveries, without those older than `since`; `true` when the page reached past it.
pub fn parse(body: &[u8], since: DateTime<Utc>) -> Result<(Vec<Delivery>, bool)> {
    let all: Vec<Delivery> = serde_json::from_slice(body)
        .map_err(|e| Error::BadResponse(format!("GitHub deliveries: {e}")))?;
    let past = all.iter().any(|d| d.delivered_at < since);
    Ok((
        all.into_iter()
            .filter(|d| d.delivered_at >= since)
            .collect(),
        past,
    ))
}

/// The `cursor` of the `rel="next"` link. Only the cursor is taken: the link's own origin is
/// never called with the credential.
pub fn next_cursor(link: Option<&str>) -> Option<String> {
    link?.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        if !params.split(';').any(|p| p.trim() == "rel=\"next\"") {
            return None;
        }
        let url = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let url = reqwest::Url::parse(url).ok()?;
        url.query_pairs()
            .find(|(k, _)| k == "cursor")
            .map(|(_, v)| v.into_owned())
    })
}

/// The deliveries to redeliver: one per GUID (its newest attempt) whose GUID the inbox does not
/// hold (`known`), that no attempt delivered, and whose newest attempt is older than `settled`
/// (younger ones may still be retried by GitHub or be in flight).
pub fn to_redeliver(
    deliveries: &[Delivery],
    known: &HashSet<String>,
    settled: DateTime<Utc>,
) -> Vec<Delivery> {
    let mut by_guid: BTreeMap<&str, Vec<&Delivery>> = BTreeMap::new();
    for d in deliveries {
        by_guid.entry(d.guid.as_str()).or_default().push(d);
    }
    by_guid
        .into_iter()
        .filter(|(guid, _)| !known.contains(*guid))
        .filter(|(_, all)| !all.iter().any(|d| (200..300).contains(&d.status_code)))
        .filter_map(|(_, all)| all.into_iter().max_by_key(|d| (d.delivered_at, d.id)))
        .filter(|d| d.delivered_at < settled)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of GitHub's REST reference ("List deliveries for a repository webhook").
    const PAGE: &str = r#"[
  {"id": 12345678, "guid": "0b989ba4-242f-11e5-81e1-c7b6966d2516", "delivered_at": "2019-06-03T00:57:16Z",
   "redelivery": false, "duration": 0.27, "status": "OK", "status_code": 200, "event": "issues",
   "action": "opened", "installation_id": 123, "repository_id": 456, "throttled_at": "2019-06-03T00:57:16Z"},
  {"id": 123456789, "guid": "0b989ba4-242f-11e5-81e1-c7b6966d2516", "delivered_at": "2019-06-04T00:57:16Z",
   "redelivery": true, "duration": 0.28, "status": "OK", "status_code": 200, "event": "issues",
   "action": "opened", "installation_id": 123, "repository_id": 456, "throttled_at": null}
]"#;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn d(id: u64, guid: &str, at_: &str, code: u16) -> Delivery {
        Delivery {
            id,
            guid: guid.into(),
            delivered_at: at(at_),
            status_code: code,
        }
    }

    #[test]
    fn a_page_parses_and_drops_what_is_older_than_the_lookback() {
        let (all, past) = parse(PAGE.as_bytes(), at("2019-06-01T00:00:00Z")).unwrap();
        assert_eq!((all.len(), past), (2, false));
        assert_eq!(all[1].id, 123456789);
        let (recent, past) = parse(PAGE.as_bytes(), at("2019-06-04T00:00:00Z")).unwrap();
        assert_eq!((recent.len(), past), (1, true));
        assert!(parse(b"{\"message\":\"Not Found\"}", at("2019-06-01T00:00:00Z")).is_err());
    }

    #[test]
    fn the_next_cursor_comes_from_the_link_header() {
        let link = r#"<https://api.github.com/repositories/1/hooks/2/deliveries?per_page=100&cursor=v1_12077215967>; rel="next", <https://api.github.com/repositories/1/hooks/2/deliveries?per_page=100>; rel="first""#;
        assert_eq!(next_cursor(Some(link)).as_deref(), Some("v1_12077215967"));
        let only_prev = r#"<https://api.github.com/x?cursor=v1_1>; rel="prev""#;
        assert_eq!(next_cursor(Some(only_prev)), None);
        assert_eq!(next_cursor(None), None);
        assert_eq!(next_cursor(Some("garbage")), None);
    }

    #[test]
    fn only_undelivered_guids_the_inbox_lacks_are_redelivered_once() {
        let deliveries = [
            // Failed, then failed again on redelivery: the newest attempt is redelivered.
            d(1, "g-failed", "2026-12-01T08:00:00Z", 503),
            d(5, "g-failed", "2026-12-01T09:00:00Z", 0),
            // Failed first, delivered later: nothing to do.
            d(2, "g-recovered", "2026-12-01T08:00:00Z", 500),
            d(6, "g-recovered", "2026-12-01T09:00:00Z", 200),
            // Failed, but the inbox holds it (answered 2xx too late for GitHub, say).
            d(3, "g-known", "2026-12-01T08:00:00Z", 504),
            // Failed a moment ago: GitHub or the network may still bring it.
            d(7, "g-fresh", "2026-12-01T09:59:30Z", 502),
        ];
        let known = HashSet::from(["g-known".to_string()]);
        let picked = to_redeliver(&deliveries, &known, at("2026-12-01T09:58:00Z"));
        let ids: Vec<u64> = picked.iter().map(|d| d.id).collect();
        assert_eq!(ids, [5]);
    }

    #[test]
    fn requests_use_the_documented_paths() {
        let hook = GithubHook {
            owner: "octo".into(),
            repo: "hello".into(),
            hook_id: 12,
        };
        let list = list_request("https://api.github.com", &hook, Some("v1_9")).unwrap();
        assert_eq!(
            list.url,
            "https://api.github.com/repos/octo/hello/hooks/12/deliveries?per_page=100&cursor=v1_9"
        );
        let post = redeliver_request("https://api.github.com", &hook, 77);
        assert!(post.post);
        assert_eq!(
            post.url,
            "https://api.github.com/repos/octo/hello/hooks/12/deliveries/77/attempts"
        );
        assert!(
            post.headers
                .contains(&("x-github-api-version", "2022-11-28".into()))
        );
    }
}
