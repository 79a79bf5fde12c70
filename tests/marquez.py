"""A Marquez-like OpenLineage server on loopback: it takes events as Marquez 0.51 does and
gives them back from `GET /api/v1/events/lineage` re-serialized the way Marquez does.

What Marquez does, read in its source (MarquezProject/marquez, api/src/main/java/marquez/):
* `service/models/LineageEvent.java`: a POSTed event is parsed into typed classes; every
  property a class declares is written back, null when the event had none (`job.facets.sql`,
  `run.facets.nominalTime`, a dataset's `inputFacets`, a schema field's `description`, ...).
  Facets and properties it does not declare are kept as they came (`@JsonAnySetter`).
* `MarquezApp.java` and `common/Utils.java`: the API's ObjectMapper writes nulls (no
  NON_NULL inclusion) and dates as text; a ZonedDateTime is parsed into UTC and written by
  Jackson's ZonedDateTimeSerializer, which uses ISO_OFFSET_DATE_TIME: `…T09:26:53.16Z` for
  `.160Z`, no fraction when it is zero, `Z` for UTC. Parsed so: `eventTime` and
  `nominalTime`'s `nominalStartTime` / `nominalEndTime`.
* `api/OpenLineageResource.java` and `db/OpenLineageDao.java`: `after` (inclusive, default
  1970) and `before` (exclusive, default 2030) bound eventTime, `sortDirection` asc | desc
  (default desc), `limit` (default 100, >= 0), `offset` (>= 0); the answer is
  `{"events": [...], "totalCount": N}`, ordered by eventTime alone. PostgreSQL gives equal
  times in no promised order; this server shuffles them on every request, so a client that
  pages by offset through them skips and repeats events.

`stored` holds the events as received, in arrival order; a test may change one there (the
server "tampering") before reading back. `answer_with` makes every GET answer a fixed status
and body, and `fail_from` every GET from that one on (1 is the first) answer 503, for the
error paths.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import random
import re
import sys
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

LINEAGE_PATH = "/api/v1/lineage"
EVENTS_PATH = "/api/v1/events/lineage"

# The properties each class of Marquez's LineageEvent model declares, and the class of each
# one's value: "time" is a date-time it parses, "[x]" a list of x, "{x}" a map of x, None a
# value kept as it came.
_BASE = {"_producer": None, "_schemaURL": None}
MODEL: dict[str, dict[str, str | None]] = {
    "event": {
        "eventType": None,
        "eventTime": "time",
        "run": "run",
        "job": "job",
        "inputs": "[dataset]",
        "outputs": "[dataset]",
        "producer": None,
        "schemaURL": None,
    },
    "run": {"runId": None, "facets": "runFacets"},
    "runFacets": {"nominalTime": "nominalTime", "parent": "parent"},
    "nominalTime": {**_BASE, "nominalStartTime": "time", "nominalEndTime": "time"},
    "parent": {**_BASE, "run": "runLink", "job": "jobLink"},
    "runLink": {"runId": None},
    "jobLink": {"namespace": None, "name": None},
    "job": {"namespace": None, "name": None, "facets": "jobFacets"},
    "jobFacets": {
        "documentation": "documentation",
        "sourceCodeLocation": "sourceCodeLocation",
        "sql": "sql",
        "jobType": "jobType",
    },
    "documentation": {**_BASE, "description": None},
    "sourceCodeLocation": {**_BASE, "type": None, "url": None},
    "sql": {**_BASE, "query": None},
    "jobType": {**_BASE, "processingType": None, "integration": None, "jobType": None},
    "dataset": {
        "namespace": None,
        "name": None,
        "facets": "datasetFacets",
        "inputFacets": None,
        "outputFacets": None,
    },
    "datasetFacets": {
        "documentation": "documentation",
        "schema": "schema",
        "lifecycleStateChange": "lifecycleStateChange",
        "dataSource": "dataSource",
        "columnLineage": "columnLineage",
        "symlinks": "symlinks",
        "description": None,
    },
    "schema": {**_BASE, "fields": "[schemaField]"},
    "schemaField": {"name": None, "type": None, "description": None},
    "symlinks": {**_BASE, "identifiers": "[symlink]"},
    "symlink": {"namespace": None, "name": None, "type": None},
    "dataSource": {**_BASE, "name": None, "uri": None},
    "lifecycleStateChange": {**_BASE, "lifecycleStateChange": None},
    "columnLineage": {**_BASE, "fields": "{outputColumn}"},
    "outputColumn": {
        "inputFields": "[inputField]",
        "transformationDescription": None,
        "transformationType": None,
    },
    "inputField": {"namespace": None, "name": None, "field": None},
}

_TIME = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)?", re.IGNORECASE
)


def instant(text: str) -> tuple[datetime, int]:
    """A date-time as Marquez's FlexibleDateTimeDeserializer reads it: (UTC second, nanos);
    without an offset it takes the server's zone, UTC here."""
    found = _TIME.fullmatch(text)
    if found is None:
        raise ValueError(f"not a date-time: {text!r}")
    whole, fraction, offset = found.groups()
    moment = datetime.fromisoformat(whole + (offset or "Z").upper().replace("Z", "+00:00"))
    return moment.astimezone(UTC), int((fraction or "").ljust(9, "0"))


