use super::*;
use InsertOutcome::{Conflict, Duplicate, Inserted, Replay};

/// A table row's event: integration, event id, body, and the digest when the id is unsigned.
#[derive(Clone, Copy)]
struct Ev(&'static str, &'static str, u8, Option<u8>);

/// An event whose id the signature covers: no digest to remember.
fn signed_id(id: &'static str, body: u8) -> Ev {
    Ev("ns/a", id, body, None)
}

/// An event whose id is not signed: its signature digest is remembered.
fn nonced(id: &'static str, body: u8, digest: u8) -> Ev {
    Ev("ns/a", id, body, Some(digest))
}

fn of(integration: &'static str, ev: Ev) -> Ev {
    Ev(integration, ev.1, ev.2, ev.3)
}

/// The inbox and nonce tables as the batch statements see them. Row ids start at 100 so
/// that they cannot be mistaken for indexes.
#[derive(Default)]
struct Db {
    nonces: HashSet<(String, Vec<u8>)>,
    rows: HashMap<Key, (i64, Vec<u8>)>,
}

impl Db {
    fn with_rows(rows: &[(&str, u8)]) -> Self {
        let mut db = Db::default();
        for (id, body) in rows {
            let next = 100 + db.rows.len() as i64;
            db.rows
                .insert(("ns/a".into(), id.to_string()), (next, vec![*body; 32]));
        }
        db
    }

    fn with_nonces(mut self, digests: &[u8]) -> Self {
        for d in digests {
            self.nonces.insert(("ns/a".into(), vec![*d; 32]));
        }
        self
    }

    /// Runs the stages the way `batch::run` does, answering like the SQL would.
    fn run(&mut self, evs: &[Ev]) -> Decided {
        let hashes: Vec<[u8; 32]> = evs.iter().map(|e| [e.2; 32]).collect();
        let digests: Vec<Option<[u8; 32]>> = evs.iter().map(|e| e.3.map(|d| [d; 32])).collect();
        let incoming = evs
            .iter()
            .enumerate()
            .map(|(i, e)| Incoming {
                integration: e.0,
                event_id: e.1,
                body_sha256: &hashes[i],
                nonce: digests[i].as_ref().map(|d| &d[..]),
                caught_up: false,
            })
            .collect::<Vec<_>>();
        let nonce_of = |i: usize| (evs[i].0.to_string(), digests[i].unwrap().to_vec());

        let nonces = Nonces::new(incoming.clone());
        let claimed: HashSet<_> = nonces.ask().iter().map(|&i| nonce_of(i)).collect();
        assert_eq!(claimed.len(), nonces.ask().len(), "a digest claimed twice");
        let fresh: Vec<bool> = nonces
            .ask()
            .iter()
            .map(|&i| self.nonces.insert(nonce_of(i)))
            .collect();

        let inserts = nonces.answer(&fresh);
        let keys: HashSet<Key> = inserts.ask().iter().map(|&i| incoming[i].key()).collect();
        assert_eq!(keys.len(), inserts.ask().len(), "a key inserted twice");
        let mut ids = HashMap::new();
        for &i in inserts.ask() {
            let key = incoming[i].key();
            if !self.rows.contains_key(&key) {
                let id = 100 + self.rows.len() as i64;
                self.rows.insert(key.clone(), (id, hashes[i].to_vec()));
                ids.insert(key, id);
            }
        }

        let known = inserts.answer(&ids);
        let stored = known
            .ask()
            .iter()
            .filter_map(|&i| {
                let key = incoming[i].key();
                let body_sha256 = self.rows.get(&key)?.1.clone();
                Some((
                    key,
                    Stored {
                        body_sha256,
                        caught_up: false,
                    },
                ))
            })
            .collect();
        let decided = known.answer(&stored);
        for &i in decided.forget() {
            self.nonces.remove(&nonce_of(i));
        }
        decided
    }
}

