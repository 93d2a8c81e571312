-- Periodic work that one worker process does for all the processes on a database, and when it
-- was last taken (src/inbox/chores.rs): the retention janitor's passes (until this migration every
-- worker process made its own pass every period, each walking the same rows) and the inbox
-- gauges' reads (whose turn migration 0009 kept on the row of `inbox_gauges`, which now holds
-- only the figures). A chore goes to the first process to find it due; nobody holds it.
CREATE TABLE inbox_chores (
    chore    TEXT PRIMARY KEY,
    taken_at TIMESTAMPTZ NOT NULL
);
