-- The latest purge, which the receiver reads each second to forget the keys a purge may have
-- deleted (src/inbox/recent.rs); without it that read scans the whole audit trail.
CREATE INDEX dlq_audit_purges ON dlq_audit (id) WHERE action = 'purge';
