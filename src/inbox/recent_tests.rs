use super::*;

const BODY: [u8; 32] = [7; 32];
const OTHER: [u8; 32] = [8; 32];
const DAY: Duration = Duration::from_secs(86_400);

fn recent(bytes: usize, ttl_secs: u64) -> Recent {
    Recent::new(RecentConfig {
        bytes,
        ttl: Duration::from_secs(ttl_secs),
    })
}

/// Remembers `key` with `body` through the note a lookup at `since` would have made now.
fn remember(r: &Recent, key: String, body: [u8; 32], since: Instant, now: Instant) {
    r.committed(note(r, key, body, since), now);
}

fn note(r: &Recent, key: String, body_sha256: [u8; 32], since: Instant) -> Note {
    let epoch = r.entries.lock().unwrap().epoch;
    Note {
        key,
        body_sha256,
        since,
        epoch,
    }
}

/// Whether `key` is held with `body` and answers at `now` for an integration whose dedupe
/// retention is `2 * at_most`, whether or not the memory answers at all.
fn holds_within(r: &Recent, key: &str, body: &[u8; 32], at_most: Duration, now: Instant) -> bool {
    let lifetime = r.cfg.ttl.min(at_most);
    r.entries.lock().unwrap().holds(key, body, lifetime, now)
}

/// [`holds_within`] a day.
fn holds(r: &Recent, key: &str, body: &[u8; 32], now: Instant) -> bool {
    holds_within(r, key, body, DAY, now)
}

#[test]
fn a_remembered_key_with_its_body_is_a_duplicate_and_nothing_else_is() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    remember(&r, key("shop/stripe", "evt_1"), BODY, t0, t0);
    assert!(holds(&r, &key("shop/stripe", "evt_1"), &BODY, t0));
    // Another body is a conflict, which only the database can count.
    assert!(!holds(&r, &key("shop/stripe", "evt_1"), &OTHER, t0));
    assert!(!holds(&r, &key("shop/stripe", "evt_2"), &BODY, t0));
    assert!(!holds(&r, &key("shop/github", "evt_1"), &BODY, t0));
}

#[test]
fn keys_of_different_pairs_never_coincide() {
    assert_ne!(key("a", "bc"), key("ab", "c"));
    assert_ne!(key("a:1", "x"), key("a", ":1x"));
    assert_ne!(key("", "1:x"), key("x", ""));
}

#[test]
fn an_entry_answers_for_the_ttl_or_half_the_retention_whichever_is_shorter() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    let k = key("shop/stripe", "evt_1");
    remember(&r, k.clone(), BODY, t0, t0);
    assert!(holds(&r, &k, &BODY, t0 + Duration::from_secs(299)));
    assert!(!holds(&r, &k, &BODY, t0 + Duration::from_secs(300)));

    // Retention of 60 s: the caller passes 30 s, as configured when it asks, so an entry made
    // under a longer retention stops answering when the retention is shortened.
    let half = Duration::from_secs(30);
    assert!(holds_within(
        &r,
        &k,
        &BODY,
        half,
        t0 + Duration::from_secs(29)
    ));
    assert!(!holds_within(
        &r,
        &k,
        &BODY,
        half,
        t0 + Duration::from_secs(30)
    ));
}

#[test]
fn the_lifetime_counts_from_the_instant_given_not_from_when_it_was_remembered() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    let k = key("shop/stripe", "evt_1");
    remember(&r, k.clone(), BODY, t0, t0 + Duration::from_secs(10));
    assert!(!holds(&r, &k, &BODY, t0 + Duration::from_secs(300)));
}

#[test]
fn the_byte_budget_drops_the_oldest_entries_first() {
    let k = |i: u32| key("shop/stripe", &format!("evt_{i:04}"));
    // Room for exactly three entries.
    let r = recent(3 * cost(&k(0)), 300);
    let t0 = Instant::now();
    for i in 0..5 {
        remember(&r, k(i), BODY, t0, t0);
    }
    assert_eq!(r.held(), (3, 3 * cost(&k(0))));
    let usage = r.usage();
    assert_eq!((usage.bytes, usage.evicted), (3 * cost(&k(0)), 2));
    assert!(!holds(&r, &k(0), &BODY, t0));
    assert!(!holds(&r, &k(1), &BODY, t0));
    for i in 2..5 {
        assert!(holds(&r, &k(i), &BODY, t0), "evt {i} dropped");
    }
}

#[test]
fn expired_entries_are_dropped_as_new_ones_arrive() {
    let r = recent(1 << 20, 60);
    let t0 = Instant::now();
    for i in 0..100 {
        remember(&r, key("shop/stripe", &format!("evt_{i}")), BODY, t0, t0);
    }
    let later = t0 + Duration::from_secs(61);
    remember(&r, key("shop/stripe", "evt_new"), BODY, later, later);
    assert_eq!(r.held().0, 1, "the expired entries are still held");
    assert_eq!(
        r.usage().evicted,
        0,
        "expired entries counted as dropped for room"
    );
}

#[test]
fn remembering_a_key_again_replaces_it_without_counting_it_twice() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    let k = key("shop/stripe", "evt_1");
    remember(&r, k.clone(), BODY, t0, t0);
    remember(&r, k.clone(), OTHER, t0, t0);
    assert_eq!(r.held(), (1, cost(&k)));
    assert!(holds(&r, &k, &OTHER, t0));
    assert!(!holds(&r, &k, &BODY, t0));
}

