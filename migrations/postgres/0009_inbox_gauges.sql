-- The inbox gauges' figures, shared by the worker processes of one database (src/inbox/gauges.rs).
-- The process whose turn it is (the figures here are older than most of an interval) reads the
-- backlog and writes it here; the others export what it wrote. So N worker pods cost PostgreSQL
-- one backlog read per interval instead of N, and every pod still exports the same figures.
-- One row, created by the first turn; `figures` is JSON text, written and read whole.
CREATE TABLE inbox_gauges (
    id      SMALLINT PRIMARY KEY CHECK (id = 1),
    read_at TIMESTAMPTZ NOT NULL,
    figures TEXT
);
