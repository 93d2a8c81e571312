use super::*;

fn event(due_secs: i64) -> Claimed {
    event_of("ns/x", due_secs)
}

fn event_of(integration: &str, due_secs: i64) -> Claimed {
    Claimed {
        id: due_secs,
        integration: integration.into(),
        event_id: format!("e{due_secs}"),
        event_type: None,
        headers: crate::inbox::StoredHeaders::none(),
        content_type: None,
        body: bytes::Bytes::new(),
        attempt: 1,
        lease_until: DateTime::from_timestamp(10_000, 0).unwrap(),
        received_at: DateTime::from_timestamp(due_secs, 0).unwrap(),
        signed_at: None,
        due_at: DateTime::from_timestamp(due_secs, 0),
    }
}

/// The instant `secs` after the epoch, as due times are in these tests.
fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap()
}

/// The claim from `secs` on, of `ns/x` alone.
fn from(secs: i64) -> Claim {
    Claim::From(vec![("ns/x".into(), at(secs))])
}

#[test]
fn a_busy_worker_starts_at_the_oldest_due_time_it_claimed_and_goes_full_every_second() {
    let t0 = Instant::now();
    let mut c = Cursor::default();
    assert_eq!(c.next(t0), Claim::Full, "the first claim is full");
    c.claimed(&Claim::Full, &[event(30), event(10), event(20)], 3, t0);
    assert_eq!(c.next(t0 + Duration::from_millis(10)), from(10));
    c.claimed(
        &from(10),
        &[event(40), event(35)],
        2,
        t0 + Duration::from_millis(10),
    );
    assert_eq!(c.next(t0 + Duration::from_millis(999)), from(35));
    // A second after the last full claim, the next one is full again, whatever the cursor.
    assert_eq!(c.next(t0 + FULL_CLAIM_EVERY), Claim::Full);
}

#[test]
fn after_a_full_claim_found_nothing_the_next_waits_for_stored_events_or_the_poll() {
    let t0 = Instant::now();
    let poll = Duration::from_millis(250);
    let mut c = Cursor::default();
    assert_eq!(
        c.wait_before_claim(t0, poll),
        Duration::ZERO,
        "never claimed"
    );
    c.claimed(&Claim::Full, &[], 4, t0);
    let at = |ms| t0 + Duration::from_millis(ms);
    assert_eq!(c.wait_before_claim(at(0), poll), poll);
    assert_eq!(
        c.wait_before_claim(at(100), poll),
        Duration::from_millis(150)
    );
    assert_eq!(
        c.wait_before_claim(at(250), poll),
        Duration::ZERO,
        "a poll later"
    );
    assert_eq!(c.wait_before_claim(at(900), poll), Duration::ZERO);
    c.events_stored(BTreeSet::new());
    assert_eq!(
        c.wait_before_claim(at(1), poll),
        Duration::ZERO,
        "stored: claim"
    );
}

#[test]
fn only_a_full_claim_that_got_less_than_it_asked_makes_the_pool_wait() {
    let t0 = Instant::now();
    let poll = Duration::from_millis(250);
    let mut c = Cursor::default();
    c.claimed(&Claim::Full, &[event(5)], 1, t0);
    assert_eq!(c.wait_before_claim(t0, poll), Duration::ZERO, "found some");
    c.claimed(&from(5), &[], 4, t0);
    assert_eq!(
        c.wait_before_claim(t0, poll),
        Duration::ZERO,
        "drained past the cursor only: look from the start first"
    );
    c.claimed(&Claim::Full, &[], 4, t0);
    assert_eq!(c.wait_before_claim(t0, poll), poll);
    c.claimed(&Claim::Full, &[event(7)], 4, t0);
    assert_eq!(
        c.wait_before_claim(t0, poll),
        poll,
        "one of four: all that was due"
    );
    c.claimed(&Claim::Full, &[event(6)], 1, t0);
    assert_eq!(
        c.wait_before_claim(t0, poll),
        Duration::ZERO,
        "a later find"
    );
}

#[test]
fn an_empty_claim_sends_the_next_one_back_to_a_full_claim() {
    let t0 = Instant::now();
    let mut c = Cursor::default();
    c.claimed(&Claim::Full, &[event(5)], 1, t0);
    assert_eq!(c.next(t0), from(5));
    c.claimed(&from(5), &[], 4, t0);
    assert_eq!(c.next(t0), Claim::Full);
    // A full claim that finds nothing keeps it full.
    c.claimed(&Claim::Full, &[], 4, t0);
    assert_eq!(c.next(t0), Claim::Full);
}

