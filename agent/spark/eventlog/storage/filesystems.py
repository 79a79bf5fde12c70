"""Which fsspec file system reads a store's URL: the schemes Spark writes event logs to,
the package and the agent's extra behind each, and one file system per store (scheme and
authority), made with the connect and read timeouts its library takes (and, on WebHDFS'
blocking session, `bounded`'s whole deadline per request)."""

from __future__ import annotations

import os
import threading
from typing import Any, Final
from urllib.parse import urlsplit

import fsspec

from agent.spark.eventlog.storage.bounded import DeadlineAdapter
from agent.spark.eventlog.storage.calls import CONNECT_TIMEOUT, READ_TIMEOUT, StoreError

#: URL schemes Spark writes event logs to, and the fsspec implementation that reads each.
SCHEMES: Final = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gs",
    "abfs": "abfs",
    "abfss": "abfs",
    "hdfs": "webhdfs",  # at the NameNode's HTTP port, WEBHDFS_PORT
    "webhdfs": "webhdfs",  # the same, with the HTTP port in the URL
}
#: The pip package that provides each implementation (named in the error when it is missing).
PACKAGES: Final = {"s3": "s3fs", "gs": "gcsfs", "abfs": "adlfs", "webhdfs": "fsspec"}
#: The agent's extra (pyproject's optional dependencies) that brings each of those packages.
EXTRAS: Final = {"s3": "s3", "gs": "gcs", "abfs": "azure"}
WEBHDFS_PORT: Final = 9870  # Hadoop 3's NameNode HTTP port, where WebHDFS answers


_systems: dict[tuple[str, str], Any] = {}
_systems_lock = threading.Lock()


def protocol(url: str) -> str:
    return SCHEMES[urlsplit(url).scheme.lower()]


def resolve(url: str) -> tuple[Any, str]:
    """The file system for the URL's store (one per scheme and authority) and the path in it."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    protocol = SCHEMES[scheme]
    key = (protocol, parts.netloc)
    with _systems_lock:
        fs = _systems.get(key)
        if fs is None:
            fs = _systems[key] = _make(protocol, parts)
    if protocol == "webhdfs":
        return fs, parts.path or "/"
    if protocol == "abfs":  # container@account.dfs.core.windows.net/path -> container/path
        container = parts.netloc.partition("@")[0]
        return fs, f"{container}{parts.path}"
    return fs, f"{parts.netloc}{parts.path}"


def _make(protocol: str, parts: Any) -> Any:
    options: dict[str, Any] = {"skip_instance_cache": True, "use_listings_cache": False}
    if protocol == "s3":
        options["config_kwargs"] = {
            "connect_timeout": CONNECT_TIMEOUT,
            "read_timeout": READ_TIMEOUT,
            "retries": {"max_attempts": 2, "mode": "standard"},
        }
    elif protocol == "abfs":
        account = parts.netloc.partition("@")[2].partition(".")[0]
        if account:
            options["account_name"] = account
    elif protocol == "webhdfs":
        port = parts.port if parts.scheme.lower() == "webhdfs" and parts.port else WEBHDFS_PORT
        options = {"host": parts.hostname, "port": port}
        if user := os.environ.get("HADOOP_USER_NAME"):  # as Hadoop's own clients take it
            options["user"] = user
    try:
        fs = fsspec.filesystem(protocol, **options)
    except ImportError as error:
        extra = EXTRAS.get(protocol)
        how = f": install the agent's [{extra}] extra, pip install 'edge-lineage-agent[{extra}]'"
        raise StoreError(
            f"reading {parts.scheme}:// needs the {PACKAGES[protocol]} package"
            f"{how if extra else ''} ({error})"
        ) from None
    if protocol == "webhdfs":  # its requests.Session bounds each read only: bound each request
        adapter = DeadlineAdapter()
        fs.session.mount("http://", adapter)
        fs.session.mount("https://", adapter)
    return fs
