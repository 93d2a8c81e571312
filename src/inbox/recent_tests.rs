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

#[test]
fn a_remembered_key_with_its_body_is_a_duplicate_and_nothing_else_is() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    r.remember(key("shop/stripe", "evt_1"), BODY, t0, DAY, t0);
    assert!(r.is_duplicate(&key("shop/stripe", "evt_1"), &BODY, t0));
    // Another body is a conflict, which only the database can count.
    assert!(!r.is_duplicate(&key("shop/stripe", "evt_1"), &OTHER, t0));
    assert!(!r.is_duplicate(&key("shop/stripe", "evt_2"), &BODY, t0));
    assert!(!r.is_duplicate(&key("shop/github", "evt_1"), &BODY, t0));
}

#[test]
fn keys_of_different_pairs_never_coincide() {
    assert_ne!(key("a", "bc"), key("ab", "c"));
    assert_ne!(key("a:1", "x"), key("a", ":1x"));
    assert_ne!(key("", "1:x"), key("x", ""));
}

#[test]
fn an_entry_lives_the_ttl_or_half_the_retention_whichever_is_shorter() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    let k = key("shop/stripe", "evt_1");
    r.remember(k.clone(), BODY, t0, DAY, t0);
    assert!(r.is_duplicate(&k, &BODY, t0 + Duration::from_secs(299)));
    assert!(!r.is_duplicate(&k, &BODY, t0 + Duration::from_secs(300)));

    // Retention of 60 s: the caller passes 30 s.
    let short = key("shop/short", "evt_1");
    r.remember(short.clone(), BODY, t0, Duration::from_secs(30), t0);
    assert!(r.is_duplicate(&short, &BODY, t0 + Duration::from_secs(29)));
    assert!(!r.is_duplicate(&short, &BODY, t0 + Duration::from_secs(30)));
}

#[test]
fn the_lifetime_counts_from_the_instant_given_not_from_when_it_was_remembered() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    let k = key("shop/stripe", "evt_1");
    r.remember(k.clone(), BODY, t0, DAY, t0 + Duration::from_secs(10));
    assert!(!r.is_duplicate(&k, &BODY, t0 + Duration::from_secs(300)));
}

#[test]
fn the_byte_budget_drops_the_oldest_entries_first() {
    let k = |i: u32| key("shop/stripe", &format!("evt_{i:04}"));
    // Room for exactly three entries.
    let r = recent(3 * cost(&k(0)), 300);
    let t0 = Instant::now();
    for i in 0..5 {
        r.remember(k(i), BODY, t0, DAY, t0);
    }
    assert_eq!(r.held(), (3, 3 * cost(&k(0))));
    assert!(!r.is_duplicate(&k(0), &BODY, t0));
    assert!(!r.is_duplicate(&k(1), &BODY, t0));
    for i in 2..5 {
        assert!(r.is_duplicate(&k(i), &BODY, t0), "evt {i} dropped");
    }
}

#[test]
fn expired_entries_are_dropped_as_new_ones_arrive() {
    let r = recent(1 << 20, 60);
    let t0 = Instant::now();
    for i in 0..100 {
        r.remember(key("shop/stripe", &format!("evt_{i}")), BODY, t0, DAY, t0);
    }
    let later = t0 + Duration::from_secs(61);
    r.remember(key("shop/stripe", "evt_new"), BODY, later, DAY, later);
    assert_eq!(r.held().0, 1, "the expired entries are still held");
}

#[test]
fn remembering_a_key_again_replaces_it_without_counting_it_twice() {
    let r = recent(1 << 20, 300);
    let t0 = Instant::now();
    let k = key("shop/stripe", "evt_1");
    r.remember(k.clone(), BODY, t0, DAY, t0);
    r.remember(k.clone(), OTHER, t0, DAY, t0);
    assert_eq!(r.held(), (1, cost(&k)));
    assert!(r.is_duplicate(&k, &OTHER, t0));
    assert!(!r.is_duplicate(&k, &BODY, t0));
}

#[test]
fn a_memory_of_zero_bytes_or_zero_ttl_remembers_nothing() {
    let t0 = Instant::now();
    for r in [recent(0, 300), recent(1 << 20, 0)] {
        assert!(!r.enabled());
        r.remember(key("shop/stripe", "evt_1"), BODY, t0, DAY, t0);
        assert!(!r.is_duplicate(&key("shop/stripe", "evt_1"), &BODY, t0));
        assert_eq!(r.held(), (0, 0));
    }
    // A key larger than the whole budget is not remembered either.
    let r = recent(ENTRY_OVERHEAD + 4, 300);
    r.remember(key("shop/stripe", "evt_1"), BODY, t0, DAY, t0);
    assert_eq!(r.held(), (0, 0));
}
