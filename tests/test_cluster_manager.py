"""Driver liveness through the cluster manager's API, against loopback servers that answer as
a YARN ResourceManager or a standalone master would, or lie, or hang.

A real ResourceManager needs Hadoop's MiniYARNCluster (a JVM, HDFS configuration, minutes to
start) and a Spark application submitted to it through a YARN client; the RM's REST answer
for one application is a small documented JSON document, so a loopback server serving that
shape tests the agent's side of the exchange. The standalone master is tested for real in
tests/test_standalone_liveness.py.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent.errors import ControlError
from agent.spark.eventlog.discovery import scan
from agent.spark.follow import liveness
from agent.spark.follow.application import ApplicationLog
from agent.spark.follow.driver import manager, rest, stopping
from agent.spark.follow.driver.facts import driver_facts
from agent.spark.follow.driver.manager import Endpoint, ManagerSettings
from agent.spark.follow.followed import Followed
from agent.spark.translate.options import TranslateOptions

YARN_APP = "application_1800000000000_0042"
STANDALONE_APP = "app-20261127161443-0007"
PROXY = "spark.org.apache.hadoop.yarn.server.webproxy.amfilter.AmIpFilter.param.PROXY_URI_BASES"
Handler = Callable[[BaseHTTPRequestHandler], None]


class Manager:
    """A loopback HTTP server whose answer is `handler`; it records each request."""

    def __init__(self) -> None:
        self.handler: Handler = lambda request: reply(request, 404, b"{}")
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.closing = threading.Event()
        owner = self

        class _Request(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append((self.path, dict(self.headers)))
                owner.handler(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Request)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def rm() -> Iterator[Manager]:
    """A manager on loopback, shut at the end of the test."""
    server = Manager()
    try:
        yield server
    finally:
        server.close()


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def reply(request: BaseHTTPRequestHandler, status: int, body: bytes, **headers: str) -> None:
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(body)))
    for name, value in headers.items():
        request.send_header(name.replace("_", "-"), value)
    request.end_headers()
    with contextlib.suppress(OSError):  # the agent hung up on a body it will not read
        request.wfile.write(body)


def yarn_app(state: str, app_id: str = YARN_APP) -> Handler:
    """The RM's `ws/v1/cluster/apps/<id>` answer, as its REST API documents it."""
    body = {
        "app": {
            "id": app_id,
            "user": "spark",
            "name": "nightly",
            "queue": "default",
            "state": state,
            "finalStatus": "UNDEFINED" if state == "RUNNING" else "SUCCEEDED",
            "progress": 10.0,
            "applicationType": "SPARK",
            "startedTime": 1800000000000,
            "finishedTime": 0,
            "trackingUrl": f"http://rm:8088/proxy/{app_id}/",
        }
    }
    return lambda request: reply(request, 200, json.dumps(body).encode())


def master_json(state: str, *, status: str = "ALIVE", app_id: str = STANDALONE_APP) -> bytes:
    """A standalone master's `/json/` answer listing one application."""
    app = {"id": app_id, "name": "nightly", "user": "spark", "state": state, "cores": 1}
    running = state in ("RUNNING", "WAITING")
    return json.dumps(
        {
            "url": "spark://127.0.0.1:7077",
            "workers": [],
            "aliveworkers": 0,
            "activeapps": [app] if running else [],
            "completedapps": [] if running else [app],
            "activedrivers": [],
            "completeddrivers": [],
            "status": status,
        }
    ).encode()


def silent(request: BaseHTTPRequestHandler, owner: Manager) -> None:
    """Read the request, answer nothing, for at most a minute."""
    owner.closing.wait(60)


def drip(request: BaseHTTPRequestHandler, owner: Manager) -> None:
    """Headers at once, then one byte every half second, for at most a minute."""
    request.send_response(200)
    request.send_header("Content-Type", "application/json")
    request.end_headers()
    request.wfile.write(b'{"status": "ALIVE", "activeapps": [')
    deadline = time.monotonic() + 60
    while not owner.closing.is_set() and time.monotonic() < deadline:
        try:
            request.wfile.write(b" ")
            request.wfile.flush()
        except OSError:
            return
        owner.closing.wait(0.5)


