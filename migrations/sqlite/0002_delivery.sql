ALTER TABLE inbox_events ADD COLUMN ignored_reason TEXT;
ALTER TABLE inbox_events ADD COLUMN body_purged_at TEXT;
ALTER TABLE inbox_events ADD COLUMN dead_lettered_at TEXT;

CREATE INDEX inbox_events_leases ON inbox_events (locked_until) WHERE status = 'processing';
CREATE INDEX inbox_events_dead ON inbox_events (integration, dead_lettered_at) WHERE status = 'dead_letter';

CREATE TABLE delivery_attempts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    event_row   INTEGER NOT NULL REFERENCES inbox_events (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    started_at  TEXT    NOT NULL,
    duration_ms INTEGER NOT NULL,
    status_code INTEGER,
    error       TEXT,
    outcome     TEXT    NOT NULL
);
CREATE INDEX delivery_attempts_event ON delivery_attempts (event_row);

CREATE TABLE resource_versions (
    integration  TEXT NOT NULL,
    resource_id  TEXT NOT NULL,
    -- NULL until the first successful delivery of the resource.
    version      TEXT,
    updated_at   TEXT NOT NULL,
    -- A lease that serializes deliveries of one resource across workers and processes; a
    -- crashed worker's lease simply expires. No connection is held while delivering.
    locked_until TEXT,
    lock_token   TEXT,
    PRIMARY KEY (integration, resource_id)
);
