-- The latest purge, which every receiver reads each second to forget the keys a purge may have
-- deleted (src/inbox/recent.rs). Without it that read scans the whole audit trail whenever the
-- newest rows are replays; with it, one entry per purge and a read of the last.
CREATE INDEX dlq_audit_purges ON dlq_audit (id) WHERE action = 'purge';