def chunked(request: BaseHTTPRequestHandler, size: int) -> None:
    """A body of `size` bytes without a Content-Length (until the connection closes)."""
    request.send_response(200)
    request.send_header("Content-Type", "application/json")
    request.send_header("Connection", "close")
    request.end_headers()
    piece = b"[" + b"0," * 32767 + b"0"
    sent = 0
    try:
        while sent < size:
            request.wfile.write(piece)
            sent += len(piece)
    except OSError:
        return


def followed(
    tmp_path: Path,
    app_id: str,
    props: Mapping[str, str],
    hadoop: Mapping[str, str] = {},
    *,
    name: str | None = None,
    started: bool = True,
) -> Followed:
    """An in-progress log of `app_id` (environment, start unless not `started`), named `name`
    (default: the id), followed as the daemon follows it, its driver's UI off and nothing on
    this node holding it."""
    logs = tmp_path / "logs"
    logs.mkdir()
    environment = {
        "Event": "SparkListenerEnvironmentUpdate",
        "Spark Properties": {"spark.ui.enabled": "false", **props},
        "Hadoop Properties": dict(hadoop),
    }
    start = {
        "Event": "SparkListenerApplicationStart",
        "App Name": "nightly",
        "App ID": app_id,
        "Timestamp": 1_800_000_000_000,
        "User": "spark",
    }
    lines = [{"Event": "SparkListenerLogStart", "Spark Version": "4.0.1"}, environment]
    lines += [start] if started else []
    (logs / f"{name or app_id}.inprogress").write_text(
        "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in lines)
    )
    (ref,) = scan(logs)
    log = ApplicationLog(ref, TranslateOptions(namespace="spark"), max_line_bytes=1 << 20)
    assert [e["eventType"] for e in log.feed(log.read())] == (["START"] if started else [])
    app = Followed(str(ref.path), log)
    app.last_growth = time.monotonic() - 60
    return app


async def ended_by(app: Followed, managers: ManagerSettings = manager.DEFAULTS) -> list[str]:
    """The events `close_dead` ends the application with after `stale_after` (1 s)."""
    ended = await liveness.close_dead(
        [app], stale_after=1.0, stops=lambda _: None, managers=managers
    )
    return [str(e["eventType"]) for _, events in ended for e in events]


@pytest.mark.parametrize("state", ["ACCEPTED", "RUNNING"])
async def test_a_running_yarn_application_stays_alive(
    tmp_path: Path, rm: Manager, state: str
) -> None:
    """An idle driver whose ResourceManager (found through the log's AM filter) lists it
    ACCEPTED or RUNNING is alive past `stale_after`, with the RM's word as the signal."""
    rm.handler = yarn_app(state)
    base = f"http://127.0.0.1:{rm.port}/proxy/{YARN_APP}"
    app = followed(tmp_path, YARN_APP, {"spark.master": "yarn", PROXY: base})
    assert await ended_by(app) == []
    assert app.alive_signal == f"the YARN ResourceManager at 127.0.0.1:{rm.port} reports it {state}"
    assert not app.closed
    assert [path for path, _ in rm.requests] == [f"/ws/v1/cluster/apps/{YARN_APP}"]


async def test_a_driver_not_started_yet_is_asked_by_its_logs_name(
    tmp_path: Path, rm: Manager
) -> None:
    """Before ApplicationStart is in the log (a driver waiting for executors), the manager is
    asked for the id the log's name carries, without the attempt, and keeps the driver."""
    rm.handler = yarn_app("ACCEPTED")
    base = f"http://127.0.0.1:{rm.port}/proxy/{YARN_APP}"
    props = {"spark.master": "yarn", PROXY: base}
    app = followed(tmp_path, YARN_APP, props, name=f"{YARN_APP}_1", started=False)
    assert await ended_by(app) == []
    assert app.alive_signal == (
        f"the YARN ResourceManager at 127.0.0.1:{rm.port} reports it ACCEPTED"
    )
    assert [path for path, _ in rm.requests] == [f"/ws/v1/cluster/apps/{YARN_APP}"]


