-- One row per accepted event. The unique (integration, event_id) is the dedupe key.
CREATE TABLE inbox_events (
    id               BIGSERIAL PRIMARY KEY,
    integration      TEXT        NOT NULL,
    event_id         TEXT        NOT NULL,
    event_type       TEXT,
    scheme           TEXT        NOT NULL,
    key_id           TEXT        NOT NULL,
    signed_at        TIMESTAMPTZ,
    headers          JSONB       NOT NULL,
    content_type     TEXT,
    body             BYTEA       NOT NULL,
    body_sha256      BYTEA       NOT NULL,
    status           TEXT        NOT NULL CHECK (status IN
                         ('pending', 'processing', 'retry', 'processed', 'dead_letter', 'ignored')),
    attempts         BIGINT      NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ,
    locked_until     TIMESTAMPTZ,
    last_error       TEXT,
    dedupe_conflicts BIGINT      NOT NULL DEFAULT 0,
    received_at      TIMESTAMPTZ NOT NULL,
    processed_at     TIMESTAMPTZ,
    UNIQUE (integration, event_id)
);

-- Workers claim due rows by next_attempt_at; only pending/retry rows are ever claimed.
CREATE INDEX inbox_events_due ON inbox_events (next_attempt_at) WHERE status IN ('pending', 'retry');
CREATE INDEX inbox_events_status ON inbox_events (integration, status);

-- Digests of signatures seen recently: catches a captured request re-sent with a new, unsigned id.
CREATE TABLE signature_nonces (
    integration TEXT        NOT NULL,
    digest      BYTEA       NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (integration, digest)
);
CREATE INDEX signature_nonces_expiry ON signature_nonces (expires_at);
