//! Paddle Billing: `GET /events` ("List events"), `order_by=id[DESC]` so the newest come first,
//! `per_page` up to 200, `after` = the last id of the previous page while
//! `meta.pagination.has_more`. Paddle has no date filter: the listing stops at the first page
//! that reaches past the lookback (`occurred_at`). The credential is an API key, as a bearer token.

use super::error::{Error, Result};
use super::http::Request;
use super::{Listed, Page};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::value::RawValue;

pub const PAGE_SIZE: u32 = 200;

pub fn request(base: &str, after: Option<&str>) -> Result<Request> {
    let mut url = reqwest::Url::parse(&format!("{base}/events"))
        .map_err(|e| Error::BadResponse(format!("api base URL: {e}")))?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("order_by", "id[DESC]");
        q.append_pair("per_page", &PAGE_SIZE.to_string());
        if let Some(id) = after {
            q.append_pair("after", id);
        }
    }
    Ok(Request {
        post: false,
        url: url.into(),
        headers: Vec::new(),
    })
}

#[derive(Deserialize)]
struct List<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
    meta: Meta,
}

#[derive(Deserialize)]
struct Meta {
    pagination: Pagination,
}

#[derive(Deserialize)]
struct Pagination {
    has_more: bool,
}

#[derive(Deserialize)]
struct Head {
    event_id: String,
    occurred_at: DateTime<Utc>,
}

/// One page; events older than `since` are dropped and end the listing.
pub fn parse(body: &[u8], since: DateTime<Utc>) -> Result<Page> {
    let list: List = serde_json::from_slice(body)
        .map_err(|e| Error::BadResponse(format!("Paddle event list: {e}")))?;
    let mut events = Vec::with_capacity(list.data.len());
    let mut last = None;
    let mut past_lookback = false;
    for raw in list.data {
        let head: Head = serde_json::from_str(raw.get())
            .map_err(|e| Error::BadResponse(format!("Paddle event: {e}")))?;
        if head.occurred_at < since {
            past_lookback = true;
            continue;
        }
        events.push(Listed {
            body: bytes::Bytes::copy_from_slice(raw.get().as_bytes()),
            created: Some(head.occurred_at),
        });
        last = Some(head.event_id);
    }
    let next = (list.meta.pagination.has_more && !past_lookback)
        .then_some(last)
        .flatten();
    Ok(Page { events, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of Paddle's API reference ("List events").
    const PAGE: &str = r#"{
  "data": [
    {
      "event_id": "evt_01h8bzakzx4zxq1ke16sgs6f6q",
      "event_type": "subscription.updated",
      "occurred_at": "2023-08-21T11:57:47.390028Z",
      "data": {"id": "sub_01h8bx8fmywym11t6swgzba704", "status": "active"}
    },
    {
      "event_id": "evt_01h8bz7sdm9fcewmyd7dbhvnc5",
      "event_type": "transaction.created",
      "occurred_at": "2023-08-21T11:56:10.123456Z",
      "data": {"id": "txn_01h8bz7s3ykzdxzjwzm8fcxvh3"}
    }
  ],
  "meta": {
    "request_id": "4b9a3d1f-0000-4000-8000-000000000000",
    "pagination": {
      "per_page": 2,
      "next": "https://api.paddle.com/events?after=evt_01h8bz7sdm9fcewmyd7dbhvnc5",
      "has_more": true,
      "estimated_total": 5
    }
  }
}"#;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_page_pages_on_by_the_last_event_id() {
        let page = parse(PAGE.as_bytes(), at("2023-08-20T00:00:00Z")).unwrap();
        assert_eq!(page.events.len(), 2);
        assert!(
            page.events[0]
                .body
                .starts_with(b"{\n      \"event_id\": \"evt_01h8bzakzx4zxq1ke16sgs6f6q\"")
        );
        assert_eq!(
            page.events[1].created,
            Some(at("2023-08-21T11:56:10.123456Z"))
        );
        assert_eq!(page.next.as_deref(), Some("evt_01h8bz7sdm9fcewmyd7dbhvnc5"));
    }

    #[test]
    fn the_listing_stops_at_the_lookback() {
        let page = parse(PAGE.as_bytes(), at("2023-08-21T11:57:00Z")).unwrap();
        assert_eq!(page.events.len(), 1, "the older event is left out");
        assert_eq!(page.next, None, "and nothing older is asked for");
    }

    #[test]
    fn the_request_orders_newest_first() {
        let r = request("https://api.paddle.com", Some("evt_1")).unwrap();
        assert_eq!(
            r.url,
            "https://api.paddle.com/events?order_by=id%5BDESC%5D&per_page=200&after=evt_1"
        );
        assert_eq!(
            parse(br#"{"data":[],"meta":{}}"#, at("2023-08-21T00:00:00Z"))
                .unwrap_err()
                .metric_label(),
            "bad_response"
        );
    }
}
