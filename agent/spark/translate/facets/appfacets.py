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
  The patterns run on RE2 (see `Redaction`).
* `tags` (standard job facet, every run): the configured `key:value` tags, source `CONFIG`.
* `sql` (standard job facet): the statement of a run a SQL shell ran (see `steps`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from agent import linear
from agent.facets import facet

#: Spark's default `spark.redaction.regex`.
REDACTION: Final = r"(?i)secret|password|token|access[.]?key"
_SPARK_DEFAULT: Final = linear.compile(REDACTION)
#: What hides a property when the application's own pattern cannot be used (see `Redaction`).
_CONSERVATIVE: Final = linear.compile(
    rf"{REDACTION}|passw|pwd|credential|auth|key|sasl|jaas|signature|private|cert"
    rf"|[A-Za-z][A-Za-z0-9+.-]*://[^/@{linear.SPACE}]*@"
)
_OPAQUE: Final = linear.compile(r"[A-Za-z0-9+/=_-]{20,}")
#: RE2's memory for the application's own pattern: compiling is bounded, and so is matching.
_OWN_PATTERN_MEMORY: Final = 1 << 20
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


@dataclass(frozen=True, slots=True)
class Redaction:
    """What hides a property from the `lineageAgent_sparkProperties` facet: a match of its
    name or value.

    Spark's default pattern always hides, and so does the application's own
    `spark.redaction.regex`, run by RE2: whatever the application wrote, a match takes time
    linear in the value (Python's `re` would take minutes on `(x+x+)+y`), and compiling
    it at most `_OWN_PATTERN_MEMORY` bytes. RE2 reads most Java patterns as Java does (its
    `\\w`, `\\s`, `\\b` are ASCII, as Java's are). When RE2 cannot compile the application's
    pattern (lookaround, backreferences, possessive quantifiers: Java-only constructs; or a
    program too large), a fixed conservative redaction stands in: a property is hidden when
    its name or value matches Spark's default pattern; or names a credential (`passw`,
    `pwd`, `credential`, `auth`, `key`, `sasl`, `jaas`, `signature`, `private`, `cert`, in
    any case); or holds a URL with user information (`scheme://user:password@host`); or
    holds a run of 20 or more letters, digits, `+`, `/`, `=`, `_`, `-` that mixes letters
    and digits (an access key, a token, a hash). It hides more than the application's
    pattern would: a property that should be shown may be missing, a secret is not shown.
    """

    own: str | None  # the application's pattern, as its log gave it
    patterns: tuple[linear.Pattern, ...]
    #: why the application's pattern is not used, for a warning; never quotes the pattern
    problem: str | None = None

    def hides(self, name: str, value: str) -> bool:
        """Whether the property `name` = `value` stays out of the facet."""
        if any(p.search(name) or p.search(value) for p in self.patterns):
            return True
        return self.problem is not None and any(map(_mixed, _OPAQUE.findall(value)))


def redaction(own: str | None) -> Redaction:
    """The redaction of an application whose `spark.redaction.regex` is `own` (None: unset)."""
    if not own:
        return Redaction(own, (_SPARK_DEFAULT,))
    try:
        pattern = linear.compile_foreign(own, max_mem=_OWN_PATTERN_MEMORY)
    except linear.PatternError as error:
        return Redaction(own, (_CONSERVATIVE,), _problem(error))
    return Redaction(own, (_SPARK_DEFAULT, pattern))


def _problem(error: linear.PatternError) -> str:
    """Why RE2 refused a pattern, without the part of the pattern its message quotes."""
    message = error.args[0] if error.args else ""
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
    reason = text.split(":", 1)[0].strip() or "unreadable"
    return (
        f"spark.redaction.regex is not used: RE2 cannot compile it ({reason}); Spark's default "
        "pattern and a conservative one for credentials hide properties instead"
    )


def _mixed(run: str) -> bool:
    """Whether a run of token characters holds both letters and digits."""
    return any(ch.isdigit() for ch in run) and any(ch.isalpha() for ch in run)


def spark_properties(
    props: Mapping[str, str], allowed: Iterable[str], hidden: Redaction
) -> dict[str, Any] | None:
    """The `lineageAgent_sparkProperties` facet, or None when no allowed property is set."""
    shown = {
        key: props[key]
        for key in sorted(set(allowed))
        if key in props and _REDACTED not in props[key] and not hidden.hides(key, props[key])
    }
    return facet("lineageAgent_sparkProperties", properties=shown) if shown else None


Tag = tuple[str, str, str]  # key, value, source


def tags_facet(
    tags: Iterable[tuple[str, str]], own: Iterable[Tag] = (), *, run: bool = False
) -> dict[str, Any] | None:
    """The standard `tags` job (or `run`) facet: the configured tags (source `CONFIG`), then
    the application's own (`spark.openlineage.job.tags` / `run.tags`), which replace a
    configured tag of the same key; None without tags."""
    entries: dict[str, dict[str, str]] = {}
    for key, value in tags:
        entries[key] = {"key": key, "value": value, "source": "CONFIG"}
    for key, value, source in own:
        entries.pop(key, None)
        entries[key] = {"key": key, "value": value, "source": source}
    if not entries:
        return None
    return facet("tags_run" if run else "tags", tags=list(entries.values()))


#: Tags one property may give; the rest is ignored (a property is untrusted text).
MAX_TAGS: Final = 256


def listener_tags(text: str | None) -> tuple[Tag, ...]:
    """Tags as the OpenLineage Spark listener reads `spark.openlineage.job.tags` and
    `run.tags`: `;` between tags, `:` between key, value and source (`\\;` and `\\:` escape
    them); a tag without a value is `true`, the source defaults to `CONFIG`, parts past the
    third are ignored, a tag without a key is skipped. One pass, linear in the text."""
    if not text:
        return ()
    found: list[Tag] = []
    parts: list[str] = []
    current: list[str] = []
    escaped = False

    def end_tag() -> None:
        parts.append("".join(current).strip())
        current.clear()
        key = parts[0] if parts else ""
        if key and len(found) < MAX_TAGS:
            value = parts[1] if len(parts) > 1 and parts[1] else "true"
            source = parts[2] if len(parts) > 2 and parts[2] else "CONFIG"
            found.append((key, value, source))
        parts.clear()

    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ":":
            parts.append("".join(current).strip())
            current.clear()
        elif char == ";":
            end_tag()
        else:
            current.append(char)
    end_tag()
    return tuple(found)


def sql_facet(query: str) -> dict[str, Any]:
    """The standard `sql` job facet of a statement Spark ran."""
    return facet("sql", query=query, dialect="spark")
