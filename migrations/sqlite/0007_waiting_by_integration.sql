-- Claims take each integration's due events in turns (src/inbox/claim.rs): each integration's
-- waiting events in due order. Replaces `inbox_events_due` (the same events by due time alone).
CREATE INDEX IF NOT EXISTS inbox_events_waiting ON inbox_events (integration, next_attempt_at)
    WHERE status IN ('pending', 'retry');
DROP INDEX IF EXISTS inbox_events_due;
