-- Who replayed or purged dead letters, when, and which events: written in the same transaction
-- as the change, so that no replay or purge exists without its row (and no row without it).
CREATE TABLE dlq_audit (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           TEXT    NOT NULL,
    -- The OS user of `hookgate dlq`, or the Kubernetes user of `kubectl hookgate dlq`.
    actor        TEXT    NOT NULL,
    actor_source TEXT    NOT NULL CHECK (actor_source IN ('os_user', 'kubernetes')),
    action       TEXT    NOT NULL CHECK (action IN ('replay', 'purge')),
    -- The selection as given: `ids 3, 5`, `integration t/a since ...`, `all`.
    selector     TEXT    NOT NULL,
    event_count  INTEGER NOT NULL,
    -- [{"id", "integration", "event_id"}, ...], the first 10000 of event_count.
    events       TEXT    NOT NULL
);
CREATE INDEX dlq_audit_at ON dlq_audit (at);
