"""Listings on GCS (fake-gcs-server, which pages as GCS does) and Azure (Azurite) come a page
at a time, each page one LIST request made only once the page before it is taken; and a
WebHDFS request is bounded as a whole: a loopback server that drips its answer a byte at a
time (a real WebHDFS cannot be made to) fails the listing or the read at the deadline, where
the per-read timeouts alone would have waited for ever."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Literal

import pytest

from agent.spark.eventlog import discovery, layout, stores
from agent.spark.eventlog.storage import calls, listings
from tests.emulators import EmulatedStore, running_azurite, running_gcs
from tests.s3server import environment
from tests.test_store_bounds import listed_peak

#: Five single-file logs, in the order every store lists them.
NAMES = [f"local-17954951691{n:02d}" for n in range(5)]
DEADLINE = 1.0  # seconds for a whole request in the drip tests
DRIP = 0.1  # seconds between two bytes of a dripped answer: far within any per-read timeout


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedStore]:
    directory = tmp_path_factory.mktemp("gcs")
    with (
        running_gcs(directory, "paged-logs", server="fake-gcs-server") as server,
        environment(server.env),
    ):
        yield server


@pytest.fixture(scope="module")
def azure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedStore]:
    directory = tmp_path_factory.mktemp("azure")
    with running_azurite(directory, "paged-logs") as server, environment(server.env):
        yield server


@pytest.mark.parametrize("name", ["gcs", "azure"])
def test_a_listing_comes_a_page_at_a_time(
    name: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five logs in pages of two: three pages in the store's order, each one LIST request
    made when it is asked for, not before (the whole listing is never held)."""
    store: EmulatedStore = request.getfixturevalue(name)
    monkeypatch.setattr(listings, "LIST_PAGE", 2)
    for log in NAMES:
        store.put(f"paged/{log}", b"{}\n")
    before = stores.requests()["list"]
    pages = []
    for page in stores.pages(store.url("paged")):
        pages.append([entry.name for entry in page])
        assert stores.requests()["list"] - before == len(pages)
        assert all(entry.size == 3 and entry.mtime_ns > 0 for entry in page)
    assert pages == [NAMES[:2], NAMES[2:4], NAMES[4:]]


