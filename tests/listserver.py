"""An S3-compatible LIST server on loopback that holds no objects and answers for as many as
asked: `running_listing(objects)` serves ListObjectsV2 over any bucket and prefix, `objects`
single-file Spark logs named `app-20200101000000-NNNNNNN` written in 2020 (past any
horizon), in pages of `max-keys` with continuation tokens, as a bucket of a busy platform
answers. Made for the store benchmark: moto stores each object and takes minutes per
hundred thousand, where this answers a million in the time of its pages. `.pages` counts the
LIST pages served. It answers only LIST requests (the benchmark makes no other).

`S3Handler` (an XML answer, no request log) and `serving` (a server in a thread) serve the
other S3-compatible test endpoints too (`tests.endless_store`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'
NS = "http://s3.amazonaws.com/doc/2006-03-01/"
#: One object of a ListBucketResult, last modified in 2020.
OBJECT = (
    "<Contents><Key>{key}</Key><LastModified>2020-01-01T00:00:00.000Z</LastModified>"
    '<ETag>"d41d8cd98f00b204e9800998ecf8427e"</ETag><Size>{size}</Size>'
    "<StorageClass>STANDARD</StorageClass></Contents>"
)
_Server = TypeVar("_Server", bound=ThreadingHTTPServer)


class ListServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, objects: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.objects = objects
        self.pages = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def page(self, bucket: str, prefix: str, start: int, size: int) -> bytes:
        end = min(start + size, self.objects)
        self.pages += 1
        keys = "".join(
            OBJECT.format(key=f"{prefix}app-20200101000000-{n:07d}", size=512)
            for n in range(start, end)
        )
        truncated = end < self.objects
        token = f"<NextContinuationToken>{end}</NextContinuationToken>" if truncated else ""
        return (
            f'{HEAD}<ListBucketResult xmlns="{NS}"><Name>{bucket}</Name>'
            f"<Prefix>{prefix}</Prefix><KeyCount>{end - start}</KeyCount>"
            f"<MaxKeys>{size}</MaxKeys><Delimiter>/</Delimiter>"
            f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{keys}{token}"
            "</ListBucketResult>"
        ).encode()


class S3Handler(BaseHTTPRequestHandler):
    """Answers in XML, as S3 does, and logs no request (a listing makes thousands)."""

    protocol_version = "HTTP/1.1"

    def send_xml(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        """Quiet."""


class _Handler(S3Handler):
    server: ListServer

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if query.get("list-type") != "2":
            self.send_error(501, "only ListObjectsV2")
            return
        body = self.server.page(
            parts.path.strip("/"),
            query.get("prefix", ""),
            int(query.get("continuation-token", "0")),
            min(int(query.get("max-keys", "1000")), 1000),
        )
        self.send_xml(200, body)


@contextmanager
def serving(server: _Server) -> Iterator[_Server]:
    """`server` answering in a thread, stopped and closed on the way out."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@contextmanager
def running_listing(objects: int) -> Iterator[ListServer]:
    """The server on a free loopback port in a thread, stopped on the way out."""
    with serving(ListServer(objects)) as server:
        yield server
