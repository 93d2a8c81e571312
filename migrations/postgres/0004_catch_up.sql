-- Catch-up (spec.catchUp): how each event arrived, and each integration's last catch-up run.
ALTER TABLE inbox_events ADD COLUMN source TEXT NOT NULL DEFAULT 'webhook'
    CHECK (source IN ('webhook', 'catch_up'));
-- For catch_up rows: the Secret and key of the API credential (`name/key`), never its value.
ALTER TABLE inbox_events ADD COLUMN source_credential TEXT;

-- One row per integration with spec.catchUp, written by the worker that ran the pass and read by
-- the controller for status (lastCatchUpAt, catchUpMissing, the CatchUpFailing condition).
CREATE TABLE catch_up_runs (
    integration          TEXT        PRIMARY KEY,
    -- The last run that ended, whatever its outcome; replicas skip a run that is not due.
    last_run_at          TIMESTAMPTZ,
    -- The last run that completed (lastCatchUpAt).
    last_success_at      TIMESTAMPTZ,
    last_missing         BIGINT      NOT NULL DEFAULT 0,
    missing_total        BIGINT      NOT NULL DEFAULT 0,
    consecutive_failures BIGINT      NOT NULL DEFAULT 0,
    -- A fixed reason label and a message that never holds the credential.
    last_error_reason    TEXT,
    last_error           TEXT,
    -- SQLite only: a lease that makes one process run an integration's pass at a time
    -- (PostgreSQL uses a session advisory lock instead, released if the process dies).
    locked_until         TIMESTAMPTZ,
    lock_token           TEXT
);
