"""The HTTP server under /metrics and /healthz: a thread per connection, bounded.

wsgiref's threading server gives every connection a thread that waits for its request as
long as the client likes, so a local user holding idle connections to the endpoint (it has
no authentication; loopback keeps out only other hosts) could take a thread and a
descriptor each until the agent had none left for its event logs. So:

* a connection that has not sent its request within `request_timeout` seconds, or does not
  take the answer within it, is closed;
* at most `max_connections` are open at once. One more closes the connection that has waited
  longest without a request, so a scrape still gets through; when every connection is in a
  request, the newcomer is closed at once.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

Request = socket.socket


class ScrapeServer(ThreadingMixIn, WSGIServer):
    """The threading WSGI server with the limits above (instance attributes may lower them)."""

    daemon_threads = True
    # socketserver's default backlog of 5 leaves a connection burst's SYNs unanswered, and
    # their retries come a second and more later: a scrape behind a burst would wait that.
    request_queue_size = 128
    request_timeout = 10.0
    max_connections = 16

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._open = 0
        self._waiting: dict[Request, None] = {}  # no request line yet; oldest first

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            if self._open >= self.max_connections:
                if not self._waiting:
                    self.shutdown_request(request)  # every slot is serving a request
                    return
                oldest = next(iter(self._waiting))
                del self._waiting[oldest]
                # Wakes its thread (its read returns the end), which then frees the slot.
                with contextlib.suppress(OSError):
                    oldest.shutdown(socket.SHUT_RDWR)
            self._open += 1
            self._waiting[request] = None
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    @property
    def connections(self) -> int:
        """The connections taken on and not yet ended (never above `max_connections`)."""
        return self._open

    def request_arrived(self, request: Request) -> None:
        """The connection sent its request line: it is no longer idle."""
        with self._lock:
            self._waiting.pop(request, None)

    def _release(self, request: Request) -> None:
        with self._lock:
            self._open -= 1
            self._waiting.pop(request, None)


class QuietHandler(WSGIRequestHandler):
    """No log line per scrape; the server's request timeout on every connection."""

    server: ScrapeServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)  # reads and writes alike

    def parse_request(self) -> bool:
        self.server.request_arrived(self.request)
        return super().parse_request()

    def handle(self) -> None:
        # A client that timed out or went away is no error of the agent's.
        with contextlib.suppress(TimeoutError, ConnectionError):
            super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not worth a log line each."""


class ScrapeServer6(ScrapeServer):
    address_family = socket.AF_INET6
