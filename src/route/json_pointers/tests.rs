use super::{Found, Pointers, find};
use serde_json::Value;

/// What the receiver found before: the whole body parsed, then `Value::pointer`.
fn through_value(body: &[u8], pointer: &str) -> Option<Option<Found>> {
    let json: Value = serde_json::from_slice(body).ok()?;
    Some(json.pointer(pointer).map(Found::from))
}

const STRIPE: &str = r#"{
  "id": "evt_1Q2w3E", "object": "event", "api_version": "2024-06-20", "created": 1733100000,
  "data": {"object": {"id": "in_1", "amount_due": 2000, "lines": {"data": [
    {"id": "il_1", "amount": 1500, "period": {"start": 1, "end": 2}},
    {"id": "il_2", "amount": 500.25, "tags": [true, false, null]}
  ]}, "metadata": {}}},
  "livemode": false, "pending_webhooks": 1, "request": {"id": null, "idempotency_key": "k"},
  "type": "invoice.paid"
}"#;

fn documents() -> Vec<Vec<u8>> {
    let mut docs: Vec<Vec<u8>> = [
        STRIPE,
        // Duplicate keys: the last one wins, at every depth and whatever it holds.
        r#"{"a": {"b": 1}, "a": 2}"#,
        r#"{"a": 1, "a": {"b": [3, 4]}}"#,
        r#"{"a": {"b": 1, "c": 2}, "a": {"c": 3}}"#,
        r#"{"id": "first", "data": {"id": "x"}, "id": "second"}"#,
        // Keys with escapes, and keys that need a pointer's escapes.
        r#"{"a/b": "slash", "m~n": "tilde", "\u0041": "escaped key", "": "empty key", "0": "zero"}"#,
        r#"{"items": ["a", {"id": 7}, [1, [2]], "d", "e", "f", "g", "h", "i", "j", "k", "eleventh"]}"#,
        // Numbers in every form serde_json reads.
        r#"{"n": [0, -1, 1.5, 1e3, 1E-2, -0.0, 18446744073709551615, -9223372036854775808, 1.0, 123456789012345678901234567890]}"#,
        r#"{"s": "caf\u00e9 \ud83d\ude00 \"quoted\" \\ \/ \n", "u": "naïve"}"#,
        // Documents that are one scalar.
        r#""just a string""#,
        "42",
        "-7.25",
        "true",
        "null",
        "[]",
        "{}",
        " \n\t{\"id\": \"ws\"} \r\n",
        // Not JSON, or not one document.
        "",
        "   ",
        "{",
        r#"{"id": "x"} trailing"#,
        r#"{"id": "x"}{"id": "y"}"#,
        r#"{"id": "x",}"#,
        r#"{"id": 'x'}"#,
        r#"{"id": "bad \q escape"}"#,
        "{\"id\": \"control \u{1} char\"}",
        r#"{"n": 01}"#,
        r#"{"n": NaN}"#,
        r#"{"n": 1e400}"#,
        r#"{"id": "x", "deep": [[[[[[[[[[]]]]]]]]]]}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    // Invalid UTF-8 in a string no pointer reads: the document is still not JSON.
    docs.push(b"{\"skipped\": \"\xff\xfe\", \"id\": \"x\"}".to_vec());
    docs.push(b"{\"id\": \"\xc3\"}".to_vec());
    // Nesting beyond serde_json's limit of 128, in a skipped member and in a read one.
    for (member, depth) in [("skipped", 127), ("skipped", 200), ("id", 200)] {
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        docs.push(format!(r#"{{"{member}": {deep}, "other": 1}}"#).into_bytes());
    }
    docs
}

const POINTERS: &[&str] = &[
    "",
    "/",
    "/id",
    "/type",
    "/api_version",
    "/created",
    "/livemode",
    "/request/id",
    "/request/idempotency_key",
    "/data/object/id",
    "/data/object/lines/data/0/id",
    "/data/object/lines/data/1/amount",
    "/data/object/lines/data/1/tags/2",
    "/data/object/lines/data/2/id",
    "/data/object/metadata",
    "/data/object/missing/deeper",
    "/a",
    "/a/b",
    "/a/b/1",
    "/a/c",
    "/a~1b",
    "/m~0n",
    "/A",
    "/0",
    "/items/0",
    "/items/1/id",
    "/items/2/1/0",
    "/items/11",
    "/items/00",
    "/items/+1",
    "/items/-",
    "/items/1a",
    "/n/0",
    "/n/1",
    "/n/2",
    "/n/3",
    "/n/4",
    "/n/5",
    "/n/6",
    "/n/7",
    "/n/8",
    "/n/9",
    "/s",
    "/u",
    "/other",
    "id",
    "/id/",
];

#[test]
fn every_document_and_pointer_find_what_the_parsed_document_holds() {
    for doc in documents() {
        for &pointer in POINTERS {
            let want = through_value(&doc, pointer);
            let got = find(&doc, &[pointer]).map(|mut v| v.remove(0));
            assert_eq!(
                got,
                want,
                "{pointer:?} in {:?}",
                String::from_utf8_lossy(&doc)
            );
        }
    }
}

#[test]
fn pointers_read_together_find_what_each_finds_alone() {
    for doc in documents() {
        let together = find(&doc, POINTERS);
        let alone: Option<Vec<Option<Found>>> = POINTERS
            .iter()
            .map(|p| find(&doc, &[p]).map(|mut v| v.remove(0)))
            .collect();
        assert_eq!(together, alone, "{:?}", String::from_utf8_lossy(&doc));
    }
}

#[test]
fn the_fields_of_a_stripe_event() {
    let found = find(
        STRIPE.as_bytes(),
        &["/id", "/type", "/api_version", "/created"],
    )
    .unwrap();
    let text: Vec<Option<String>> = found.iter().map(|f| f.as_ref()?.text()).collect();
    assert_eq!(
        text,
        [
            Some("evt_1Q2w3E".to_string()),
            Some("invoice.paid".to_string()),
            Some("2024-06-20".to_string()),
            Some("1733100000".to_string())
        ]
    );
    assert_eq!(
        find(b"{}", &[]),
        Some(vec![]),
        "no pointers: still a JSON check"
    );
    assert_eq!(find(b"{", &[]), None);
}

#[test]
fn text_is_strings_as_they_are_and_numbers_in_their_json_form() {
    let text = |doc: &str| find(doc.as_bytes(), &["/v"]).unwrap()[0].as_ref()?.text();
    assert_eq!(text(r#"{"v": "2"}"#).as_deref(), Some("2"));
    assert_eq!(text(r#"{"v": 2}"#).as_deref(), Some("2"));
    assert_eq!(text(r#"{"v": 2.5}"#).as_deref(), Some("2.5"));
    assert_eq!(text(r#"{"v": -3}"#).as_deref(), Some("-3"));
    assert_eq!(text(r#"{"v": [2]}"#), None);
    assert_eq!(text(r#"{"v": null}"#), None);
    assert_eq!(text(r#"{"w": 2}"#), None);
}

#[test]
fn fields_are_looked_up_by_pointer() {
    let pointers = Pointers::new(["/id", "/data/object/id"]);
    let fields = pointers.read(STRIPE.as_bytes()).unwrap();
    assert_eq!(
        fields.at("/data/object/id"),
        Some(&Found::String("in_1".into()))
    );
    assert_eq!(fields.at("/id"), Some(&Found::String("evt_1Q2w3E".into())));
    assert_eq!(fields.at("/type"), None, "not one of those read");
    assert!(pointers.read(b"not json").is_none());
    assert!(Pointers::default().is_empty() && !pointers.is_empty());
}

#[test]
fn serde_json_s_private_raw_value_key_is_an_ordinary_key_here() {
    // With serde_json's `raw_value` feature (on in this build), `Value` treats an object whose
    // key is this private marker as an embedded raw value and refuses the document; it is plain
    // JSON, and the one pass reads it as written. The only difference from `Value`.
    let doc = br#"{"$serde_json::private::RawValue": "{\"id\": \"inner\"}", "id": "outer"}"#;
    assert_eq!(through_value(doc, "/id"), None, "refused by Value");
    let renamed = String::from_utf8_lossy(doc).replace("$serde_json::private::RawValue", "raw");
    assert_eq!(
        through_value(renamed.as_bytes(), "/id"),
        Some(Some(Found::String("outer".into()))),
        "the same document under another key is JSON to Value too"
    );
    assert_eq!(
        find(doc, &["/id"]),
        Some(vec![Some(Found::String("outer".into()))])
    );
}
