"""A whole deadline for each request of a blocking `requests` session (WebHDFS'), where
`requests` and urllib3 bound each read only: a server that sends its answer a byte at a time
(its status line, its headers or its body) would otherwise hold a request for ever.

`DeadlineAdapter`, mounted on the session, connects within min(CONNECT_TIMEOUT, deadline),
waits for each read at most min(READ_TIMEOUT, deadline) (`calls`' timeouts), and reads the
whole body before it returns; a watchdog timer shuts the request's socket down once
`calls.deadline()` seconds have passed since it was sent, which ends the read blocked on it,
and the request fails as the asynchronous stores' do (`calls.late`). A redirect (WebHDFS'
OPEN, from the NameNode to a DataNode) is a request of its own, with a deadline of its own."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from agent.spark.eventlog.storage import calls


class _Watch:
    """The sockets one request uses, shut down when its deadline passes."""

    def __init__(self, seconds: float) -> None:
        self.sockets: list[socket.socket] = []
        self.fired = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watch:
        _current.watch = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _current.watch = None

    def add(self, sock: socket.socket | None) -> None:
        with self._lock:
            if sock is None or sock in self.sockets:
                return
            self.sockets.append(sock)
            if not self.fired:
                return
        _shut(sock)  # it came after the deadline

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            sockets = list(self.sockets)
        for sock in sockets:
            _shut(sock)


_current = threading.local()  # the watch of the request this thread sends, if any


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _watched(sock: socket.socket | None) -> None:
    watch: _Watch | None = getattr(_current, "watch", None)
    if watch is not None:
        watch.add(sock)


class _Watched:
    """A urllib3 connection whose socket, new or kept alive, joins the current watch."""

    sock: socket.socket | None

    def _new_conn(self) -> socket.socket:
        sock: socket.socket = super()._new_conn()  # type: ignore[misc]
        _watched(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _watched(self.sock)  # None on a new connection: `_new_conn` adds it
        super().request(*args, **kwargs)  # type: ignore[misc]


class _Connection(_Watched, HTTPConnection):
    pass


class _SecureConnection(_Watched, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _SecurePool(HTTPSConnectionPool):
    ConnectionCls = _SecureConnection


class DeadlineAdapter(HTTPAdapter):
    """Every request of the session bounded as a whole; see the module docstring."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _SecurePool}

    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        seconds = calls.deadline()
        kwargs["timeout"] = (min(calls.CONNECT_TIMEOUT, seconds), min(calls.READ_TIMEOUT, seconds))
        kwargs["stream"] = True  # the body is read here, under the watch
        with _Watch(seconds) as watch:
            try:
                response = super().send(request, *args, **kwargs)
                response.content  # noqa: B018 (reads the whole body, kept on the response)
            except Exception:
                if watch.fired:
                    raise calls.late() from None
                raise
            if watch.fired:  # a body without a length ends where the socket was shut
                response.close()
                raise calls.late()
        return response
