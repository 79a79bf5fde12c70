"""Event logs whose environment tries to steer the agent's liveness lookups, and a loopback
server that counts what reaches it: shared by tests/test_liveness_guard.py and the figures.

    python -m tests.hostile_liveness      # requests, paths and Authorization headers received

Each application is a stale in-progress log (its driver not on this node) whose driver host,
ResourceManager web address or AM filter proxy base carries user info, a path and a query
pointing at the counting server; `close_dead` then looks at all of them once, as the daemon
does for stale logs.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent.spark.eventlog.discovery import scan
from agent.spark.follow import liveness
from agent.spark.follow.application import ApplicationLog
from agent.spark.follow.followed import Followed
from agent.spark.translate.options import TranslateOptions

PROXY = "spark.org.apache.hadoop.yarn.server.webproxy.amfilter.AmIpFilter.param.PROXY_URI_BASES"
WEBAPP = "yarn.resourcemanager.webapp.address"


@dataclass
class Counting:
    """A loopback HTTP server answering 404 to everything, recording each request's path
    and Authorization header."""

    requests: list[tuple[str, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        owner = self

        class _Request(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append((self.path, self.headers.get("Authorization")))
                body = b"{}"
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Request)
        self.server.daemon_threads = True
        self.port: int = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def steered(self) -> list[str]:
        """Paths received that carry something the log chose (its path or query)."""
        return [p for p, _ in self.requests if "admin" in p or "?" in p]

    def authorized(self) -> list[str]:
        """Authorization headers received (none may come from a log)."""
        return [a for _, a in self.requests if a]


def hostile_apps(port: int) -> dict[str, dict[str, Any]]:
    """app id -> (Spark properties, Hadoop properties) of the issue's hostile logs."""
    return {
        # The driver's host with user info, a path, a query and a fragment; UI on.
        "app-20261127161443-0001": {
            "spark": {
                "spark.master": "spark://192.0.2.1:7077",
                "spark.driver.host": f"user:secret@127.0.0.1:{port}/admin/x?y=1#",
            },
            "hadoop": {},
        },
        # The ResourceManager's web address with a path and a query.
        "application_1800000000000_0001": {
            "spark": {"spark.master": "yarn", "spark.ui.enabled": "false"},
            "hadoop": {WEBAPP: f"127.0.0.1:{port}/admin/y?z=1"},
        },
        # The AM filter's proxy base with user info, a path and a query.
        "application_1800000000000_0002": {
            "spark": {
                "spark.master": "yarn",
                "spark.ui.enabled": "false",
                PROXY: f"http://user:secret@127.0.0.1:{port}/admin/z?w=1",
            },
            "hadoop": {},
        },
    }


def followed(
    directory: Path,
    app_id: str,
    props: Mapping[str, str],
    hadoop: Mapping[str, str] = {},
) -> Followed:
    """A stale in-progress log of `app_id` with these properties, followed as the daemon
    follows it (nothing on this node holds it open)."""
    logs = directory / app_id
    logs.mkdir(parents=True)
    lines = [
        {"Event": "SparkListenerLogStart", "Spark Version": "4.0.1"},
        {
            "Event": "SparkListenerEnvironmentUpdate",
            "Spark Properties": dict(props),
            "Hadoop Properties": dict(hadoop),
        },
        {
            "Event": "SparkListenerApplicationStart",
            "App Name": "nightly",
            "App ID": app_id,
            "Timestamp": 1_800_000_000_000,
            "User": "spark",
        },
    ]
    (logs / f"{app_id}.inprogress").write_text(
        "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in lines)
    )
    (ref,) = scan(logs)
    log = ApplicationLog(ref, TranslateOptions(namespace="spark"), max_line_bytes=1 << 20)
    log.feed(log.read())
    app = Followed(str(ref.path), log)
    app.last_growth = time.monotonic() - 60
    return app


async def look_once(apps: list[Followed], **options: Any) -> int:
    """One `close_dead` pass over `apps`; how many it ended."""
    ended = await liveness.close_dead(apps, stale_after=1.0, stops=lambda _: None, **options)
    return len(ended)


def main() -> None:
    server = Counting()
    try:
        with tempfile.TemporaryDirectory() as work:
            apps = [
                followed(Path(work), app_id, case["spark"], case["hadoop"])
                for app_id, case in hostile_apps(server.port).items()
            ]
            began = time.monotonic()
            ended = asyncio.run(look_once(apps))
            took = time.monotonic() - began
        print(
            f"applications: {len(apps)}, ended: {ended}, requests: {len(server.requests)}, "
            f"carrying the log's path or query: {len(server.steered())}, "
            f"with an Authorization header: {len(server.authorized())}, {took:.1f} s"
        )
        for path, auth in server.requests[:5]:
            print(f"  GET {path}" + (f"  Authorization: {auth}" if auth else ""))
    finally:
        server.close()


if __name__ == "__main__":
    main()
