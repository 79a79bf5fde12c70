"""Discovery on a store: the real daemon following `apps` completed applications in an S3
bucket (a loopback moto server), half single-file logs and half rolling directories (small
generated objects that are never read: they are older than the start horizon).

Two starts, each with a fresh state database and a loopback collector in its own process:
* baseline: an empty bucket prefix; the resident set after the same settling time;
* the bucket of `apps` applications, `store_poll_interval` 2s: the requests of the first scan
  (one LIST per 1,000 objects under the prefix: on S3 the agent lists it at every depth, so
  a rolling directory's files and their age come with it), then the requests per minute afterwards,
  when every application is remembered as finished (only the directory's LIST pages remain),
  and the resident set.
Requests are the agent's own count (`lineage_eventlog_store_requests_total`).

`stores_endless` (`run_endless`): the real daemon following a prefix that lists without end
(`tests.endless_store`) for `endless_seconds`, once over its mix of old logs and decoys and
once over rolling logs' directories only: how far its resident set grows from the moment its
first LIST page is answered.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bench import harness
from tests.endless_store import PAGE, running_endless
from tests.listserver import ListServer, running_listing
from tests.s3server import S3Server, environment, running_s3

POLL = 2.0  # spark.store_poll_interval of the run


@dataclass(frozen=True)
class Params:
    apps: int = 10_000
    steady_seconds: float = 60.0
    objects: int = 1_000_000  # the prefix of the listing figures
    endless_seconds: float = 120.0  # of the endless listing (`run_endless`)


FULL = Params()
SMOKE = Params(apps=100, steady_seconds=6.0, objects=5_000, endless_seconds=5.0)
LIST_TIMEOUT = 3600.0  # seconds one listing child may take (a million objects: ~20 min)


def populate(s3: S3Server, prefix: str, apps: int) -> None:
    """`apps` completed applications under `prefix`: even ones single files, odd ones rolling."""
    client = s3.client()
    line = b'{"Event":"SparkListenerLogStart","Spark Version":"4.3.0"}\n'

    def put(n: int) -> None:
        name = f"app-20261127000000-{n:05d}"
        if n % 2 == 0:
            client.put_object(Bucket=s3.bucket, Key=f"{prefix}/{name}", Body=line)
            return
        folder = f"{prefix}/eventlog_v2_{name}"
        client.put_object(Bucket=s3.bucket, Key=f"{folder}/events_1_{name}", Body=line)
        client.put_object(Bucket=s3.bucket, Key=f"{folder}/appstatus_{name}", Body=b"")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(apps)))


def requests(samples: dict[str, float], kind: str) -> float:
    return samples.get(f"lineage_eventlog_store_requests_total{{request={kind}}}", 0.0)


def follow(base: Path, url: str, apps: int, steady: float) -> dict[str, Any]:
    """Run the daemon over `url` until its first scan handled `apps` applications, then for
    `steady` seconds; the request counts and memory."""
    with harness.CollectorProcess.standard() as collector:
        config = harness.agent_config(
            base,
            endpoint=collector.url,
            spark={
                "event_log_dirs": [url],
                "store_poll_interval": f"{POLL:g}s",
                "replay_horizon": "1s",
            },
        )
        with harness.agent_process(config) as agent:
            tail = harness.LogTail(agent.log_path)

            def scanned() -> bool:
                tail.poll(keep=lambda line: line.get("event") == "eventlogs_skipped_by_horizon")
                return apps == 0 or tail.count("eventlogs_skipped_by_horizon") > 0

            began = time.monotonic()
            harness.wait_until(scanned, 900, f"the first scan of {apps} applications", 0.1)
            first_scan_seconds = time.monotonic() - began
            time.sleep(POLL)  # the first scan's LISTs are all counted
            first = harness.scrape(agent)
            time.sleep(steady)
            later = harness.scrape(agent)
            pid = agent.proc.pid
            rss, peak = harness.rss_mib(pid), harness.peak_rss_mib(pid)
            agent.stop()
    kinds = ("list", "head", "get")
    return {
        "first_scan_seconds": first_scan_seconds,
        "first": {k: requests(first, k) for k in kinds},
        "steady": {k: requests(later, k) - requests(first, k) for k in kinds},
        "rss_mib": rss,
        "peak_rss_mib": peak,
    }


def credentials(endpoint: str) -> dict[str, str]:
    """The variables that point the store library at the loopback `endpoint`."""
    return {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }


def list_in_child(
    how: str, url: str, endpoint: str, server: ListServer | None = None
) -> dict[str, Any]:
    """One listing of `url` in a fresh interpreter (`how`: the agent's scan, or the plain
    listing by the same library): seconds, LIST pages served (by `server`, when given) and
    resident-set growth."""
    pages = server.pages if server else 0
    env = {
        **os.environ,
        **credentials(endpoint),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.stores", how, url],
        capture_output=True,
        text=True,
        env=env,
        timeout=LIST_TIMEOUT,
        check=True,
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {**figures, "requests": server.pages - pages if server else None}


def scan_figures(result: harness.Result, url: str, endpoint: str, objects: int) -> None:
    """The agent's first scan of the bucket's applications (all past the horizon) against
    the plain paginated listing of every object under the same prefix by s3fs (`find`),
    each in its own interpreter, one after the other."""
    plain = list_in_child("plain", url, endpoint)
    agent = list_in_child("agent", url, endpoint)
    result.add(
        harness.Figure(
            "first_scan_listing_seconds",
            agent["seconds"],
            "s",
            f"s3fs find of the same prefix ({objects} objects, every page)",
            plain["seconds"],
            harness.Target("<=", 1.2),
            {"agent_lists": agent["lists"], "objects_found_by_plain": plain["found"]},
        )
    )
    result.add(
        harness.Figure(
            "first_scan_listing_rss_growth_mib",
            agent["rss_growth_mib"],
            "MiB",
            "the plain listing's growth (it holds every object)",
            plain["rss_growth_mib"],
            harness.Target("<=", 64.0, on="value"),
        )
    )


def listing_figures(result: harness.Result, objects: int) -> None:
    """The agent's scan of a prefix of `objects` objects past the horizon against the plain
    paginated listing of it by s3fs, each in its own interpreter, one after the other."""
    with running_listing(objects) as server:
        url = f"s3a://bench/logs-{objects}"
        plain = list_in_child("plain", url, server.endpoint, server)
        agent = list_in_child("agent", url, server.endpoint, server)
    result.setup["listing"] = {
        "objects": objects,
        "store": "tests.listserver on loopback (ListObjectsV2, 1,000 names a page)",
        "plain": "s3fs find(detail=True) of the prefix, every page, held as a list",
        "agent": "discovery.listing with every object past store_horizon",
    }
    result.add(
        harness.Figure(
            "listing_seconds",
            agent["seconds"],
            "s",
            "the plain paginated listing of the same prefix",
            plain["seconds"],
            harness.Target("<=", 1.2),
        )
    )
    result.add(
        harness.Figure(
            "listing_requests",
            agent["requests"],
            "requests",
            "the plain paginated listing's LIST pages",
            plain["requests"],
            harness.Target("<=", 1.0),
        )
    )
    result.add(
        harness.Figure(
            "listing_rss_growth_mib",
            agent["rss_growth_mib"],
            "MiB",
            "the plain listing's growth (it holds every object)",
            plain["rss_growth_mib"],
            harness.Target("<=", 64.0, on="value"),
            {
                "agent_peak_rss_mib": agent["peak_rss_mib"],
                "plain_peak_rss_mib": plain["peak_rss_mib"],
            },
        )
    )


def child(how: str, url: str) -> None:
    """In the child: list `url` once as `how` says and print the figures as JSON."""
    import fsspec

    from agent.spark.eventlog import discovery, stores

    pid = os.getpid()
    stores.configure(300.0)  # a page, not the whole listing, has this deadline
    fs = fsspec.filesystem("s3", skip_instance_cache=True, use_listings_cache=False)
    before = harness.rss_mib(pid)
    began = time.monotonic()
    if how == "agent":
        found = len(discovery.listing(url, since_ns=time.time_ns()).refs)
    else:  # every object at any depth, as the agent lists an S3 prefix
        found = len(fs.find(url.partition("://")[2], detail=True))
    seconds = time.monotonic() - began
    peak = harness.peak_rss_mib(pid)
    figures = {"seconds": seconds, "found": found, "peak_rss_mib": peak}
    figures["lists"] = stores.requests()["list"]
    print(json.dumps({**figures, "rss_growth_mib": peak - before}))


def run(context: harness.Context) -> harness.Result:
    params = SMOKE if context.smoke else FULL
    result = harness.Result("stores", "python -m tests.bench stores")
    base = context.directory("stores-runs")
    # The AWS_* variables: the chain through which the agent finds the store.
    with (
        running_s3("bench-logs", log=base / "moto.log") as s3,
        environment(s3.env),
    ):  # AWS_* variables: the agent's chain
        began = time.monotonic()
        populate(s3, "apps", params.apps)
        s3.client().put_object(Bucket=s3.bucket, Key="empty/", Body=b"")
        made = time.monotonic() - began
        time.sleep(2.0)  # older than the 1s start horizon
        empty = follow(base / "empty", f"s3a://{s3.bucket}/empty", 0, params.steady_seconds)
        full = follow(base / "full", f"s3a://{s3.bucket}/apps", params.apps, params.steady_seconds)
        objects = params.apps // 2 + 2 * (params.apps // 2)  # a rolling log: two objects
        scan_figures(result, f"s3a://{s3.bucket}/apps", s3.endpoint, objects)
    rolling = params.apps // 2
    entries = params.apps  # names directly under the prefix: one per application
    floor_first = math.ceil(objects / 1000)
    polls_per_minute = 60.0 / POLL
    steady_per_minute = sum(full["steady"].values()) * 60.0 / params.steady_seconds
    floor_steady = math.ceil(entries / 1000) * polls_per_minute
    result.setup = {
        "applications": params.apps,
        "single_file": params.apps - rolling,
        "rolling": rolling,
        "seconds_to_make": round(made, 1),
        "store": "moto server mode on loopback (S3 API)",
        "store_poll_interval_s": POLL,
        "replay_horizon": "1s (every application is older)",
    }
    result.add(
        harness.Figure(
            "first_scan_requests",
            sum(full["first"].values()),
            "requests",
            "LIST pages of every object under the prefix, 1,000 a page",
            floor_first,
            harness.Target("<=", 1.05),
            {**full["first"], "seconds": round(full["first_scan_seconds"], 1)},
        )
    )
    result.add(
        harness.Figure(
            "steady_requests_per_minute",
            steady_per_minute,
            "requests/min",
            "the directory's LIST pages once per poll",
            floor_steady,
            harness.Target("<=", 1.2),
            {**full["steady"], "measured_seconds": params.steady_seconds},
        )
    )
    result.add(
        harness.Figure(
            "rss_mib",
            full["rss_mib"],
            "MiB",
            "RSS over an empty prefix",
            empty["rss_mib"],
            harness.Target("<=", 1.5),
            {"peak_rss_mib": round(full["peak_rss_mib"], 1)},
        )
    )
    listing_figures(result, params.objects)
    result.notes.append(
        "After the first scan no finished application is listed or read again: the steady "
        "cost is the directory's LIST pages (1,000 names each) per store_poll_interval."
    )
    return result


def endless(base: Path, seconds: float, *, rolling: bool) -> dict[str, Any]:
    """The daemon over `tests.endless_store` (`rolling`: its rolling directories only) for
    `seconds` from its first LIST page: VmRSS then and every second, until the listing ends."""
    with (
        running_endless(seconds=seconds, rolling=rolling) as store,
        environment(credentials(store.endpoint)),
        harness.CollectorProcess.standard() as collector,
    ):
        config = harness.agent_config(
            base,
            endpoint=collector.url,
            spark={"event_log_dirs": ["s3a://endless/logs"], "store_poll_interval": f"{POLL:g}s"},
        )
        with harness.agent_process(config) as agent:
            pid = agent.proc.pid
            store.wait_served(1, 60)
            samples = [(store.served, harness.rss_mib(pid))]
            deadline = time.monotonic() + seconds + 60
            while not store.stopped:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the daemon stopped asking for pages at {store.served}")
                time.sleep(1.0)
                samples.append((store.served, harness.rss_mib(pid)))
            pages, directories = store.served, store.directories_listed

            def listed() -> bool:
                found = harness.scrape(agent)
                last = "lineage_eventlog_store_last_listing_timestamp_seconds"
                return harness.total(found, last) > 0

            harness.wait_until(listed, 300, "the end of the endless listing")
            peak = harness.peak_rss_mib(pid)
            agent.stop()
    first, highest = samples[0][1], max(rss for _, rss in samples)
    return {
        "pages": pages,
        "objects": pages * PAGE,
        "directories_listed": directories,
        "first_rss_mib": first,
        "growth_mib": highest - first,
        "rss_after_a_tenth_of_the_pages_mib": round(
            next(rss for served, rss in samples if served >= pages / 10), 1
        ),
        "rss_when_the_listing_ended_mib": round(samples[-1][1], 1),
        "highest_sampled_rss_mib": round(highest, 1),
        "peak_rss_mib": round(peak, 1),
    }


def run_endless(context: harness.Context) -> harness.Result:
    """The daemon's resident set over an endless listing of each kind, sampled every second."""
    params = SMOKE if context.smoke else FULL
    result = harness.Result("stores_endless", "python -m tests.bench stores_endless")
    base = context.directory("stores-endless")
    kinds = {
        "endless_listing_rss_growth_mib": "logs of 2020, decoys (<appId>.x, .inprogress.bak, "
        "<appId>/), 1,024-byte keys",
        "endless_rolling_listing_rss_growth_mib": "rolling logs' directories of 2020 only "
        "(eventlog_v2_<appId>/), their files listed with the prefix",
    }
    result.setup = {
        "store": "tests.endless_store on loopback (ListObjectsV2, 1,000 keys a page)",
        "seconds": params.endless_seconds,
        "sampled_every_s": 1.0,
    }
    for name, keys in kinds.items():
        rolling = "rolling" in name
        run = endless(base / name, params.endless_seconds, rolling=rolling)
        first, growth = run.pop("first_rss_mib"), run.pop("growth_mib")
        result.add(
            harness.Figure(
                name,
                growth,
                "MiB",
                "RSS when the first LIST page was answered",
                first,
                harness.Target("<=", 64.0, on="value"),
                {"keys": keys, **run},
            )
        )
    return result


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2])
