-- Same shape as PostgreSQL's 0006; timestamps are RFC 3339 text in UTC, which sorts correctly.
CREATE TABLE key_usage (
    integration  TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    last_used_at TEXT NOT NULL,
    PRIMARY KEY (integration, key_id)
);
INSERT INTO key_usage (integration, key_id, last_used_at)
    SELECT integration, key_id, MAX(received_at) FROM inbox_events GROUP BY integration, key_id;
CREATE INDEX IF NOT EXISTS inbox_events_conflicts ON inbox_events (integration)
    WHERE dedupe_conflicts > 0;