#[test]
fn a_memory_of_zero_bytes_or_zero_ttl_remembers_nothing() {
    let t0 = Instant::now();
    for r in [recent(0, 300), recent(1 << 20, 0)] {
        assert!(!r.enabled());
        remember(&r, key("shop/stripe", "evt_1"), BODY, t0, t0);
        assert!(!holds(&r, &key("shop/stripe", "evt_1"), &BODY, t0));
        assert_eq!(r.held(), (0, 0));
    }
    // A key larger than the whole budget is not remembered either.
    let r = recent(ENTRY_OVERHEAD + 4, 300);
    remember(&r, key("shop/stripe", "evt_1"), BODY, t0, t0);
    assert_eq!(r.held(), (0, 0));
}

#[test]
fn the_memory_answers_only_for_a_while_after_a_confirmation_started() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    assert!(!r.answers(t0), "answers before its first confirmation");
    r.confirm(&PurgedKeys::All, t0);
    assert!(r.answers(t0 + CONFIRMED_FOR - Duration::from_millis(1)));
    assert!(!r.answers(t0 + CONFIRMED_FOR));
    // A later confirmation extends it; one that started earlier than the last does not shorten it.
    r.confirm(&PurgedKeys::Nothing, t0 + Duration::from_secs(2));
    r.confirm(&PurgedKeys::Nothing, t0 + Duration::from_secs(1));
    assert!(r.answers(t0 + Duration::from_secs(2) + CONFIRMED_FOR - Duration::from_millis(1)));
    assert!(!r.answers(t0 + Duration::from_secs(2) + CONFIRMED_FOR));
    assert!(!recent(0, 300).answers(t0), "a memory that is off answers");
}

fn purge(id: i64, event_count: i64, keys: &[(&str, &str)]) -> RecordedPurge {
    RecordedPurge {
        id,
        event_count,
        events: keys
            .iter()
            .map(|(integration, event_id)| crate::inbox::AuditedEvent {
                id,
                integration: integration.to_string(),
                event_id: event_id.to_string(),
            })
            .collect(),
    }
}

fn listed(keys: &[(&str, &str)]) -> PurgedKeys {
    PurgedKeys::Listed(
        keys.iter()
            .map(|(i, e)| (i.to_string(), e.to_string()))
            .collect(),
    )
}

#[test]
fn the_purges_since_the_last_look_name_their_keys_unless_a_list_was_cut() {
    assert_eq!(PurgedKeys::of(&[]), PurgedKeys::Nothing);
    let two = [
        purge(7, 1, &[("shop/stripe", "evt_1")]),
        purge(9, 2, &[("shop/github", "d1"), ("shop/stripe", "evt_2")]),
    ];
    assert_eq!(
        PurgedKeys::of(&two),
        listed(&[
            ("shop/stripe", "evt_1"),
            ("shop/github", "d1"),
            ("shop/stripe", "evt_2")
        ])
    );
    // An audit row lists the first MAX_AUDITED_EVENTS of its events: the rest could be any key.
    let cut = [
        two[0].clone(),
        purge(9, 10_001, &[("shop/stripe", "evt_2")]),
    ];
    assert_eq!(PurgedKeys::of(&cut), PurgedKeys::All);
}

#[test]
fn a_confirmation_forgets_the_keys_purged_and_keeps_the_others() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    let k = |i: &str, e: &str| key(i, e);
    // Before the first confirmation nothing says which purges the entries predate.
    remember(&r, k("shop/stripe", "evt_0"), BODY, t0, t0);
    assert_eq!(r.confirm(&PurgedKeys::All, t0), 1);
    for (i, e) in [
        ("shop/stripe", "evt_1"),
        ("shop/stripe", "evt_2"),
        ("pay/x", "evt_1"),
    ] {
        remember(&r, k(i, e), BODY, t0, t0);
    }
    let second = t0 + Duration::from_secs(1);
    assert_eq!(r.confirm(&PurgedKeys::Nothing, second), 0, "no purge: kept");
    assert_eq!(r.held().0, 3);

    // One tenant's purge: its keys go (one of them never remembered), the others stay.
    let purged = listed(&[("shop/stripe", "evt_1"), ("shop/stripe", "evt_9")]);
    let third = t0 + Duration::from_secs(2);
    assert_eq!(r.confirm(&purged, third), 1);
    assert!(!holds(&r, &k("shop/stripe", "evt_1"), &BODY, third));
    assert!(holds(&r, &k("shop/stripe", "evt_2"), &BODY, third));
    assert!(holds(&r, &k("pay/x", "evt_1"), &BODY, third));
    assert_eq!(
        r.held(),
        (
            2,
            cost(&k("shop/stripe", "evt_2")) + cost(&k("pay/x", "evt_1"))
        )
    );
    assert!(r.answers(third));
}

#[test]
fn an_insert_looked_up_before_a_purge_was_seen_is_not_remembered() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    r.confirm(&PurgedKeys::All, t0);
    // Looked up, then (while its insert commits) a purge is seen.
    let before = note(&r, key("shop/stripe", "evt_1"), BODY, t0);
    r.confirm(
        &listed(&[("shop/other", "evt_7")]),
        t0 + Duration::from_secs(1),
    );
    r.committed(before, t0 + Duration::from_secs(1));
    assert_eq!(r.held(), (0, 0));
    // Looked up after it: remembered.
    let after = note(
        &r,
        key("shop/stripe", "evt_2"),
        BODY,
        t0 + Duration::from_secs(1),
    );
    r.committed(after, t0 + Duration::from_secs(1));
    assert_eq!(r.held().0, 1);
}
