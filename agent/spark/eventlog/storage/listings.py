"""A directory's listing on each store, a page at a time, as the agent asks for each: one
request per page, each with its own deadline (`calls`), so that a large prefix is never cut
short by the deadline of the whole and what is held is one page, not the prefix.

Each page is a list of fsspec-style entries (`name` as bucket/key, `type`, `size`, a time)
in the store's own order of names, which a resume point (`start_after`) follows:
    S3     ListObjectsV2: MaxKeys, ContinuationToken; StartAfter (after the key)
    GCS    objects.list: maxResults, pageToken; startOffset (from the key: an object of that
           very name is left out here)
    HDFS   WebHDFS' LISTSTATUS_BATCH: the NameNode's page (dfs.ls.limit, 1,000 unless set);
           startAfter (a child's name; a page that does not move past it is an error). Names
           in byte order, a directory as its bare name
    Azure  list_blobs by page: results_per_page, continuation; no start-after (Azure's
           marker is an opaque token, not a name), so never resumed
Object stores (S3, GCS, Azure) order a directory by its keys' prefix (`name/`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

from agent.spark.eventlog.storage import calls
from agent.spark.eventlog.storage.calls import StoreError, count, unavailable

LIST_PAGE: Final = 1000  # names per LIST request (S3's, GCS's and Azure's page)
RESUMABLE: Final = frozenset({"s3", "gs", "webhdfs"})  # stores a listing starts after a name
DEEP: Final = frozenset({"s3"})  # stores listed at every depth in one listing (`pages`' deep)

Page = list[dict[str, Any]]


def pages(
    fs: Any, protocol: str, path: str, start_after: str = "", *, deep: bool = False
) -> Iterator[Page]:
    """The entries directly under `path` (bucket/key, or the HDFS path), a page at a time;
    `deep` (S3 only, `DEEP`): every object under it at any depth, and no directories."""
    if deep and protocol not in DEEP:
        raise ValueError(f"a {protocol} listing cannot go to every depth")
    if protocol == "s3":
        return _s3(fs, path, start_after, not deep)
    if protocol == "gs":
        return _gcs(fs, path, start_after)
    if protocol == "webhdfs":
        return _webhdfs(fs, path, start_after)
    return _azure(fs, path)


def directory_order(protocol: str) -> bool:
    """Whether the store orders a directory among names as `name/` (object stores' keys)."""
    return protocol != "webhdfs"


def _request(send: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """One LIST request (`calls.call` or `calls.run`), counted; FileNotFoundError as it is,
    the rest as a StoreError."""
    count("list")
    try:
        return send(*args, **kwargs)
    except FileNotFoundError:
        raise
    except Exception as error:
        raise unavailable(error) from None


def _s3(fs: Any, path: str, start_after: str, delimited: bool) -> Iterator[Page]:
    bucket, _, key = path.partition("/")
    prefix = f"{key}/" if key else ""
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if delimited:  # the names directly under it, its subdirectories as common prefixes
        request["Delimiter"] = "/"
    request["MaxKeys"] = LIST_PAGE
    if start_after:
        request["StartAfter"] = prefix + start_after
    while True:
        page = _request(calls.call, fs, "call_s3", "list_objects_v2", **request)
        found: Page = [
            {"name": f"{bucket}/{p['Prefix']}", "type": "directory"}
            for p in page.get("CommonPrefixes", ())
        ]
        for item in page.get("Contents", ()):
            found.append(
                {
                    "name": f"{bucket}/{item['Key']}",
                    "type": "file",
                    "size": item.get("Size", 0),
                    "LastModified": item.get("LastModified"),
                }
            )
        token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        page = {}  # one page held at a time: let this one go before the next request
        yield found
        found = []
        if not token:
            return
        request.pop("StartAfter", None)
        request["ContinuationToken"] = token


def _gcs(fs: Any, path: str, start_after: str) -> Iterator[Page]:
    bucket, _, key = path.partition("/")
    prefix = f"{key}/" if key else ""
    query: dict[str, Any] = {"prefix": prefix, "delimiter": "/", "maxResults": LIST_PAGE}
    after = prefix + start_after if start_after else ""
    if after:
        query["startOffset"] = after  # from that name on: the name itself is left out below
    while True:
        page = _request(calls.call, fs, "call", "GET", "b/{}/o", bucket, json_out=True, **query)
        found: Page = [
            {"name": f"{bucket}/{p}", "type": "directory"} for p in page.get("prefixes", ())
        ]
        for item in page.get("items", ()):
            if item.get("name") != after:
                found.append(
                    {
                        "name": f"{bucket}/{item['name']}",
                        "type": "file",
                        "size": int(item.get("size") or 0),
                        "updated": item.get("updated"),
                    }
                )
        token = page.get("nextPageToken")
        page = {}
        yield found
        found = []
        if not token:
            return
        query["pageToken"] = token


def _webhdfs(fs: Any, path: str, start_after: str) -> Iterator[Page]:
    base = path.rstrip("/")
    after = start_after
    while True:
        # The NameNode takes its parameters' names in lower case (`startAfter` is not read).
        query = {"startafter": after} if after else {}
        answer = _request(calls.call, fs, "_call", "LISTSTATUS_BATCH", path=path, **query)
        listing = answer.json()["DirectoryListing"]
        statuses = listing["partialListing"]["FileStatuses"]["FileStatus"]
        found: Page = [
            {
                "name": f"{base}/{status['pathSuffix']}",
                "type": str(status.get("type", "")).lower(),
                "size": status.get("length", 0),
                "modificationTime": status.get("modificationTime"),
            }
            for status in statuses
            if status.get("pathSuffix")  # a file's own status has none
        ]
        remaining = int(listing.get("remainingEntries") or 0)
        last = str(statuses[-1].get("pathSuffix") or "") if statuses else ""
        listing = statuses = {}
        yield found
        found = []
        if not remaining or not last:
            return
        if last <= after:  # a server that does not move on would be asked for ever
            raise StoreError(f"LISTSTATUS_BATCH of {path} did not move past {after!r}")
        after = last


def _azure(fs: Any, path: str) -> Iterator[Page]:
    container, _, key = path.partition("/")
    prefix = f"{key}/" if key else ""
    client = fs.service_client.get_container_client(container)
    blobs = client.walk_blobs(
        name_starts_with=prefix or None,
        delimiter="/",
        include=["metadata"],
        results_per_page=LIST_PAGE,
    )
    by_page = blobs.by_page()
    while True:
        found = _request(calls.run, fs, _next_azure_page, by_page, container)
        if found is None:
            return
        yield found
        found = None
        if not by_page.continuation_token:  # that was the last page: no request to learn it
            return


async def _next_azure_page(by_page: Any, container: str) -> Page | None:
    """The next page of `walk_blobs`, its entries read; None after the last."""
    try:
        page = await anext(by_page)
        items = [item async for item in page]
    except StopAsyncIteration:
        return None
    except Exception as error:
        if getattr(error, "status_code", None) == 404:  # azure-core's ResourceNotFoundError
            raise FileNotFoundError(2, "no such container", container) from None
        raise
    found: Page = []
    for item in items:
        metadata = getattr(item, "metadata", None) or {}
        if not hasattr(item, "size"):  # a BlobPrefix: the keys under `name/`
            found.append({"name": f"{container}/{item.name}", "type": "directory"})
        elif "true" not in (metadata.get("hdi_isfolder"), metadata.get("Hdi_isfolder")):
            # A folder's own blob (ADLS Gen2) is left out: its prefix lists its files.
            found.append(
                {
                    "name": f"{container}/{item.name}",
                    "type": "file",
                    "size": item.size,
                    "last_modified": item.last_modified,
                }
            )
    return found
