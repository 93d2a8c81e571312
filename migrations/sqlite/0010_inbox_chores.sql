-- Same shape as PostgreSQL's 0011; timestamps are RFC 3339 text in UTC, which sorts correctly.
CREATE TABLE inbox_chores (
    chore    TEXT PRIMARY KEY,
    taken_at TEXT NOT NULL
);