@pytest.mark.parametrize("state", ["FINISHED", "FAILED", "KILLED"])
async def test_an_ended_yarn_application_is_lost_with_the_rms_word(
    tmp_path: Path, rm: Manager, state: str
) -> None:
    """A stale log whose ResourceManager lists the application ended ends FAIL, the message
    naming what the RM said."""
    rm.handler = yarn_app(state)
    hadoop = {
        "yarn.resourcemanager.hostname": "127.0.0.1",
        "yarn.resourcemanager.webapp.address": f"${{yarn.resourcemanager.hostname}}:{rm.port}",
    }
    app = followed(tmp_path, YARN_APP, {"spark.master": "yarn"}, hadoop)
    ended = await liveness.close_dead([app], stale_after=1.0, stops=lambda _: None)
    ((_, events),) = ended
    assert [e["eventType"] for e in events] == ["FAIL"]
    text = events[0]["run"]["facets"]["errorMessage"]["message"]
    assert text.endswith(
        f"holds it open, the YARN ResourceManager at 127.0.0.1:{rm.port} reports it {state} "
        "and its UI is off"
    ), text


async def test_the_configured_resourcemanager_is_asked_first_and_never_shown(
    tmp_path: Path, rm: Manager
) -> None:
    """`spark.yarn_resourcemanager_url` is asked before the log's addresses, with its
    credentials as basic auth, and what the agent says shows its host and port only."""
    rm.handler = yarn_app("RUNNING")
    dead = free_port()
    app = followed(
        tmp_path, YARN_APP, {"spark.master": "yarn", PROXY: f"http://127.0.0.1:{dead}/proxy/x"}
    )
    url = f"http://operator:s3cret@127.0.0.1:{rm.port}/"
    assert await ended_by(app, ManagerSettings(resourcemanager_url=url)) == []
    assert app.alive_signal == f"the YARN ResourceManager at 127.0.0.1:{rm.port} reports it RUNNING"
    ((_, headers),) = rm.requests
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"operator:s3cret").decode()


@pytest.mark.parametrize(
    ("props", "hadoop", "settings", "kind", "urls"),
    [
        ({"spark.master": "local[*]"}, {}, manager.DEFAULTS, None, []),
        ({"spark.master": "k8s://https://api:6443"}, {}, manager.DEFAULTS, None, []),
        (
            {"spark.master": "spark://m1:7077,m2:7077"},
            {},
            manager.DEFAULTS,
            "standalone",
            ["http://m1:8080", "http://m2:8080"],
        ),
        (
            {"spark.master": "spark://10.0.0.5:7077", "spark.master.ui.port": "8990"},
            {},
            ManagerSettings(master_ui_port=9000),
            "standalone",
            ["http://10.0.0.5:8990"],
        ),
        (
            {"spark.master": "spark://10.0.0.5:7077"},
            {},
            ManagerSettings(master_ui_port=9000),
            "standalone",
            ["http://10.0.0.5:9000"],
        ),
        (
            {"spark.master": "yarn", PROXY: f"http://rm1:8088/proxy/{YARN_APP},https://rm2:8090"},
            {"yarn.resourcemanager.address": "rm3:8032"},
            manager.DEFAULTS,
            "yarn",
            ["http://rm1:8088", "https://rm2:8090", "http://rm3:8088"],
        ),
        (
            {"spark.master": "yarn", "spark.hadoop.yarn.resourcemanager.webapp.address": "r:1"},
            {"yarn.resourcemanager.hostname": "rm"},
            ManagerSettings(resourcemanager_url="http://conf:8088"),
            "yarn",
            ["http://conf:8088", "http://r:1", "http://rm:8088"],
        ),
        ({"spark.master": "spark://bad host\x1b[2J:7077"}, {}, manager.DEFAULTS, "standalone", []),
    ],
)
def test_where_the_log_places_its_manager(
    props: dict[str, str],
    hadoop: dict[str, str],
    settings: ManagerSettings,
    kind: str | None,
    urls: list[str],
) -> None:
    """The manager's addresses from the log's master URL, Spark and Hadoop properties and the
    agent's config, in the order they are asked; none for local mode or Kubernetes, and no
    host that is not one."""
    facts = driver_facts({"Spark Properties": props, "Hadoop Properties": hadoop})
    assert facts.manager.kind == kind
    assert [e.url for e in manager.endpoints(facts.manager, settings)] == urls