@pytest.mark.parametrize("name", ["gcs", "azure"])
def test_a_listing_holds_a_page_not_the_prefix(
    name: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scanning a prefix of many objects past the horizon holds a page of them at a time:
    1,300 objects cost under 100 bytes per object more than 300 (measured: 9 on GCS, 26 on
    Azure; the library's own whole listing, fsspec's `ls`, cost 2,950 and 8,180). Pages of
    100 names, so that a few hundred objects make pages."""
    store: EmulatedStore = request.getfixturevalue(name)
    monkeypatch.setattr(listings, "LIST_PAGE", 100)
    counts = {"many-small": 300, "many-large": 1300}
    with ThreadPoolExecutor(16) as pool:
        for prefix, count in counts.items():
            keys = (f"{prefix}/app-20261127000000-{n:05d}" for n in range(count))
            list(pool.map(lambda key: store.put(key, b""), keys))
    for prefix in counts:  # the client made, and each listing's paths taken, once
        listed_peak(store.url(prefix))
    small = listed_peak(store.url("many-small"))
    large = listed_peak(store.url("many-large"))
    assert (large - small) / (counts["many-large"] - counts["many-small"]) < 100, (small, large)


def test_gcs_starts_after_a_name(gcs: EmulatedStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """On GCS a listing from a resume point asks for the names from it on (`startOffset`)
    and gives those after it only: one request where from the start it takes three."""
    monkeypatch.setattr(listings, "LIST_PAGE", 2)
    for log in NAMES:
        gcs.put(f"resumed/{log}", b"{}\n")
    assert stores.resumable(gcs.url("resumed"))
    before = stores.requests()["list"]
    listed = [e.name for page in stores.pages(gcs.url("resumed"), NAMES[3]) for e in page]
    assert listed == NAMES[4:]
    assert stores.requests()["list"] - before == 1


def test_azure_lists_from_the_start(azure: EmulatedStore) -> None:
    """Azure cannot start a listing after a name: it is not resumable, and a start given is
    not taken (every name is listed)."""
    for log in NAMES:
        azure.put(f"whole/{log}", b"{}\n")
    assert not stores.resumable(azure.url("whole"))
    listed = [e.name for page in stores.pages(azure.url("whole"), NAMES[3]) for e in page]
    assert listed == NAMES


class _Dripping(socketserver.ThreadingTCPServer):
    """Answers every HTTP request with a WebHDFS listing, a byte every `interval` seconds
    from where `part` says: the status line on, or the body on."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, part: Literal["head", "body"], interval: float) -> None:
        super().__init__(("127.0.0.1", 0), _DripHandler)
        self.part = part
        self.interval = interval
        self.cut = threading.Event()  # the client closed while the answer was dripping
        self.stop = threading.Event()  # the test is over: the rest of the answer at once


class _DripHandler(socketserver.BaseRequestHandler):
    server: _Dripping

    def handle(self) -> None:
        self.request.settimeout(30)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            received += chunk
        body = (
            b'{"DirectoryListing": {"partialListing": {"FileStatuses": {"FileStatus": ['
            + (
                b'{"pathSuffix": "local-1795495169100", "type": "FILE", "length": 3}, ' * 200
            ).rstrip(b", ")
            + b']}}, "remainingEntries": 0}}'
        )
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        answer = head + body
        whole = 0 if self.server.part == "head" else len(head)
        try:
            self.request.sendall(answer[:whole])
            for i in range(whole, len(answer)):
                self.request.sendall(answer[i : i + 1])
                if self.server.interval and not self.server.stop.wait(self.server.interval):
                    continue
                self.request.sendall(answer[i + 1 :])
                return
        except OSError:
            self.server.cut.set()


@contextmanager
def dripping(part: Literal["head", "body"], interval: float = DRIP) -> Iterator[_Dripping]:
    server = _Dripping(part, interval)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("part", ["head", "body"])
@pytest.mark.parametrize("call", ["list", "read"])
def test_a_dripping_webhdfs_answer_ends_at_the_deadline(
    part: Literal["head", "body"], call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer dripped a byte every 0.1 s (its status line on, or its body on) never
    trips a per-read timeout; the listing (LISTSTATUS_BATCH) or the read (OPEN) still ends,
    within a few deadlines, as a StoreError that names the deadline, and the server sees
    the connection cut before its answer was out."""
    monkeypatch.setattr(calls, "_deadline", DEADLINE)
    # The pool outlives the server: were the request not to end, the server's end cuts it.
    with ThreadPoolExecutor(1) as pool, dripping(part) as server:
        url = f"webhdfs://127.0.0.1:{server.server_address[1]}/drip-{part}-{call}"
        done: Future[object] = (
            pool.submit(stores.listdir, url)
            if call == "list"
            else pool.submit(stores.read_range, f"{url}/{NAMES[0]}", 0, 4096)
        )
        error = done.exception(timeout=DEADLINE * 3)  # TimeoutError: it did not end
        assert isinstance(error, stores.StoreError), error
        assert f"no whole answer within {DEADLINE:g} s" in str(error)
        assert server.cut.wait(10)
        assert server.cut.wait(10)


def test_a_webhdfs_answer_within_the_deadline_is_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same server answering at once (no drip): the listing is read whole through the
    bounded session, and the entries are those it sent."""
    monkeypatch.setattr(calls, "_deadline", DEADLINE)
    with dripping("body", interval=0) as server:
        entries = stores.listdir(f"webhdfs://127.0.0.1:{server.server_address[1]}/whole")
    assert [e.name for e in entries] == [NAMES[0]] * 200


def test_a_store_listing_names_a_bounded_number_of_decoys(
    gcs: EmulatedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a store as on a disk: decoys at the top and inside a live rolling directory are
    named up to MAX_LEFT_OUT (3 here) in all, and the application is found."""
    monkeypatch.setattr(layout, "MAX_LEFT_OUT", 3)
    app = NAMES[0]
    rolling = f"decoys/eventlog_v2_{app}"
    gcs.put(f"{rolling}/appstatus_{app}.inprogress", b"")
    gcs.put(f"{rolling}/events_1_{app}", b"{}\n")
    for n in range(6):
        gcs.put(f"decoys/{app}.x{n}", b"not a log")
        gcs.put(f"{rolling}/events_{n}_{app}.gz", b"not a log")
    listed = discovery.listing(gcs.url("decoys"))
    assert [ref.key for ref in listed.refs] == [app]
    assert len(listed.ignored) == 3 and len(listed.refs[0].ignored) <= 3
