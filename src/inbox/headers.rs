//! The request headers kept with an event: `[[name, value], ...]` in the order received.
//!
//! They are kept as the JSON text the row stores. Built as a `serde_json::Value`, they cost a
//! tree of allocations to build, serialize, hand over and drop, and a worker claiming the event
//! parsed them back into one. Most integrations forward none of them (docs/performance.md,
//! round 20), so a worker parses the text only when `forwardHeaders` names some.

use serde_json::value::RawValue;
use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

/// Stored headers. Cheap to clone: an event handed over to this process's workers shares them.
#[derive(Clone, Debug)]
pub struct StoredHeaders(Arc<RawValue>);

impl StoredHeaders {
    /// `pairs` as the JSON array of `[name, value]` pairs that is stored.
    pub fn of<'a>(pairs: impl Iterator<Item = (&'a str, Cow<'a, str>)>) -> Self {
        let pairs: Vec<(&str, Cow<str>)> = pairs.collect();
        let json =
            serde_json::value::to_raw_value(&pairs).expect("pairs of strings always serialize");
        Self(Arc::from(json))
    }

    /// The empty object stored with events that arrived without a request (caught up), and
    /// what a claim keeps once its payload is shed. Shared: a clone, not an allocation.
    pub fn none() -> Self {
        static NONE: LazyLock<StoredHeaders> = LazyLock::new(|| {
            StoredHeaders::from(RawValue::from_string("{}".to_owned()).expect("valid JSON"))
        });
        NONE.clone()
    }

    /// As stored, for binding to the `headers` column.
    pub fn json(&self) -> &RawValue {
        &self.0
    }

    /// The `[name, value]` pairs. Anything else (`{}`, a pair that is not two strings) is
    /// skipped: a row written by hand must not stop a delivery.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let Ok(serde_json::Value::Array(items)) = serde_json::from_str(self.0.get()) else {
            return Vec::new();
        };
        items
            .into_iter()
            .filter_map(|pair| match pair {
                serde_json::Value::Array(mut p) if p.len() == 2 => match (p.pop(), p.pop()) {
                    (
                        Some(serde_json::Value::String(value)),
                        Some(serde_json::Value::String(name)),
                    ) => Some((name, value)),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }
}

impl From<Box<RawValue>> for StoredHeaders {
    fn from(json: Box<RawValue>) -> Self {
        Self(Arc::from(json))
    }
}

#[cfg(test)]
mod tests {
    use super::StoredHeaders;
    use serde_json::json;
    use std::borrow::Cow;

    fn stored(text: &str) -> StoredHeaders {
        StoredHeaders::from(serde_json::value::RawValue::from_string(text.into()).unwrap())
    }

    #[test]
    fn pairs_are_stored_as_an_array_of_pairs_in_order() {
        let h = StoredHeaders::of(
            [
                ("user-agent", Cow::Borrowed("Stripe/1.0")),
                ("x-note", Cow::Owned("quote \" and \u{fffd}".to_string())),
                ("user-agent", Cow::Borrowed("second")),
            ]
            .into_iter(),
        );
        let as_value: serde_json::Value = serde_json::from_str(h.json().get()).unwrap();
        assert_eq!(
            as_value,
            json!([
                ["user-agent", "Stripe/1.0"],
                ["x-note", "quote \" and \u{fffd}"],
                ["user-agent", "second"]
            ])
        );
        assert_eq!(
            h.pairs(),
            vec![
                ("user-agent".into(), "Stripe/1.0".into()),
                ("x-note".into(), "quote \" and \u{fffd}".into()),
                ("user-agent".into(), "second".into()),
            ]
        );
    }

    #[test]
    fn no_headers_is_an_empty_array_and_none_the_empty_object() {
        assert_eq!(StoredHeaders::of(std::iter::empty()).json().get(), "[]");
        assert_eq!(StoredHeaders::none().json().get(), "{}");
        assert!(StoredHeaders::none().pairs().is_empty());
    }

    #[test]
    fn what_is_not_a_pair_of_strings_is_skipped() {
        // As PostgreSQL's jsonb writes it back, with spaces.
        let h = stored(r#"[["a", "1"], ["b"], ["c", 2], "d", ["e", "5", "x"], ["f", "6"]]"#);
        assert_eq!(
            h.pairs(),
            vec![("a".into(), "1".into()), ("f".into(), "6".into())]
        );
        assert!(stored("null").pairs().is_empty());
        assert!(stored(r#"{"a": "1"}"#).pairs().is_empty());
    }
}