def hostile(name: str, server: Manager) -> Handler:
    """Answers that are no answer about the application."""
    huge = b"[" + b"0," * (3 * 1024 * 1024) + b"0]"
    cases: dict[str, Handler] = {
        "not JSON": lambda r: reply(r, 200, b"<html>Spark Master at spark://x</html>"),
        "a JSON string": lambda r: reply(r, 200, b'"RUNNING"'),
        "JSON nested a million deep": lambda r: reply(r, 200, b"[" * 1_000_000 + b"]" * 1_000_000),
        "a server error": lambda r: reply(r, 500, master_json("RUNNING")),
        "another application": lambda r: reply(r, 200, master_json("RUNNING", app_id="app-1")),
        "a standby master": lambda r: reply(r, 200, master_json("RUNNING", status="STANDBY")),
        "an unknown state": lambda r: reply(r, 200, master_json("UNKNOWN")),
        "a huge Content-Length": lambda r: reply(r, 200, huge + huge),
        "a huge chunked body": lambda r: chunked(r, 64 * 1024 * 1024),
        "a gzip bomb": lambda r: reply(
            r,
            200,
            gzip.compress(b" " * (64 << 20) + master_json("RUNNING")),
            Content_Encoding="gzip",
        ),
        "a redirect": lambda r: reply(r, 302, b"", Location="http://127.0.0.1:1/json/"),
        "a byte every half second": lambda r: drip(r, server),
        "silence": lambda r: silent(r, server),
    }
    return cases[name]


HOSTILE = [
    "not JSON",
    "a JSON string",
    "JSON nested a million deep",
    "a server error",
    "another application",
    "a standby master",
    "an unknown state",
    "a huge Content-Length",
    "a huge chunked body",
    "a gzip bomb",
    "a redirect",
    "a byte every half second",
    "silence",
]


@pytest.mark.parametrize("case", HOSTILE)
def test_a_manager_that_lies_or_hangs_gives_no_answer(rm: Manager, case: str) -> None:
    """Whatever a master answers besides a listing of this application, the agent takes no
    signal from it, within the request's time budget."""
    rm.handler = hostile(case, rm)
    began = time.monotonic()
    where = [Endpoint("standalone", f"http://127.0.0.1:{rm.port}", f"127.0.0.1:{rm.port}")]
    assert manager.ask(where, STANDALONE_APP) is None
    assert time.monotonic() - began < manager.REQUEST_BUDGET + manager.TIMEOUT.read + 3  # type: ignore[operator]
    assert len(rm.requests) == 1


def test_the_same_master_answering_truly_is_a_signal(rm: Manager) -> None:
    """The counterpart of the hostile answers: a true listing, alive or ended, is one."""
    where = [Endpoint("standalone", f"http://127.0.0.1:{rm.port}", f"127.0.0.1:{rm.port}")]
    for state, alive in (("WAITING", True), ("RUNNING", True), ("KILLED", False)):
        rm.handler = lambda r, s=state: reply(r, 200, master_json(s))  # type: ignore[misc]
        answer = manager.ask(where, STANDALONE_APP)
        assert answer is not None
        assert (answer.alive, answer.state) == (alive, state)


def test_an_unreachable_manager_gives_no_answer() -> None:
    """Masters that refuse the connection give no answer, at once."""
    ports = [free_port(), free_port()]
    where = [Endpoint("standalone", f"http://127.0.0.1:{p}", f"127.0.0.1:{p}") for p in ports]
    began = time.monotonic()
    assert manager.ask(where, STANDALONE_APP) is None
    # Refused, not waited out: well within one request's budget, which a wait would spend.
    assert time.monotonic() - began < manager.REQUEST_BUDGET


