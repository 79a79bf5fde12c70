"""A real, throwaway single-node Kafka broker in KRaft mode for tests (Java 17, no ZooKeeper).

`start_kafka()` writes a `server.properties` (one process that is both broker and controller,
listening on two free ports of 127.0.0.1), formats the log directory with
`kafka.tools.StorageTool`, starts `kafka.Kafka` and waits, bounded in time, until the broker
logs that it started and its port accepts connections; `Kafka.stop()` sends SIGTERM, waits,
kills if need be and removes the directory; `running_kafka()` does both around a block, also
when the block raises. The jars come from `scripts/jars.py kafka-broker` (cached under
`build/jars/`). `produce()` and `consume()` run Kafka's console tools against the broker.
Standard library only: the lakehouse log generator runs it under another environment.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 90.0  # seconds; a JVM start on a busy two-core machine
STOP_TIMEOUT = 30.0
TOOL_TIMEOUT = 60.0
READY_MARKER = "Kafka Server started"

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


def classpath() -> str:
    """The broker's jars (fetched once through scripts/jars.py), joined with ':'."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "jars.py"), "--classpath", "kafka-broker"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return done.stdout.strip()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _java(cp: str, root: Path, *args: str) -> list[str]:
    return [
        "java",
        "-Xms64m",
        "-Xmx384m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={root / 'log4j2.properties'}",
        "-cp",
        cp,
        *args,
    ]


@dataclass
class Kafka:
    """A running broker: where it listens and its process."""

    root: Path
    port: int
    controller_port: int
    process: subprocess.Popen[bytes]
    cp: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def tool(self, main: str, *args: str, stdin: str | None = None) -> str:
        """Run one of Kafka's command-line tools (a main class) against this broker."""
        done = subprocess.run(
            _java(self.cp, self.root, main, *args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{main} exited {done.returncode}: {done.stderr[-2000:]}")
        return done.stdout

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        self.tool(
            "org.apache.kafka.tools.TopicCommand",
            "--bootstrap-server",
            self.bootstrap,
            "--create",
            "--if-not-exists",
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
        )

    def produce(self, topic: str, lines: list[str]) -> None:
        """Write one record per line (value only) and wait for the acknowledgements."""
        self.tool(
            "org.apache.kafka.tools.ConsoleProducer",
            "--bootstrap-server",
            self.bootstrap,
            "--topic",
            topic,
            stdin="".join(f"{line}\n" for line in lines),
        )

    def consume(self, topic: str, count: int, timeout_ms: int = 20000) -> list[str]:
        """The values of the first `count` records of the topic, from the beginning."""
        out = self.tool(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            "--bootstrap-server",
            self.bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            str(count),
            "--timeout-ms",
            str(timeout_ms),
        )
        return out.splitlines()

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after STOP_TIMEOUT; remove the directory."""
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)

    def halt(self) -> None:
        """Stop the process (SIGTERM, SIGKILL after STOP_TIMEOUT), keeping ports and data."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT)

    def resume(self) -> None:
        """Start the same broker again (same ports, same log directory) after `halt`."""
        started = self.log.read_text(errors="replace").count(READY_MARKER)
        self.process = _launch(self.cp, self.root)
        _wait_ready(self, started)


def _properties(root: Path, port: int, controller_port: int) -> str:
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(root / "data"),
        "num.partitions": "1",
        "num.network.threads": "1",
        "num.io.threads": "2",
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def accepts(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_kafka(parent: Path | None = None) -> Kafka:
    """Format and start a broker in a new temporary directory; raise if it is not up in time."""
    cp = classpath()
    root = Path(tempfile.mkdtemp(prefix="kafka-", dir=parent))
    port, controller_port = free_port(), free_port()
    while controller_port == port:  # at most a few tries: the kernel rarely repeats a port
        controller_port = free_port()
    (root / "server.properties").write_text(_properties(root, port, controller_port))
    (root / "log4j2.properties").write_text(LOG4J2.format(log=root / "server.log"))
    raw = bytearray(uuid.uuid4().bytes)
    raw[0] &= 0x7F  # a leading '-' would read as an option to the storage tool
    cluster_id = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    formatted = subprocess.run(
        _java(
            cp,
            root,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(root / "server.properties"),
        ),
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT,
        check=False,
    )
    if formatted.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"kafka-storage format failed: {formatted.stderr[-2000:]}")
    kafka = Kafka(root, port, controller_port, _launch(cp, root), cp)
    try:
        _wait_ready(kafka, 0)
    except BaseException:
        kafka.stop()
        raise
    return kafka


def _launch(cp: str, root: Path) -> subprocess.Popen[bytes]:
    with (root / "stdout.log").open("ab") as out:
        return subprocess.Popen(
            _java(cp, root, "kafka.Kafka", str(root / "server.properties")),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=root,
        )


def _wait_ready(kafka: Kafka, started: int) -> None:
    """Until the log shows one more start than `started` and the port accepts, bounded."""
    deadline = time.monotonic() + START_TIMEOUT
    process = kafka.process
    while True:
        if process.poll() is not None:
            tail = (kafka.root / "stdout.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"kafka exited {process.returncode} at start: {tail}")
        log = kafka.log.read_text(errors="replace") if kafka.log.exists() else ""
        if log.count(READY_MARKER) > started and accepts(kafka.port):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"kafka not ready after {START_TIMEOUT:.0f}s: {log[-2000:]}")
        time.sleep(0.2)


@contextlib.contextmanager
def running_kafka(parent: Path | None = None) -> Iterator[Kafka]:
    """A broker for the duration of the block, stopped (and its directory removed) after."""
    kafka = start_kafka(parent)
    try:
        yield kafka
    finally:
        kafka.stop()
