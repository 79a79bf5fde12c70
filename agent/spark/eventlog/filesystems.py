"""Which fsspec file system reads a store's URL: the schemes Spark writes event logs to,
the package and the agent's extra behind each, and one file system per store (scheme and
authority), made with the connect and read timeouts its library takes."""

from __future__ import annotations

import os
import threading
from typing import Any, Final
from urllib.parse import urlsplit

import fsspec
from requests.adapters import HTTPAdapter

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
CONNECT_TIMEOUT: Final = 5.0  # seconds per connection attempt
READ_TIMEOUT: Final = 20.0  # seconds per response
WEBHDFS_PORT: Final = 9870  # Hadoop 3's NameNode HTTP port, where WebHDFS answers


class StoreError(OSError):
    """The store could not answer now (network, throttling, permission); tried again later."""


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
    if protocol == "webhdfs":  # its requests.Session sends without a timeout of its own
        adapter = _TimeoutAdapter()
        fs.session.mount("http://", adapter)
        fs.session.mount("https://", adapter)
    return fs


class _TimeoutAdapter(HTTPAdapter):
    """Every request of the session bounded in time (WebHDFS)."""

    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["timeout"] = kwargs.get("timeout") or (CONNECT_TIMEOUT, READ_TIMEOUT)
        return super().send(request, *args, **kwargs)
