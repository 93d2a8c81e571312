//! Stripe: `GET /v1/events` ("List all events"), newest first, `created[gte]` for the lookback,
//! `limit` up to 100, `starting_after` = the last id of the previous page while `has_more`.
//! The credential is the secret or a restricted key (read access to events), sent as a bearer
//! token. Each listed event is the JSON object Stripe's webhook would have posted.

use super::error::{Error, Result};
use super::http::Request;
use super::{Listed, Page};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::value::RawValue;

pub const PAGE_SIZE: u32 = 100;

/// The request for the page after `starting_after` (the first page when `None`).
pub fn request(base: &str, since: DateTime<Utc>, starting_after: Option<&str>) -> Result<Request> {
    let mut url = reqwest::Url::parse(&format!("{base}/v1/events"))
        .map_err(|e| Error::BadResponse(format!("api base URL: {e}")))?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("limit", &PAGE_SIZE.to_string());
        q.append_pair("created[gte]", &since.timestamp().to_string());
        if let Some(id) = starting_after {
            q.append_pair("starting_after", id);
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
    object: String,
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
    has_more: bool,
}

#[derive(Deserialize)]
struct Head {
    id: String,
    created: i64,
}

/// One page of the list; `next` is the cursor for the following page.
pub fn parse(body: &[u8]) -> Result<Page> {
    let list: List = serde_json::from_slice(body)
        .map_err(|e| Error::BadResponse(format!("Stripe event list: {e}")))?;
    if list.object != "list" {
        return Err(Error::BadResponse(format!(
            "Stripe event list: object is {:?}, not \"list\"",
            list.object
        )));
    }
    let mut events = Vec::with_capacity(list.data.len());
    let mut last = None;
    for raw in list.data {
        let head: Head = serde_json::from_str(raw.get())
            .map_err(|e| Error::BadResponse(format!("Stripe event: {e}")))?;
        events.push(Listed {
            body: bytes::Bytes::copy_from_slice(raw.get().as_bytes()),
            created: DateTime::from_timestamp(head.created, 0),
        });
        last = Some(head.id);
    }
    // A page that says there is more but lists nothing would loop forever: take it as the end.
    let next = list.has_more.then_some(last).flatten();
    Ok(Page { events, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of Stripe's API reference ("List all events", "The Event object").
    const PAGE: &str = r#"{
  "object": "list",
  "url": "/v1/events",
  "has_more": true,
  "data": [
    {
      "id": "evt_1NG8Du2eZvKYlo2CUI79vXWy",
      "object": "event",
      "api_version": "2019-02-19",
      "created": 1686089970,
      "data": {"object": {"id": "seti_1NG8Du2eZvKYlo2C9XMqbR0x", "object": "setup_intent"}},
      "livemode": false,
      "pending_webhooks": 0,
      "request": {"id": null, "idempotency_key": null},
      "type": "setup_intent.created"
    }
  ]
}"#;

    #[test]
    fn a_page_keeps_each_event_as_sent_and_names_the_next_cursor() {
        let page = parse(PAGE.as_bytes()).unwrap();
        assert_eq!(page.events.len(), 1);
        let ev = &page.events[0];
        assert!(
            ev.body
                .starts_with(b"{\n      \"id\": \"evt_1NG8Du2eZvKYlo2CUI79vXWy\"")
        );
        assert_eq!(ev.created.unwrap().timestamp(), 1686089970);
        assert_eq!(page.next.as_deref(), Some("evt_1NG8Du2eZvKYlo2CUI79vXWy"));

        let last = PAGE.replace("\"has_more\": true", "\"has_more\": false");
        assert_eq!(parse(last.as_bytes()).unwrap().next, None);
        let empty = r#"{"object":"list","url":"/v1/events","has_more":true,"data":[]}"#;
        assert_eq!(
            parse(empty.as_bytes()).unwrap().next,
            None,
            "no endless loop"
        );
    }

    #[test]
    fn other_shapes_are_bad_responses() {
        for body in [
            r#"{"error":{"type":"invalid_request_error"}}"#,
            r#"{"object":"event","data":[],"has_more":false}"#,
            r#"{"object":"list","data":[{"id":"evt_1"}],"has_more":false}"#,
            "not json",
        ] {
            let e = parse(body.as_bytes()).unwrap_err();
            assert_eq!(e.metric_label(), "bad_response", "{body}");
        }
    }

    #[test]
    fn the_request_filters_by_creation_and_pages_by_cursor() {
        let since = DateTime::from_timestamp(1686000000, 0).unwrap();
        let r = request("https://api.stripe.com", since, Some("evt_9")).unwrap();
        assert_eq!(
            r.url,
            "https://api.stripe.com/v1/events?limit=100&created%5Bgte%5D=1686000000&starting_after=evt_9"
        );
        assert!(!r.post);
    }
}
