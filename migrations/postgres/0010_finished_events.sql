-- Retention walks only the events it changes (src/inbox/retention.rs). Until this migration it
-- filtered `inbox_events_status (integration, status)` on the instant an event finished, which that
-- index does not hold, so each of its statements read every event retention keeps (a sequential
-- scan: 0.5-0.6 s per statement per 2 million events, docs/performance.md round 38), every pass,
-- in every worker process. These two hold finished events by the instant they finished: the
-- purge walks the ones that still have a body, the deletion all of them.
-- `inbox_events_status` had no other reader. It took an entry at every insert, claim and
-- completion; these take entries at the completion only, so the hot path writes fewer.
-- Building them holds writes to the inbox until they are built; README ("Upgrading") shows how to
-- build them beforehand without that, which this migration then keeps.
CREATE INDEX IF NOT EXISTS inbox_events_finished
    ON inbox_events (integration, (COALESCE(processed_at, received_at)))
    WHERE status IN ('processed', 'ignored');
CREATE INDEX IF NOT EXISTS inbox_events_unpurged
    ON inbox_events (integration, (COALESCE(processed_at, received_at)))
    WHERE status IN ('processed', 'ignored') AND body_purged_at IS NULL;
DROP INDEX IF EXISTS inbox_events_status;
