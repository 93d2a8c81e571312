-- Same shape as the PostgreSQL schema; timestamps are RFC 3339 text in UTC, which sorts correctly.
CREATE TABLE inbox_events (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    integration      TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,
    event_type       TEXT,
    scheme           TEXT    NOT NULL,
    key_id           TEXT    NOT NULL,
    signed_at        TEXT,
    headers          TEXT    NOT NULL,
    content_type     TEXT,
    body             BLOB    NOT NULL,
    body_sha256      BLOB    NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN
                         ('pending', 'processing', 'retry', 'processed', 'dead_letter', 'ignored')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT,
    locked_until     TEXT,
    last_error       TEXT,
    dedupe_conflicts INTEGER NOT NULL DEFAULT 0,
    received_at      TEXT    NOT NULL,
    processed_at     TEXT,
    UNIQUE (integration, event_id)
);

CREATE INDEX inbox_events_due ON inbox_events (next_attempt_at) WHERE status IN ('pending', 'retry');
CREATE INDEX inbox_events_status ON inbox_events (integration, status);

CREATE TABLE signature_nonces (
    integration TEXT NOT NULL,
    digest      BLOB NOT NULL,
    expires_at  TEXT NOT NULL,
    PRIMARY KEY (integration, digest)
);
CREATE INDEX signature_nonces_expiry ON signature_nonces (expires_at);