/// (case, database before, batch, outcomes, conflicts counted, digests given back)
type Case = (
    &'static str,
    Db,
    Vec<Ev>,
    Vec<InsertOutcome>,
    Vec<usize>,
    Vec<usize>,
);

#[test]
fn every_outcome_and_the_first_wins_rule() {
    #[rustfmt::skip]
        let table: Vec<Case> = vec![
            ("new id", Db::default(),
                vec![signed_id("e1", 1)], vec![Inserted { id: 100 }], vec![], vec![]),
            ("new id with a fresh digest", Db::default(),
                vec![nonced("e1", 1, 9)], vec![Inserted { id: 100 }], vec![], vec![]),
            ("stored id, same body: provider retry", Db::with_rows(&[("e1", 1)]),
                vec![signed_id("e1", 1)], vec![Duplicate], vec![], vec![]),
            ("stored id, other body: conflict", Db::with_rows(&[("e1", 1)]),
                vec![signed_id("e1", 2)], vec![Conflict], vec![0], vec![]),
            ("remembered digest: replay, even of an unknown id", Db::default().with_nonces(&[9]),
                vec![nonced("e1", 1, 9)], vec![Replay], vec![], vec![]),
            ("stored id with a fresh digest: the digest is given back", Db::with_rows(&[("e1", 1)]),
                vec![nonced("e1", 1, 9), nonced("e1", 2, 8)], vec![Duplicate, Conflict], vec![1], vec![0, 1]),
            ("same id twice, same body", Db::default(),
                vec![signed_id("e1", 1), signed_id("e1", 1)], vec![Inserted { id: 100 }, Duplicate], vec![], vec![]),
            ("same id twice, other body: the first body is kept", Db::default(),
                vec![signed_id("e1", 1), signed_id("e1", 2)], vec![Inserted { id: 100 }, Conflict], vec![1], vec![]),
            ("same digest twice: the second is a replay of the first", Db::default(),
                vec![nonced("e1", 1, 9), nonced("e2", 2, 9)], vec![Inserted { id: 100 }, Replay], vec![], vec![]),
            ("a replayed copy stays a replay when its first copy is a duplicate", Db::with_rows(&[("e1", 1)]),
                vec![nonced("e1", 1, 9), nonced("e1", 1, 9)], vec![Duplicate, Replay], vec![], vec![0]),
            ("arrival order decides the first copy, whether or not it has a digest", Db::default(),
                vec![nonced("e1", 1, 9), signed_id("e1", 2)], vec![Inserted { id: 100 }, Conflict], vec![1], vec![]),
            ("...also the other way round", Db::default(),
                vec![signed_id("e1", 2), nonced("e1", 1, 9)], vec![Inserted { id: 100 }, Conflict], vec![1], vec![1]),
            ("a replay is not a first copy", Db::default().with_nonces(&[9]),
                vec![nonced("e1", 1, 9), signed_id("e1", 2)], vec![Replay, Inserted { id: 100 }], vec![], vec![]),
            ("ids and digests are per integration", Db::with_rows(&[("e1", 1)]).with_nonces(&[9]),
                vec![of("ns/b", signed_id("e1", 2)), of("ns/b", nonced("e2", 1, 9))],
                vec![Inserted { id: 101 }, Inserted { id: 102 }], vec![], vec![]),
            ("a mixed batch, rows numbered in arrival order", Db::with_rows(&[("old", 1)]).with_nonces(&[7]),
                vec![signed_id("e1", 1), nonced("old", 2, 8), nonced("e2", 3, 7), signed_id("e1", 1),
                     signed_id("e3", 4), nonced("e4", 5, 8), signed_id("e3", 5), signed_id("old", 1)],
                vec![Inserted { id: 101 }, Conflict, Replay, Duplicate,
                     Inserted { id: 102 }, Replay, Conflict, Duplicate],
                vec![1, 6], vec![1]),
        ];
    for (case, mut db, batch, outcomes, conflicts, forget) in table {
        let decided = db.run(&batch);
        assert_eq!(decided.conflicts(), conflicts, "{case}: conflicts");
        assert_eq!(decided.forget(), forget, "{case}: digests given back");
        assert_eq!(decided.outcomes(), outcomes, "{case}: outcomes");
    }
}

