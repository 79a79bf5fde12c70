"""An S3-compatible server on loopback (moto in server mode) for the object-store tests and the
store-discovery benchmark, with the AWS variables that point clients at it.

`running_s3(bucket)`: a context manager that starts `moto.server` on a free loopback port,
creates `bucket`, yields an `S3Server` and stops the process (SIGTERM, then SIGKILL);
`environment(server.env)` points this process's `AWS_*` variables at it for a while. The
credentials are moto's dummies, passed only through the standard `AWS_*` variables, the way a
deployment passes real ones: the agent itself never sees them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from tests.agentproc import stop_process

START_TIMEOUT = 60.0


@dataclass(frozen=True)
class S3Server:
    """A running moto server: its endpoint, bucket and the environment that reaches it."""

    endpoint: str
    bucket: str
    env: Mapping[str, str]

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            region_name=self.env["AWS_DEFAULT_REGION"],
        )

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.env["AWS_SECRET_ACCESS_KEY"],)

    def url(self, prefix: str) -> str:
        return f"s3a://{self.bucket}/{prefix}"

    def put(self, key: str, body: bytes) -> None:
        self.client().put_object(Bucket=self.bucket, Key=key, Body=body)

    def delete(self, key: str) -> None:
        self.client().delete_object(Bucket=self.bucket, Key=key)

    def upload_tree(self, local: Path, prefix: str) -> None:
        """Copy every file under `local` to `prefix/<relative path>` in the bucket."""
        upload_tree(self.put, local, prefix)


def upload_tree(put: Callable[[str, bytes], None], local: Path, prefix: str) -> None:
    """`put` every file under `local` as `prefix/<relative path>`."""
    for path in sorted(local.rglob("*")):
        if path.is_file():
            put(f"{prefix.rstrip('/')}/{path.relative_to(local).as_posix()}", path.read_bytes())


@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` with `env` set while the block runs (the variables through which the
    agent's store libraries find a store and its credentials), as it was afterwards."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def wait_listening(process: subprocess.Popen[Any], port: int, what: str) -> None:
    """Until `process` accepts connections on loopback `port`; RuntimeError if it exits or
    takes longer than START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_s3(bucket: str = "spark-logs", log: Path | None = None) -> Iterator[S3Server]:
    """A moto S3 server on loopback with `bucket` created; see the module docstring."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }
    output = log.open("wb") if log is not None else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=output,
        stderr=subprocess.STDOUT,
        env={**os.environ, **env},
    )
    try:
        wait_listening(process, port, "the moto S3 server")
        server = S3Server(endpoint, bucket, env)
        server.client().create_bucket(Bucket=bucket)
        yield server
    finally:
        stop_process(process)
        if log is not None and not isinstance(output, int):
            output.close()
