"""HDFS on loopback for the HDFS tests: Hadoop's mini cluster (one NameNode, one DataNode)
from the `hadoop-minicluster` bundle of scripts/jars.py, started with Hadoop's own
`MiniHadoopClusterManager` in its own JVM.

`running_hdfs(work)`: a context manager that starts it on free loopback ports, waits until
WebHDFS answers out of safe mode with its DataNode registered, yields an `Hdfs` and stops the
JVM (SIGTERM, then SIGKILL).
Spark writes through the NameNode's RPC port (`hdfs://`); the agent reads through its HTTP
port (`webhdfs://`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.agentproc import stop_process
from tests.s3server import free_port

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 180.0
FS_STATE = "Hadoop:service=NameNode,name=FSNamesystemState"  # its JMX bean of live DataNodes


@dataclass(frozen=True)
class Hdfs:
    rpc_port: int
    http_port: int

    def url(self, path: str) -> str:
        """The hdfs:// URL Spark writes to."""
        return f"hdfs://127.0.0.1:{self.rpc_port}/{path.lstrip('/')}"

    def webhdfs(self, path: str) -> str:
        """The same directory as the agent reads it, through WebHDFS."""
        return f"webhdfs://127.0.0.1:{self.http_port}/{path.lstrip('/')}"

    def mkdir(self, path: str) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}/webhdfs/v1/{path.lstrip('/')}"
            "?op=MKDIRS&permission=777&user.name=root",
            method="PUT",
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert json.load(answer)["boolean"] is True

    def put(self, path: str, body: bytes) -> None:
        """Write the file `path` (WebHDFS' CREATE: the NameNode names the DataNode)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}/webhdfs/v1/{path.lstrip('/')}"
            "?op=CREATE&overwrite=true&noredirect=true&user.name=root",
            method="PUT",
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            location = json.load(answer)["Location"]
        upload = urllib.request.Request(location, data=body, method="PUT")
        with urllib.request.urlopen(upload, timeout=30) as answer:
            assert answer.status == 201


def classpath() -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "jars.py"), "--classpath", "hadoop-minicluster"],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return done.stdout.strip()


@contextmanager
def running_hdfs(work: Path, conf: Mapping[str, str] | None = None) -> Iterator[Hdfs]:
    """A mini HDFS cluster on loopback, with the Hadoop settings `conf`; see the module
    docstring."""
    work.mkdir(parents=True, exist_ok=True)
    hdfs = Hdfs(free_port(), free_port())
    with (work / "hdfs.log").open("wb") as log:
        process = subprocess.Popen(
            [
                "java",
                "-XX:TieredStopAtLevel=1",  # C1 alone, as for Spark's JVMs (tests/jvm.py)
                f"-Dtest.build.data={work / 'data'}",
                "-cp",
                classpath(),
                "org.apache.hadoop.mapreduce.MiniHadoopClusterManager",
                "-nomr",
                "-format",
                "-datanodes",
                "1",
                "-nnport",
                str(hdfs.rpc_port),
                "-nnhttpport",
                str(hdfs.http_port),
                *(f"-D{key}={value}" for key, value in (conf or {}).items()),
            ],
            cwd=work,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        # Listed out of safe mode, with its DataNode registered (a file can be written).
        probe = f"http://127.0.0.1:{hdfs.http_port}/webhdfs/v1/?op=LISTSTATUS&user.name=root"
        state = f"http://127.0.0.1:{hdfs.http_port}/jmx?qry={FS_STATE}"
        while True:
            try:
                with urllib.request.urlopen(probe, timeout=5) as answer:
                    listed = answer.status == 200
                with urllib.request.urlopen(state, timeout=5) as answer:
                    [beans] = json.load(answer)["beans"]
                if listed and beans.get("NumLiveDataNodes", 0) >= 1:
                    break
            except (OSError, ValueError):
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (work / "hdfs.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the mini HDFS cluster did not start:\n{tail}")
            time.sleep(0.5)
        yield hdfs
    finally:
        stop_process(process)
