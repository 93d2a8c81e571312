-- Same indexes as PostgreSQL's 0010: retention walks only the finished events it changes.
CREATE INDEX IF NOT EXISTS inbox_events_finished
    ON inbox_events (integration, COALESCE(processed_at, received_at))
    WHERE status IN ('processed', 'ignored');
CREATE INDEX IF NOT EXISTS inbox_events_unpurged
    ON inbox_events (integration, COALESCE(processed_at, received_at))
    WHERE status IN ('processed', 'ignored') AND body_purged_at IS NULL;
DROP INDEX IF EXISTS inbox_events_status;
