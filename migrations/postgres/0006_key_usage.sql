-- When each key last verified a stored event: the controller's lastUsedAt and lastReceivedAt, read
-- by primary key instead of a pass over every event the integration keeps, every 30 s (about 9 µs
-- of PostgreSQL per retained event; docs/performance.md, round 12). Receivers write it a few
-- seconds after their commits (src/inbox/key_use.rs); it starts from what the inbox holds.
CREATE TABLE key_usage (
    integration  TEXT        NOT NULL,
    key_id       TEXT        NOT NULL,
    last_used_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (integration, key_id)
);
INSERT INTO key_usage (integration, key_id, last_used_at)
    SELECT integration, key_id, MAX(received_at) FROM inbox_events GROUP BY integration, key_id;

-- The few events that had a dedupe conflict, for the status's dedupeConflicts. Inserts, claims
-- and completions add an entry only for such an event (a new event's dedupe_conflicts is 0).
-- Building it holds writes to the inbox until it is built; README ("Upgrading") shows how to build
-- it beforehand without that, which this migration then keeps.
CREATE INDEX IF NOT EXISTS inbox_events_conflicts ON inbox_events (integration)
    WHERE dedupe_conflicts > 0;