#[test]
fn each_integration_served_lately_has_its_own_cursor_and_no_other_is_looked_at() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut c = Cursor::default();
    let batch = [
        event_of("ns/b", 50),
        event_of("ns/a", 12),
        event_of("ns/b", 40),
        event_of("ns/a", 11),
    ];
    c.claimed(&Claim::Full, &batch, 4, t0);
    // The oldest of each, not the oldest of all: ns/b's rows from 11 on are long delivered.
    assert_eq!(
        c.next(t0),
        Claim::From(vec![("ns/a".into(), at(11)), ("ns/b".into(), at(40))])
    );
    // ns/b's events ran out: the claims still look at it, from where it was, so that its
    // next event is claimed at once rather than at the next full claim.
    c.claimed(&c.next(ms(1)), &[event_of("ns/a", 13)], 4, ms(1));
    assert_eq!(
        c.next(ms(1)),
        Claim::From(vec![("ns/a".into(), at(13)), ("ns/b".into(), at(40))])
    );
    // Until KEEP after a claim last served it. A new integration that no store names waits
    // for a full claim.
    let later = t0 + KEEP + Duration::from_millis(1);
    c.claimed(&Claim::Full, &[event_of("ns/a", 15)], 4, later);
    assert_eq!(c.next(later), Claim::From(vec![("ns/a".into(), at(15))]));
    assert_eq!(c.next(later + FULL_CLAIM_EVERY), Claim::Full);
}

#[test]
fn an_integration_not_served_lately_is_looked_at_once_a_store_names_it() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let claim = |list: &[(&str, DateTime<Utc>)]| {
        Claim::From(list.iter().map(|(n, t)| (n.to_string(), *t)).collect())
    };
    let oldest = DateTime::UNIX_EPOCH;
    let mut c = Cursor::default();
    let batch = [event_of("ns/a", 10), event_of("ns/a", 11)];
    c.claimed(&Claim::Full, &batch, 2, t0);
    // ns/a is served lately: only ns/q is added, from its oldest end.
    c.events_stored(names(&["ns/a", "ns/q"]));
    let first = c.next(ms(1));
    assert_eq!(first, claim(&[("ns/a", at(10)), ("ns/q", oldest)]));
    // A full batch that did not serve it: still looked at.
    let batch = [event_of("ns/a", 12), event_of("ns/a", 13)];
    c.claimed(&first, &batch, 2, ms(1));
    let second = c.next(ms(2));
    assert_eq!(second, claim(&[("ns/a", at(12)), ("ns/q", oldest)]));
    // Served: from its own cursor.
    let batch = [event_of("ns/a", 14), event_of("ns/q", 5)];
    c.claimed(&second, &batch, 2, ms(2));
    assert_eq!(c.next(ms(3)), claim(&[("ns/a", at(14)), ("ns/q", at(5))]));
    // A claim that got less than it asked for took all that was due of those named.
    c.events_stored(names(&["ns/r"]));
    let third = c.next(ms(4));
    assert_eq!(
        third,
        claim(&[("ns/a", at(14)), ("ns/q", at(5)), ("ns/r", oldest)])
    );
    c.claimed(&third, &[event_of("ns/a", 15)], 4, ms(4));
    assert_eq!(c.next(ms(5)), claim(&[("ns/a", at(15)), ("ns/q", at(5))]));
    // So did a full claim, which looks at every integration.
    c.events_stored(names(&["ns/s"]));
    c.claimed(&Claim::Full, &[event_of("ns/a", 16)], 1, ms(6));
    assert_eq!(c.next(ms(7)), claim(&[("ns/a", at(16)), ("ns/q", at(5))]));
    // At most KEPT named at once; past them, the full claim finds the rest.
    let many: Vec<String> = (0..KEPT + 5).map(|i| format!("ns/n{i:03}")).collect();
    c.events_stored(many.iter().cloned().collect());
    let Claim::From(list) = c.next(ms(8)) else {
        panic!("a claim from the cursors");
    };
    assert_eq!(list.len(), 2 + KEPT);
}

#[test]
fn claims_too_small_for_a_turn_of_each_integration_serve_them_in_turn() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut c = Cursor::default();
    c.claimed(
        &Claim::Full,
        &[event_of("ns/b", 20), event_of("ns/a", 10)],
        2,
        t0,
    );
    assert_eq!(c.served(), ["ns/a", "ns/b"]);
    // A claim of one took ns/a's: ns/a is now the most recently served, and ns/b, whose turn
    // did not fit, is still looked at from where it was.
    c.claimed(&c.next(ms(1)), &[event_of("ns/a", 11)], 1, ms(1));
    assert_eq!(c.served(), ["ns/b", "ns/a"]);
    assert_eq!(
        c.next(ms(1)),
        Claim::From(vec![("ns/a".into(), at(11)), ("ns/b".into(), at(20))])
    );
    c.claimed(&c.next(ms(2)), &[event_of("ns/b", 21)], 1, ms(2));
    assert_eq!(c.served(), ["ns/a", "ns/b"]);
}

#[test]
fn the_claims_look_at_the_kept_most_recently_served_integrations_only() {
    let t0 = Instant::now();
    let mut c = Cursor::default();
    for i in 0..KEPT + 5 {
        let when = t0 + Duration::from_millis(i as u64);
        c.claimed(&Claim::Full, &[event_of(&format!("ns/{i:03}"), 1)], 4, when);
    }
    let served = c.served();
    assert_eq!(served.len(), KEPT);
    assert_eq!(served.first().map(String::as_str), Some("ns/005"));
    assert_eq!(
        served.last().map(String::as_str),
        Some(format!("ns/{:03}", KEPT + 4).as_str())
    );
}
