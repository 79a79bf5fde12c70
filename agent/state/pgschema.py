"""The PostgreSQL state's schema, one migration per version, and its claim statement."""

from __future__ import annotations

#: The schema, one entry per version: entry i migrates version i to version i + 1.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE logs (
        key TEXT PRIMARY KEY,
        path TEXT NOT NULL,
        dev BIGINT, ino BIGINT,
        bytes_read BIGINT NOT NULL DEFAULT 0,
        finished BOOLEAN NOT NULL DEFAULT FALSE,
        updated DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE emitted (
        run_id TEXT NOT NULL,
        event_key TEXT NOT NULL,
        app_key TEXT NOT NULL,
        job_name TEXT NOT NULL,
        event_type TEXT NOT NULL,
        event_time TEXT NOT NULL,
        PRIMARY KEY (run_id, event_key)
    );
    CREATE INDEX emitted_app ON emitted (app_key);
    CREATE TABLE stops (
        app_id TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        requested_by TEXT NOT NULL,
        time DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE verdicts (
        exec_id TEXT PRIMARY KEY,
        status INTEGER NOT NULL,
        signal TEXT,
        stderr_tail TEXT NOT NULL,
        requested_by TEXT NOT NULL,
        time DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE ledger (
        id BIGSERIAL PRIMARY KEY,
        time DOUBLE PRECISION NOT NULL,
        execution TEXT NOT NULL,
        run_id TEXT NOT NULL,
        event_type TEXT NOT NULL,
        digest TEXT NOT NULL,
        transport TEXT NOT NULL,
        outcome TEXT NOT NULL,
        reason TEXT
    );
    CREATE INDEX ledger_execution ON ledger (execution);
    CREATE TABLE leases (
        app_key TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        token BIGINT NOT NULL,
        expires TIMESTAMPTZ NOT NULL
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


#: A claim in one statement (see `PostgresState.claim`): the lease check with its row locked,
#: then the inserts; a `fence` row in the answer says the lease was held.
CLAIM = """
WITH fence AS (
    SELECT 1 FROM leases WHERE %(fenced)s AND app_key = %(app_key)s AND owner = %(owner)s
    AND token = %(token)s AND expires > now() FOR UPDATE
), inserted AS (
    INSERT INTO emitted
    SELECT run, key, %(app_key)s, job, type, time
    FROM unnest(%(runs)s::text[], %(keys)s::text[], %(jobs)s::text[], %(types)s::text[],
                %(times)s::text[]) WITH ORDINALITY AS e(run, key, job, type, time, n)
    WHERE NOT %(fenced)s OR EXISTS (SELECT 1 FROM fence)
    ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING run_id, event_key
)
SELECT 'fence', NULL FROM fence UNION ALL SELECT run_id, event_key FROM inserted
"""