#[test]
fn a_row_that_cannot_be_read_back_is_a_conflict() {
    let body = [1; 32];
    let ev = Incoming {
        integration: "ns/a",
        event_id: "e1",
        body_sha256: &body,
        nonce: None,
        caught_up: false,
    };
    let inserts = Nonces::new(vec![ev]).answer(&[]);
    assert_eq!(inserts.ask(), [0]);
    let known = inserts.answer(&HashMap::new());
    assert_eq!(known.ask(), [0]);
    let decided = known.answer(&HashMap::new());
    assert_eq!(decided.conflicts(), [0]);
    assert_eq!(decided.outcomes(), [Conflict]);
}

#[test]
fn each_stage_asks_only_about_what_it_cannot_decide() {
    let bodies = [[1; 32], [2; 32]];
    let digest = [9; 32];
    let ev = |i: usize, nonce| Incoming {
        integration: "ns/a",
        event_id: "e1",
        body_sha256: &bodies[i],
        nonce,
        caught_up: false,
    };
    let nonces = Nonces::new(vec![
        ev(0, None),
        ev(1, Some(&digest[..])),
        ev(1, Some(&digest[..])),
    ]);
    // Ids the signature covers need no digest; the in-batch copy is already a replay.
    assert_eq!(nonces.ask(), [1]);
    let inserts = nonces.answer(&[true]);
    assert_eq!(inserts.ask(), [0]);
    let key: Key = ("ns/a".into(), "e1".into());
    let known = inserts.answer(&HashMap::from([(key.clone(), 7)]));
    // The row inserted in this batch is what its followers are compared with.
    assert_eq!(known.ask(), [1]);
    let decided = known.answer(&HashMap::from([(key, webhook(&bodies[0]))]));
    assert_eq!(decided.outcomes(), [Inserted { id: 7 }, Conflict, Replay]);

    let all_new = Nonces::new(vec![ev(0, None)]).answer(&[]);
    let known = all_new.answer(&HashMap::from([(("ns/a".into(), "e1".into()), 1)]));
    assert!(known.ask().is_empty(), "nothing to read back");
}

fn webhook(body: &[u8]) -> Stored {
    Stored {
        body_sha256: body.to_vec(),
        caught_up: false,
    }
}

#[test]
fn a_catch_up_copy_with_other_bytes_is_a_duplicate_never_a_conflict() {
    let (api, hook) = ([1; 32], [2; 32]);
    let key: Key = ("ns/a".into(), "evt_1".into());
    let ev = |body, caught_up| Incoming {
        integration: "ns/a",
        event_id: "evt_1",
        body_sha256: body,
        nonce: None,
        caught_up,
    };
    // (incoming body, incoming caught up, stored row, outcome)
    let cases = [
        // The webhook arrives after catch-up stored the API's rendering of the event.
        (
            &hook,
            false,
            Stored {
                body_sha256: api.to_vec(),
                caught_up: true,
            },
            Duplicate,
        ),
        // Catch-up lists an event the webhook already stored.
        (&api, true, webhook(&hook), Duplicate),
        // Two webhooks with different bodies under one id stay a conflict.
        (&api, false, webhook(&hook), Conflict),
    ];
    for (body, caught_up, stored, want) in cases {
        let inserts = Nonces::new(vec![ev(body, caught_up)]).answer(&[]);
        let known = inserts.answer(&HashMap::new());
        let decided = known.answer(&HashMap::from([(key.clone(), stored.clone())]));
        assert_eq!(
            decided.conflicts().is_empty(),
            want == Duplicate,
            "{stored:?}"
        );
        assert_eq!(decided.outcomes(), [want], "{stored:?}");
    }
}
