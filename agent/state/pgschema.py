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
    # Terms (one per lease token): the events claimed under each and how many of them got an
    # outcome; agents' last signs of life, to tell a silent agent's terms.
    """
    CREATE TABLE terms (
        app_key TEXT NOT NULL,
        token BIGINT NOT NULL,
        owner TEXT NOT NULL,
        claimed BIGINT NOT NULL DEFAULT 0,
        resolved BIGINT NOT NULL DEFAULT 0,
        adopted_by TEXT,
        PRIMARY KEY (app_key, token)
    );
    CREATE TABLE agents (
        owner TEXT PRIMARY KEY,
        seen TIMESTAMPTZ NOT NULL
    );
    """,
    # Where the listing of each followed directory on a store starts (`storewatch`).
    """
    CREATE TABLE resume_points (
        directory TEXT PRIMARY KEY,
        after TEXT NOT NULL,
        updated DOUBLE PRECISION NOT NULL
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


#: A claim in one statement (see `PostgresState.claim`): the lease check with its row locked,
#: then the inserts, counted in the lease's term; a `fence` row in the answer says the lease
#: was held. A claim under a lease that expired with nobody taking it (the server was away)
#: renews it too, so that no other agent takes the application between the claim and the
#: owner's next heartbeat (which renews its local deadline); an unexpired one is left as the
#: heartbeat set it.
CLAIM = """
WITH fence AS (
    UPDATE leases SET expires = CASE WHEN expires <= now()
        THEN now() + make_interval(secs => %(lease)s) ELSE expires END
    WHERE %(fenced)s AND app_key = %(app_key)s AND owner = %(owner)s AND token = %(token)s
    RETURNING 1
), inserted AS (
    INSERT INTO emitted
    SELECT run, key, %(app_key)s, job, type, time
    FROM unnest(%(runs)s::text[], %(keys)s::text[], %(jobs)s::text[], %(types)s::text[],
                %(times)s::text[]) WITH ORDINALITY AS e(run, key, job, type, time, n)
    WHERE NOT %(fenced)s OR EXISTS (SELECT 1 FROM fence)
    ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING run_id, event_key
), counted AS (
    UPDATE terms SET claimed = claimed + (SELECT count(*) FROM inserted)
    WHERE %(fenced)s AND app_key = %(app_key)s AND token = %(token)s
    AND EXISTS (SELECT 1 FROM fence)
)
SELECT 'fence', NULL FROM fence UNION ALL SELECT run_id, event_key FROM inserted
"""


#: An agent's sign of life and its lease renewals, in one transaction (`heartbeat`).
HEARTBEAT = (
    "INSERT INTO agents VALUES (%(owner)s, now()) "
    "ON CONFLICT (owner) DO UPDATE SET seen = excluded.seen",
    # Events with an outcome since the last heartbeat, per term of this agent's.
    "UPDATE terms t SET resolved = t.resolved + w.n "
    "FROM unnest(%(w_keys)s::text[], %(w_tokens)s::bigint[], %(w_counts)s::bigint[]) "
    "AS w(key, token, n) WHERE t.app_key = w.key AND t.token = w.token "
    "AND t.owner = %(owner)s",
)
#: The leases renewed: those still this agent's with the token it holds. One that expired
#: with nobody taking it is renewed too: the token moves on at every change of owner, so an
#: unchanged one proves nothing was claimed by another agent meanwhile.
RENEW = (
    "UPDATE leases l SET expires = now() + make_interval(secs => %(lease)s) "
    "FROM unnest(%(keys)s::text[], %(tokens)s::bigint[]) AS h(key, token) "
    "WHERE l.app_key = h.key AND l.token = h.token AND l.owner = %(owner)s "
    "RETURNING l.app_key"
)
#: Applications whose lease expired or was given up before their log was finished.
ORPHANS = (
    "SELECT l.app_key FROM leases l LEFT JOIN logs g ON g.key = l.app_key "
    "WHERE l.expires <= now() AND g.finished IS NOT TRUE"
)
#: The ended terms of agents silent for a lease's length whose events lack an outcome: this
#: agent takes them over (once: the row is marked) and counts them.
ADOPT = (
    "UPDATE terms t SET adopted_by = %(owner)s WHERE t.adopted_by IS NULL "
    "AND t.claimed > t.resolved AND t.owner <> %(owner)s "
    "AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.owner = t.owner "
    "AND a.seen > now() - make_interval(secs => %(lease)s)) "
    "AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.app_key = t.app_key "
    "AND l.token = t.token AND l.expires > now()) "
    "RETURNING t.app_key, t.token, t.owner, t.claimed - t.resolved"
)
#: Stops recorded in the last hour (by the recording agent's clock, so an hour of skew is
#: tolerated): every live agent sees a stop within a heartbeat, and one that starts reads
#: them all, so each beat carries only the recent ones, however many piled up.
RECENT_STOPS = (
    "SELECT app_id, reason, requested_by FROM stops WHERE time > EXTRACT(EPOCH FROM now()) - 3600"
)
#: Ended terms with nothing left to account for; agents silent for a day.
PRUNE = (
    "DELETE FROM terms t WHERE (t.claimed = t.resolved OR t.adopted_by IS NOT NULL) "
    "AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.app_key = t.app_key "
    "AND l.token = t.token AND l.expires > now())",
    "DELETE FROM agents WHERE seen < now() - interval '1 day'",
)
