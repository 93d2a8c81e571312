-- Periodic work that one worker process does for all the processes on a database, and when it
-- was last taken (src/inbox/chores.rs). The retention janitor's passes are the first: until this
-- migration every worker process made its own pass every period, each walking the same rows.
-- A chore goes to the first process to find it due; nobody holds it.
CREATE TABLE inbox_chores (
    chore    TEXT PRIMARY KEY,
    taken_at TIMESTAMPTZ NOT NULL
);
