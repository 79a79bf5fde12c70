"""The facets users expect beside lineage, built from what the event log says. Pure.

* `lineageAgent_application` (run facet of the application run): application id, attempt,
  name, user, `spark.master`, `spark.submit.deployMode`, the live Spark UI and the History
  Server page of the application, each only when the log (or the agent's config) tells it.
  The UI URL is written only when the log names the address: the YARN proxy base, or
  `spark.driver.host` with an explicitly set `spark.ui.port` (Spark moves to 4041, 4042, ...
  when 4040 is taken, so the default port would be a guess).
* `lineageAgent_sparkProperties` (run facet of the application run): the allow-listed
  properties (`spark.properties_facet`), minus every property whose name or value matches
  the redaction pattern: the application's own `spark.redaction.regex` when it set one,
  and always Spark's default one (`REDACTION`), so a secret is never shipped even when the
  application narrowed its own pattern. Values Spark already redacted are left out too.
* `tags` (standard job facet, every run): the configured `key:value` tags, source `CONFIG`.
* `sql` (standard job facet): the statement of a run a SQL shell ran (see `steps`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from agent.facets import facet

#: Spark's default `spark.redaction.regex`.
REDACTION: Final = r"(?i)secret|password|token|access[.]?key"
#: What Spark writes in place of a redacted value.
_REDACTED: Final = "*********(redacted)"
_YARN_PROXY: Final = (
    "spark.org.apache.hadoop.yarn.server.webproxy.amfilter.AmIpFilter.param.PROXY_URI_BASES"
)
#: The Spark properties the application facet reads.
DETAIL_PROPERTIES: Final = frozenset(
    {
        "spark.master",
        "spark.submit.deployMode",
        "spark.driver.host",
        "spark.ui.enabled",
        "spark.ui.port",
        "spark.redaction.regex",
        "spark.yarn.historyServer.address",
        _YARN_PROXY,
    }
)


def application_details(
    ids: tuple[str, str | None, str],
    user: str | None,
    props: Mapping[str, str],
    history_server_url: str | None,
) -> dict[str, Any]:
    """The `lineageAgent_application` facet of application `ids` (app id, attempt, name)."""
    app_id, attempt, name = ids
    fields: dict[str, Any] = {"applicationId": app_id}
    optional = {
        "attemptId": attempt,
        "applicationName": name,
        "user": user,
        "master": props.get("spark.master"),
        "deployMode": props.get("spark.submit.deployMode"),
        "uiUrl": _ui_url(props),
        "historyUrl": _history_url(app_id, attempt, props, history_server_url),
    }
    fields.update((k, v) for k, v in optional.items() if v)
    return facet("lineageAgent_application", **fields)


def _ui_url(props: Mapping[str, str]) -> str | None:
    if props.get("spark.ui.enabled", "true").strip().lower() == "false":
        return None
    proxy = props.get(_YARN_PROXY, "").split(",")[0].strip()
    if proxy.startswith(("http://", "https://")):
        return proxy.rstrip("/") + "/"
    host, port = props.get("spark.driver.host"), props.get("spark.ui.port", "").strip()
    if host and port.isdigit() and int(port) > 0:
        return f"http://{_bracketed(host)}:{port}/"
    return None


def _history_url(
    app_id: str, attempt: str | None, props: Mapping[str, str], configured: str | None
) -> str | None:
    base = configured or props.get("spark.yarn.historyServer.address")
    if not base:
        return None
    base = base.strip().rstrip("/")
    if "://" not in base:
        base = f"http://{base}"
    page = f"{base}/history/{app_id}/"
    return f"{page}{attempt}/" if attempt else page


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def spark_properties(props: Mapping[str, str], allowed: Iterable[str]) -> dict[str, Any] | None:
    """The `lineageAgent_sparkProperties` facet, or None when no allowed property is set."""
    patterns = [re.compile(REDACTION)]
    own = props.get("spark.redaction.regex")
    if own:
        # a Java-only construct cannot be compiled here: Spark's default still applies
        with contextlib.suppress(re.error):
            patterns.append(re.compile(own))
    shown = {
        key: props[key]
        for key in sorted(set(allowed))
        if key in props
        and _REDACTED not in props[key]
        and not any(p.search(key) or p.search(props[key]) for p in patterns)
    }
    return facet("lineageAgent_sparkProperties", properties=shown) if shown else None


def tags_facet(tags: Iterable[tuple[str, str]]) -> dict[str, Any] | None:
    """The standard `tags` job facet of the configured tags, or None without tags."""
    entries = [{"key": key, "value": value, "source": "CONFIG"} for key, value in tags]
    return facet("tags", tags=entries) if entries else None


def sql_facet(query: str) -> dict[str, Any]:
    """The standard `sql` job facet of a statement Spark ran."""
    return facet("sql", query=query, dialect="spark")
