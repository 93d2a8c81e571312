-- Claims take each integration's due events in turns (src/inbox/claim.rs), so one integration's
-- backlog no longer holds back another's events: they walk each integration's waiting events in
-- due order, which this index keeps. It replaces `inbox_events_due` (the same events by due time
-- alone), so a new event still writes the same number of index entries.
-- Building it holds writes to the inbox until it is built; README ("Upgrading") shows how to build
-- it beforehand without that, which this migration then keeps.
CREATE INDEX IF NOT EXISTS inbox_events_waiting ON inbox_events (integration, next_attempt_at)
    WHERE status IN ('pending', 'retry');
DROP INDEX IF EXISTS inbox_events_due;
