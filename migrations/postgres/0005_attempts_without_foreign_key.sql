-- The foreign key from delivery_attempts to inbox_events cost every recorded attempt a
-- referential-integrity trigger (a lookup and a KEY SHARE lock on the row the same statement had
-- just updated): about a fifth of the completion statement's time at full load. It guarded
-- nothing the code does not: an attempt is only written in the transaction that updated its
-- event, and both paths that delete events (retention, dead-letter purge) delete their attempts
-- in the same transaction. See docs/performance.md, round 5.
ALTER TABLE delivery_attempts DROP CONSTRAINT IF EXISTS delivery_attempts_event_row_fkey;
