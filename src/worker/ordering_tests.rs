use super::*;
use chrono::TimeZone;
use serde_json::json;

#[test]
fn entry_reads_resource_and_version_from_the_body() {
    let spec = OrderingSpec {
        resource_id_pointer: "/data/id".into(),
        version_pointer: "/data/version".into(),
    };
    let keyed = |resource: &str, version| Entry::Keyed {
        resource: resource.into(),
        version,
    };
    let cases = [
        (
            r#"{"data":{"id":"cus_1","version":5}}"#,
            keyed("cus_1", Version::Int(5)),
        ),
        (
            r#"{"data":{"id":42,"version":"7"}}"#,
            keyed("42", Version::Int(7)),
        ),
        (r#"{"data":{"id":"cus_1","version":4.5}}"#, Entry::Unkeyed),
        (r#"{"data":{"id":true,"version":5}}"#, Entry::Unkeyed),
        (r#"{"data":{"id":null,"version":5}}"#, Entry::Unkeyed),
        (r#"{"data":{"id":"cus_1"}}"#, Entry::Unkeyed),
        (r#"{"data":{"version":5}}"#, Entry::Unkeyed),
        ("not json", Entry::Unkeyed),
        ("", Entry::Unkeyed),
    ];
    for (body, want) in cases {
        assert_eq!(entry(Some(&spec), body.as_bytes()), want, "{body}");
    }
    let body = br#"{"data":{"id":"cus_1","version":5}}"#;
    assert_eq!(entry(None, body), Entry::Unordered);
}

#[test]
fn verdict_covers_every_lock_and_comparison() {
    let held = |stored: Option<&str>| Lock::Held(stored.map(str::to_owned));
    let deliver = |from: Option<&str>, to: &str| Verdict::Deliver {
        from: from.map(str::to_owned),
        to: to.to_owned(),
    };
    let ignore = |reason| Verdict::Ignore { reason };
    let five = Version::Int(5);
    let noon = Version::Time(Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap());
    let noon_stored = "t:2026-01-01T12:00:00.000000000Z";
    let cases = [
        (
            Lock::Busy,
            &five,
            Verdict::Requeue(Duration::from_millis(200)),
        ),
        (held(None), &five, deliver(None, "i:5")),
        (held(Some("i:4")), &five, deliver(Some("i:4"), "i:5")),
        (held(Some("i:5")), &five, ignore("duplicate_version")),
        (held(Some("i:6")), &five, ignore("stale_version")),
        (held(Some(noon_stored)), &five, Verdict::DeliverUnfenced),
        (held(Some("i:5")), &noon, Verdict::DeliverUnfenced),
        (
            held(Some("t:2026-01-01T11:00:00Z")),
            &noon,
            deliver(Some("t:2026-01-01T11:00:00Z"), noon_stored),
        ),
        (held(Some(noon_stored)), &noon, ignore("duplicate_version")),
        // Unreadable stored versions do not hold the resource back.
        (
            held(Some("garbage")),
            &five,
            deliver(Some("garbage"), "i:5"),
        ),
        (held(Some("")), &noon, deliver(Some(""), noon_stored)),
    ];
    for (lock, incoming, want) in cases {
        let case = format!("{lock:?} {incoming:?}");
        assert_eq!(verdict(lock, incoming), want, "{case}");
    }
}

#[test]
fn versions_parse_from_json() {
    let utc = Utc.with_ymd_and_hms(2026, 1, 2, 1, 4, 5).unwrap();
    let cases = [
        (json!(42), Some(Version::Int(42))),
        (json!(u64::MAX), Some(Version::Int(u64::MAX.into()))),
        (json!("42"), Some(Version::Int(42))),
        (json!("-3"), Some(Version::Int(-3))),
        (json!(i128::MAX.to_string()), Some(Version::Int(i128::MAX))),
        (json!("2026-01-02T03:04:05+02:00"), Some(Version::Time(utc))),
        (json!(4.5), None),
        (json!(4.0), None),
        (json!("abc"), None),
        (json!(true), None),
        (json!(null), None),
        (json!("+5"), None),
        (json!("-"), None),
        (json!(""), None),
        (json!([1]), None),
    ];
    for (value, want) in cases {
        assert_eq!(Version::of(&Found::from(&value)), want, "{value}");
    }
}

#[test]
fn string_versions_compare_as_numbers() {
    let ten = Version::of(&Found::from(&json!("10"))).unwrap();
    let nine = Version::of(&Found::from(&json!("9"))).unwrap();
    assert_eq!(gate(Some(&nine), &ten), Gate::Deliver);
    assert_eq!(gate(Some(&ten), &nine), Gate::Stale);
    let i64_max = Version::Int(i64::MAX.into());
    let beyond = Version::Int(i128::from(i64::MAX) + 1);
    assert_eq!(gate(Some(&i64_max), &beyond), Gate::Deliver);
}

#[test]
fn stored_form_round_trips() {
    let when = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let stored = Version::Time(when).to_stored();
    assert_eq!(stored, "t:2026-01-01T00:00:00.000000000Z");
    assert_eq!(Version::Int(42).to_stored(), "i:42");
    let precise = when + chrono::TimeDelta::nanoseconds(123_456_789);
    let ints = [Version::Int(-7), Version::Int(i128::MIN)];
    let times = [Version::Time(when), Version::Time(precise)];
    for v in ints.into_iter().chain(times) {
        assert_eq!(Version::parse_stored(&v.to_stored()), Some(v));
    }
    for bad in ["42", "i:", "i:x", "i:+1", "t:yesterday", "x:1", ""] {
        assert_eq!(Version::parse_stored(bad), None, "{bad:?}");
    }
}

#[test]
fn gate_covers_every_variant() {
    use Gate::*;
    let (one, two) = (Version::Int(1), Version::Int(2));
    let early = Version::Time(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap());
    let late = Version::Time(Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap());
    let cases = [
        (None, &one, Deliver),
        (None, &early, Deliver),
        (Some(&one), &two, Deliver),
        (Some(&two), &one, Stale),
        (Some(&two), &two, DuplicateVersion),
        (Some(&early), &late, Deliver),
        (Some(&late), &early, Stale),
        (Some(&late), &late, DuplicateVersion),
        (Some(&one), &early, KindMismatch),
        (Some(&early), &one, KindMismatch),
    ];
    for (last, incoming, want) in cases {
        assert_eq!(gate(last, incoming), want, "{last:?} -> {incoming:?}");
    }
    assert_eq!(Stale.ignored_reason(), Some("stale_version"));
    assert_eq!(DuplicateVersion.ignored_reason(), Some("duplicate_version"));
    assert_eq!(Deliver.ignored_reason(), None);
    assert_eq!(KindMismatch.ignored_reason(), None);
}
