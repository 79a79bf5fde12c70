"""The SQLite state's schema: its tables (`agent.state.db` keeps them), made when missing.
`TABLES` names them, to tell the agent's database from one something else made."""

from __future__ import annotations

import re
from typing import Final

SCHEMA_VERSION: Final = 2  # 2: resume_points
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS logs (
    key TEXT PRIMARY KEY,            -- directory + application log name
    path TEXT NOT NULL,
    dev INTEGER, ino INTEGER,
    bytes_read INTEGER NOT NULL DEFAULT 0,
    finished INTEGER NOT NULL DEFAULT 0,  -- complete and every terminal event emitted
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS emitted (
    run_id TEXT NOT NULL,
    event_key TEXT NOT NULL,         -- START, END, or RUNNING@<eventTime>
    app_key TEXT NOT NULL,
    job_name TEXT NOT NULL,
    event_type TEXT NOT NULL,
    event_time TEXT NOT NULL,
    PRIMARY KEY (run_id, event_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS emitted_app ON emitted (app_key);
CREATE TABLE IF NOT EXISTS stops (
    app_id TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS verdicts (
    exec_id TEXT PRIMARY KEY,        -- one run of `lineage-agent exec` (spark.lineageAgent.exec)
    status INTEGER NOT NULL,         -- the command's exit status (128 + N: killed by signal N)
    signal TEXT,
    stderr_tail TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    execution TEXT NOT NULL,         -- the Spark application id (name kept for old files)
    run_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    digest TEXT NOT NULL,
    transport TEXT NOT NULL,
    outcome TEXT NOT NULL,           -- delivered | dropped | unconfirmed
    reason TEXT
);
CREATE INDEX IF NOT EXISTS ledger_execution ON ledger (execution);
CREATE TABLE IF NOT EXISTS resume_points (
    directory TEXT PRIMARY KEY,      -- a followed directory on a store (its URL)
    after TEXT NOT NULL,             -- its listing starts after this name (`storewatch`)
    updated REAL NOT NULL
);
"""


TABLES = tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))