def java_offset_date_time(moment: datetime, nanos: int = 0) -> str:
    """What Java's DateTimeFormatter.ISO_OFFSET_DATE_TIME writes for a UTC time: seconds
    always, the nano-of-second fraction without its trailing zeros (none when zero), `Z`."""
    fraction = f"{nanos:09d}".rstrip("0")
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{fraction}" if fraction else "") + "Z"


def marquez_form(event: dict[str, Any]) -> dict[str, Any]:
    """The event as Marquez's GET answers it: declared properties first, null when absent,
    parsed times re-written, everything else as it came."""
    written = _written(event, "event")
    assert isinstance(written, dict)
    return written


def _written(value: Any, kind: str | None) -> Any:
    if value is None or kind is None:
        return value
    if kind == "time":
        return java_offset_date_time(*instant(value))
    if kind.startswith("["):
        return [_written(item, kind[1:-1]) for item in value]
    if kind.startswith("{"):
        return {name: _written(item, kind[1:-1]) for name, item in value.items()}
    declared = MODEL[kind]
    result = {name: _written(value.get(name), of) for name, of in declared.items()}
    result.update((name, item) for name, item in value.items() if name not in declared)
    return result


class _Server(ThreadingHTTPServer):
    """A client that hangs up early (the read-back stops at the first 500) is no error here."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class MarquezLike:
    """The server; use as a context manager. `url` is what the agent ships to."""

    def __init__(self, *, seed: int = 0) -> None:
        self.stored: list[dict[str, Any]] = []
        #: Every GET's query parameters, in order.
        self.queries: list[dict[str, str]] = []
        self.answer_with: tuple[int, bytes] | None = None
        self.fail_from: int | None = None
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def url(self) -> str:
        return self.base_url + LINEAGE_PATH

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # -- Marquez's two endpoints -----------------------------------------------------------

    def receive(self, body: bytes) -> int:
        """POST /api/v1/lineage: 201 and the event stored, or 400 for what Marquez refuses."""
        try:
            event = json.loads(body)
            instant(event["eventTime"])
            if not (event["run"]["runId"] and event["job"]["namespace"] and event["job"]["name"]):
                return 400
        except (ValueError, KeyError, TypeError):
            return 400
        with self._lock:
            self.stored.append(event)
        return 201

    def page(self, query: dict[str, str]) -> tuple[int, bytes]:
        """GET /api/v1/events/lineage with Marquez's parameters and defaults."""
        self.queries.append(query)
        if self.answer_with is not None:
            return self.answer_with
        if self.fail_from is not None and len(self.queries) >= self.fail_from:
            return 503, b'{"code":503,"message":"Service Unavailable"}'
        try:
            before = instant(query.get("before", "2030-01-01T00:00:00+00:00"))
            after = instant(query.get("after", "1970-01-01T00:00:00+00:00"))
            direction = query.get("sortDirection", "desc").lower()
            limit = int(query.get("limit", "100"))
            offset = int(query.get("offset", "0"))
            if direction not in ("asc", "desc") or limit < 0 or offset < 0:
                raise ValueError(query)
        except ValueError:
            return 400, b'{"code":400,"message":"bad query parameters"}'
        with self._lock:
            stored = [(instant(e["eventTime"]), e) for e in self.stored]
        chosen = [(moment, e) for moment, e in stored if after <= moment < before]
        # By time alone; among equal times, an order that changes from request to request.
        self._random.shuffle(chosen)
        chosen.sort(key=lambda pair: pair[0], reverse=direction == "desc")
        events = [marquez_form(e) for _, e in chosen[offset : offset + limit]]
        body = {"events": events, "totalCount": len(chosen)}
        return 200, json.dumps(body).encode()


def _handler(server: MarquezLike) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                body = gzip.decompress(body)
            status = server.receive(body) if self.path == LINEAGE_PATH else 404
            self._answer(status, b"")

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path != EVENTS_PATH:
                self._answer(404, b'{"code":404,"message":"HTTP 404 Not Found"}')
                return
            query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
            self._answer(*server.page(query))

        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(ConnectionError):
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the tests look at `stored` and `queries`, not at a log

    return Handler
