"""Reading a scenario's runs and events back from Marquez 0.51's API (its `api/*Resource.java`):

* `GET /api/v1/jobs/runs/{id}` (JobResource -> RunResource.getRun): the run, its `state`
  (NEW, RUNNING, COMPLETED, ABORTED, FAILED), 404 when Marquez has no such run.
* `GET /api/v1/namespaces/{ns}/jobs` and `/jobs/{job}/runs` (`limit`, `offset`): the runs of a
  namespace, to count runs Marquez holds that the logs do not call for.
* `GET /api/v1/events/lineage` (OpenLineageResource): `after` inclusive, `before` exclusive on
  eventTime, `limit`, `offset`, `sortDirection`; `{"events": [...], "totalCount": N}`. No
  namespace or run filter, and PostgreSQL gives no order among equal times, so paging by offset
  may skip or repeat: the runner asks for the scenario's time window in one answer (first
  `limit=0` for its size) and keeps its own runs. The same logs in other scenarios share the
  window, so the answer grows with every scenario stored; `MAX_EVENTS` bounds it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from urllib.parse import quote

import httpx

from tests.faults.report import instant

MAX_EVENTS: Final = 200_000
PAGE: Final = 100
MAX_PAGES: Final = 1000
TIMEOUT: Final = 60.0


class Marquez:
    """One Marquez API at `url` (`http://127.0.0.1:5000`), loopback only."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.client = httpx.Client(base_url=self.url, timeout=TIMEOUT)

    @property
    def endpoint(self) -> str:
        """The agent's `lineage.http.endpoint` for this Marquez."""
        return self.url + "/api/v1/lineage"

    def close(self) -> None:
        self.client.close()

    def up(self) -> bool:
        """Marquez answers its API (a namespace listing, which needs its database)."""
        try:
            return self.client.get("/api/v1/namespaces", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_up(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.up():
                return True
            time.sleep(1)
        return False

    def run_state(self, run_id: str) -> str | None:
        """The RunState Marquez shows for the run, None when it has no such run."""
        answer = self.client.get(f"/api/v1/jobs/runs/{quote(run_id, safe='')}")
        if answer.status_code == 404:
            return None
        answer.raise_for_status()
        return str(answer.json().get("state"))

    def namespace_runs(self, namespace: str) -> dict[str, str]:
        """runId -> state of every run of every job in the namespace (empty if there is none)."""
        runs: dict[str, str] = {}
        ns = quote(namespace, safe="")
        for job in self._pages(f"/api/v1/namespaces/{ns}/jobs", "jobs"):
            name = quote(str(job["name"]), safe="")
            for run in self._pages(f"/api/v1/namespaces/{ns}/jobs/{name}/runs", "runs"):
                runs[str(run["id"])] = str(run.get("state"))
        return runs

    def _pages(self, path: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in range(MAX_PAGES):
            answer = self.client.get(path, params={"limit": PAGE, "offset": page * PAGE})
            if answer.status_code == 404:
                return items
            answer.raise_for_status()
            found = answer.json().get(key) or []
            items.extend(found)
            if len(found) < PAGE:
                break
        return items

    def events_between(self, first: str, last: str) -> list[dict[str, Any]]:
        """Every stored event with first <= eventTime <= last, in one answer."""
        after = _iso(first, timedelta(0))
        before = _iso(last, timedelta(milliseconds=1))
        params: dict[str, str | int] = {"after": after, "before": before, "limit": 0}
        count = int(self.client.get("/api/v1/events/lineage", params=params).json()["totalCount"])
        params["limit"] = min(count + PAGE, MAX_EVENTS)
        answer = self.client.get("/api/v1/events/lineage", params=params)
        answer.raise_for_status()
        events: list[dict[str, Any]] = answer.json()["events"]
        return events

    def count_between(self, first: str, last: str) -> int:
        params: dict[str, str | int] = {
            "after": _iso(first, timedelta(0)),
            "before": _iso(last, timedelta(milliseconds=1)),
            "limit": 0,
        }
        answer = self.client.get("/api/v1/events/lineage", params=params)
        answer.raise_for_status()
        return int(answer.json()["totalCount"])


def _iso(text: str, plus: timedelta) -> str:
    """An event time as `after` / `before` text (whole milliseconds, rounded outwards)."""
    moment = datetime.strptime(instant(text)[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    return (moment + plus).isoformat(timespec="microseconds")


def time_window(events: Iterable[dict[str, Any]]) -> tuple[str, str]:
    """(earliest, latest) eventTime of the events, canonical text."""
    times = sorted(instant(str(event["eventTime"])) for event in events)
    return times[0], times[-1]