def test_hanging_masters_are_asked_once_a_look(rm: Manager) -> None:
    """Three masters that each drip bytes: the first answer, however slow, ends the look, so
    it sends one request and ends within one request's budget."""
    rm.handler = lambda r: drip(r, rm)
    where = [Endpoint("standalone", f"http://127.0.0.1:{rm.port}", "x")] * 3
    began = time.monotonic()
    assert manager.ask(where, STANDALONE_APP) is None
    assert time.monotonic() - began < manager.REQUEST_BUDGET + manager.TIMEOUT.read + 3  # type: ignore[operator]
    assert len(rm.requests) == 1


def test_a_standby_master_leads_to_the_next(rm: Manager) -> None:
    """High availability: a master in STANDBY (or a ResourceManager's redirect to the active
    one) is the one answer after which the next address is asked."""
    standby = Manager()
    try:
        standby.handler = lambda r: reply(r, 200, master_json("RUNNING", status="STANDBY"))
        rm.handler = lambda r: reply(r, 200, master_json("RUNNING"))
        where = [
            Endpoint("standalone", f"http://127.0.0.1:{s.port}", f"127.0.0.1:{s.port}")
            for s in (standby, rm)
        ]
        answer = manager.ask(where, STANDALONE_APP)
        assert answer is not None
        assert answer.reason == f"the standalone master at 127.0.0.1:{rm.port} reports it RUNNING"
        assert (len(standby.requests), len(rm.requests)) == (1, 1)
    finally:
        standby.close()


async def test_a_hanging_manager_never_stalls_the_loop(tmp_path: Path, rm: Manager) -> None:
    """A look whose master drips bytes runs beside the event loop, which keeps turning every
    50 ms (no gap near the look's budget); the driver, with no signal, is taken for lost,
    the message saying that its master gave no answer."""
    rm.handler = lambda r: drip(r, rm)
    props = {"spark.master": "spark://127.0.0.1:7077", "spark.master.ui.port": str(rm.port)}
    app = followed(tmp_path, STANDALONE_APP, props)
    gaps: list[float] = []
    stop = asyncio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.05)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    began = time.monotonic()
    try:
        ended = await liveness.close_dead([app], stale_after=1.0, stops=lambda _: None)
    finally:
        stop.set()
        await ticker
    assert time.monotonic() - began >= manager.REQUEST_BUDGET
    # A look on the loop would hold it the whole budget (10 s); a gap of a fraction of that
    # is a busy machine's scheduling, not a stall.
    assert max(gaps) < manager.REQUEST_BUDGET * 0.2, max(gaps)
    ((_, events),) = ended
    text = events[0]["run"]["facets"]["errorMessage"]["message"]
    assert text.endswith("its standalone master gives no answer and its UI is off"), text


def test_job_stop_names_the_standalone_masters_web_ui() -> None:
    """`job stop` of a driver on another node names the standalone master's web UI where
    liveness would ask it (its `(kill)` link), and the command for a cluster-mode driver."""
    props = {
        "spark.driver.host": "192.0.2.7",
        "spark.master": "spark://192.0.2.10:7077",
        "spark.master.ui.port": "8990",
    }
    with pytest.raises(ControlError) as info:
        stopping.driver_pids(driver_facts({"Spark Properties": props}), [], STANDALONE_APP)
    assert str(info.value) == (
        f"application {STANDALONE_APP}: its driver runs on 192.0.2.7, not on this node; stop "
        "it with the (kill) link beside it on its master's web UI (http://192.0.2.10:8990/), "
        "or for a cluster-mode driver with `spark-class org.apache.spark.deploy.Client kill "
        "MASTER_URL DRIVER_ID`"
    )


def test_a_hostile_driver_ui_is_read_within_the_same_bounds(rm: Manager) -> None:
    """Whatever listens where a driver's UI may be is read as a manager is: JSON nested too
    deep for the parser is no answer rather than an error that ends the look."""
    rm.handler = hostile("JSON nested a million deep", rm)
    assert rest.ui_port_of("127.0.0.1", [rm.port], STANDALONE_APP) is None
    assert len(rm.requests) == 1
