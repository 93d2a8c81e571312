-- Delivery: why an event was ignored, when its body was dropped, when it was dead-lettered.
ALTER TABLE inbox_events ADD COLUMN ignored_reason TEXT;
ALTER TABLE inbox_events ADD COLUMN body_purged_at TIMESTAMPTZ;
ALTER TABLE inbox_events ADD COLUMN dead_lettered_at TIMESTAMPTZ;

-- Leases of crashed workers expire; the claim looks for them too.
CREATE INDEX inbox_events_leases ON inbox_events (locked_until) WHERE status = 'processing';
CREATE INDEX inbox_events_dead ON inbox_events (integration, dead_lettered_at) WHERE status = 'dead_letter';

-- Every delivery attempt, kept with the event (also across replays).
CREATE TABLE delivery_attempts (
    id          BIGSERIAL PRIMARY KEY,
    event_row   BIGINT      NOT NULL REFERENCES inbox_events (id) ON DELETE CASCADE,
    attempt     BIGINT      NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL,
    duration_ms BIGINT      NOT NULL,
    status_code BIGINT,
    error       TEXT,
    outcome     TEXT        NOT NULL
);
CREATE INDEX delivery_attempts_event ON delivery_attempts (event_row);

-- The ordering gate: last version delivered per resource, and who is delivering it now.
CREATE TABLE resource_versions (
    integration  TEXT NOT NULL,
    resource_id  TEXT NOT NULL,
    -- NULL until the first successful delivery of the resource.
    version      TEXT,
    updated_at   TIMESTAMPTZ NOT NULL,
    -- A lease that serializes deliveries of one resource across workers and processes; a
    -- crashed worker's lease simply expires. No connection is held while delivering.
    locked_until TIMESTAMPTZ,
    lock_token   TEXT,
    PRIMARY KEY (integration, resource_id)
);
