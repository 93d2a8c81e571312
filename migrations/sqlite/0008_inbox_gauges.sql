-- Same shape as PostgreSQL's 0009; timestamps are RFC 3339 text in UTC, which sorts correctly.
-- Processes sharing the file (`hookgate worker -f` beside `standalone`) share the figures too.
CREATE TABLE inbox_gauges (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    read_at TEXT NOT NULL,
    figures TEXT
);
