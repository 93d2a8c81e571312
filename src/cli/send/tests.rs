use super::sign::linear_body;
use super::*;

#[test]
fn send_url_appends_the_route_only_to_a_bare_base() {
    let route = "/hooks/payments/stripe";
    assert_eq!(
        target_url("http://127.0.0.1:8080", route, false).unwrap(),
        "http://127.0.0.1:8080/hooks/payments/stripe"
    );
    assert_eq!(
        target_url("https://h.example/", route, false).unwrap(),
        "https://h.example/hooks/payments/stripe"
    );
    assert_eq!(
        target_url("https://h.example/in/stripe", route, false).unwrap(),
        "https://h.example/in/stripe"
    );
    assert!(
        target_url("ftp://h.example", route, false)
            .unwrap_err()
            .to_string()
            .contains("--url")
    );
    assert!(target_url("not a url", route, false).is_err());
}

#[test]
fn a_signed_query_is_kept_wherever_the_request_goes() {
    let path = "/hooks/comms/twilio?bodySHA256=ab";
    assert_eq!(
        target_url("http://127.0.0.1:8080/", path, true).unwrap(),
        "http://127.0.0.1:8080/hooks/comms/twilio?bodySHA256=ab"
    );
    assert_eq!(
        target_url("https://h.example/in/twilio", path, true).unwrap(),
        "https://h.example/in/twilio?bodySHA256=ab"
    );
    let meta = "/hooks/m/meta?hub.mode=subscribe";
    assert_eq!(
        target_url("https://h.example/in/meta?tenant=1", meta, false).unwrap(),
        "https://h.example/in/meta?tenant=1&hub.mode=subscribe"
    );
    // Twilio signs publicUrl + the request's query: one of the user's own breaks it.
    let e = target_url("https://h.example/in/twilio?x=1", path, true).unwrap_err();
    assert!(
        e.to_string().contains("twilio signs the URL's query"),
        "{e}"
    );
    assert!(target_url("http://127.0.0.1:8080/?x=1", "/hooks/a/b", false).is_err());
    assert!(target_url("http://h.example/in#f", "/hooks/a/b", false).is_err());
}

#[test]
fn the_content_type_follows_the_body_as_twilio_tells_them_apart() {
    assert_eq!(content_type(b" {\"a\":1}"), "application/json");
    assert_eq!(content_type(b"[1]"), "application/json");
    assert_eq!(
        content_type(b"CallSid=CA1&From=%2B1"),
        "application/x-www-form-urlencoded"
    );
}

#[test]
fn linear_bodies_get_the_signed_time_unless_they_carry_one() {
    let b = |s: &str| s.as_bytes().to_vec();
    let text = |v: Vec<u8>| String::from_utf8(v).unwrap();
    assert_eq!(
        text(linear_body(b(r#"{"action":"create"}"#), 1_700_000_000, false).unwrap()),
        r#"{"webhookTimestamp":1700000000000,"action":"create"}"#
    );
    assert_eq!(
        text(linear_body(b(" { } "), 5, false).unwrap()),
        r#" {"webhookTimestamp":5000 } "#
    );
    let stamped = r#"{"webhookTimestamp":1,"a":2}"#;
    assert_eq!(
        text(linear_body(b(stamped), 9, false).unwrap()),
        stamped,
        "the body's own value is what Linear signed"
    );
    let e = linear_body(b(stamped), 9, true).unwrap_err();
    assert!(
        e.contains("--timestamp") && e.contains("webhookTimestamp"),
        "{e}"
    );
    assert_eq!(
        text(linear_body(b("[1]"), 9, false).unwrap()),
        "[1]",
        "not an object: the receiver says what is wrong"
    );
}
