"""Tables' metadata read within a memory bound and once per file version (`spark.tablemeta`,
`spark.tables`), with the answers the whole-document reading gave.

The memory is measured in a child process on files built to exhaust it (`tests.hostile_tables`);
the answers are compared with `reference_*` below, the reader as it was before it streamed
(json.loads of each file), on metadata files hypothesis writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.spark.plan.syntax.schema import Field, field_of, spark_struct
from agent.spark.tables.filecache import FileCache
from agent.spark.tables.metadata import DiskTableMetadata
from tests.hostile_tables import HOSTILE, measure
from tests.test_tablemeta import DELTA_SCHEMA, ICEBERG_SCHEMAS, PEOPLE, delta_commit

BOUND = 64 * 2**20  # extra memory a reader may take, whatever a file holds
#: What each hostile table answers (exists, committed, schema, schema at version 1): the
#: flooded commit still tells its timestamp; the rest tells nothing.
ANSWERS = {
    "iceberg_snapshots": [True, None, None, None],
    "iceberg_schema": [True, None, None, None],
    "iceberg_deep": [True, None, None, None],
    "delta_commit_info": [True, "1", None, None],
    "delta_schema": [True, None, None, None],
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_metadata_read_within_the_memory_bound(tmp_path: Path, name: str) -> None:
    """A metadata file under the size limit built to exhaust memory (the field's 32.7 MB
    `{"snapshots":[{},{},...]}`, a 4 MB Delta commit) costs the reader under 64 MiB more
    than it had, in RSS, answering all the translator asks twice."""
    fmt, build = HOSTILE[name]
    build(tmp_path / name)
    # The limit turns a reader that takes far more into a MemoryError, not a machine's swap.
    result = measure(fmt, tmp_path / name, limit_mb=512, trace=False)
    assert result["answers"] == result["again"] == ANSWERS[name]
    assert result["rss_extra"] < BOUND, f"{result['rss_extra'] / 2**20:.0f} MiB"


def test_the_fields_memory_traced_too(tmp_path: Path) -> None:
    """tracemalloc sees the same bound of what Python allocates for the worst schema flood."""
    fmt, build = HOSTILE["delta_schema"]
    build(tmp_path / "t")
    result = measure(fmt, tmp_path / "t", limit_mb=512)
    assert result["traced_peak"] < BOUND, f"{result['traced_peak'] / 2**20:.0f} MiB"


# -- once per version --------------------------------------------------------------------------


def iceberg_file(table: Path, name: str, document: dict[str, Any]) -> Path:
    (table / "metadata").mkdir(parents=True, exist_ok=True)
    path = table / "metadata" / name
    path.write_text(json.dumps(document))
    return path


def ask_all(tables: DiskTableMetadata, fmt: Any, table: Path, times: int = 5) -> list[Any]:
    """What the translator asks of a table, `times` over (as for that many runs)."""
    answers = []
    for _ in range(times):
        answers = [
            tables.exists(fmt, str(table)),
            tables.committed(fmt, str(table), 0, 10_000),
            tables.schema(fmt, str(table), None),
            tables.schema(fmt, str(table), "7"),
        ]
    return answers


def test_iceberg_metadata_file_parsed_once_per_version(tmp_path: Path) -> None:
    """Every question about an Iceberg table parses its newest metadata file once; a new
    metadata file, or the file replaced, is parsed once more."""
    document: dict[str, Any] = {
        "current-schema-id": 1,
        "schemas": ICEBERG_SCHEMAS,
        "snapshots": [{"snapshot-id": 7, "timestamp-ms": 1000, "schema-id": 0}],
    }
    iceberg_file(tmp_path, "v1.metadata.json", document)
    tables = DiskTableMetadata()
    first = ask_all(tables, "iceberg", tmp_path)
    assert first[1] == "7"
    assert first[3] == (Field("id", "integer"),)
    assert tables.iceberg.parses == 1
    document["snapshots"].append({"snapshot-id": 8, "timestamp-ms": 2000, "schema-id": 1})
    iceberg_file(tmp_path, "v2.metadata.json", document)
    assert ask_all(tables, "iceberg", tmp_path)[1] == "8"
    assert tables.iceberg.parses == 2
    replaced = tmp_path / "replacement.json"
    replaced.write_text(json.dumps({**document, "snapshots": []}))
    os.replace(replaced, tmp_path / "metadata" / "v2.metadata.json")
    assert ask_all(tables, "iceberg", tmp_path)[1] is None
    assert tables.iceberg.parses == 3


def test_delta_commits_parsed_once_per_version(tmp_path: Path) -> None:
    """Each Delta commit file is parsed once, however often the versions and the schema are
    asked; a new commit adds one parse."""
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / f"{0:020d}.json").write_text(
        json.dumps({"commitInfo": {"timestamp": 500}})
        + "\n"
        + json.dumps({"metaData": {"id": "x", "schemaString": json.dumps(DELTA_SCHEMA)}})
        + "\n"
    )
    for version, stamp in ((1, 1000), (2, 2000)):
        delta_commit(tmp_path, version, stamp)
    tables = DiskTableMetadata()
    answers = ask_all(tables, "delta", tmp_path)
    assert answers[1] == "2"
    assert answers[2] == spark_struct(json.dumps(DELTA_SCHEMA))
    assert tables.commits.parses == 3
    delta_commit(tmp_path, 3, 3000)
    assert ask_all(tables, "delta", tmp_path)[1] == "3"
    assert tables.commits.parses == 4


def test_parquet_footer_parsed_once_per_version() -> None:
    """A parquet dataset's footer is parsed once, through its directory or its file."""
    tables = DiskTableMetadata()
    for _ in range(5):
        assert tables.schema("parquet", str(PEOPLE / "people"), None)
    assert tables.footers.parses == 1


def test_cache_bounded_by_entries_and_size() -> None:
    """The least recently used versions go first past either bound; a value larger than
    the whole size bound is returned but not kept."""
    cache: FileCache[str] = FileCache(entries=2, size=100)
    versions = [(f"/t/{n}", 1, n, 10, 1, 1) for n in range(4)]
    for version in versions[:3]:
        assert cache.get(version, lambda: ("told", 10)) == "told"
    assert (len(cache), cache.parses) == (2, 3)
    cache.get(versions[1], lambda: ("again", 10))
    assert cache.parses == 3  # kept: not parsed again
    cache.get(versions[0], lambda: ("big", 80))
    assert (len(cache), cache.size, cache.parses) == (2, 90, 4)  # 2 pushed out, 1 was used
    cache.get(versions[2], lambda: ("bigger", 85))
    assert (len(cache), cache.size) == (1, 85)  # 1 and 0 pushed out for the size
    assert cache.get(versions[3], lambda: ("huge", 101)) == "huge"
    assert (len(cache), cache.size) == (1, 85)


# -- the answers of the whole-document reader ----------------------------------------------------

_REF_ICEBERG_TYPES = {
    "int": "integer",
    "timestamptz": "timestamp",
    "timestamp": "timestamp_ntz",
    "uuid": "string",
    "time": "long",
}


def reference_iceberg_committed(document: Any, start_ms: int, end_ms: int) -> str | None:
    snapshots = document.get("snapshots") if isinstance(document, dict) else None
    best: tuple[int, int] | None = None
    for snapshot in snapshots if isinstance(snapshots, list) else []:
        if not isinstance(snapshot, dict):
            continue
        stamp, snapshot_id = snapshot.get("timestamp-ms"), snapshot.get("snapshot-id")
        if not (isinstance(stamp, int) and isinstance(snapshot_id, int)):
            continue
        if start_ms <= stamp <= end_ms and (best is None or stamp >= best[0]):
            best = (stamp, snapshot_id)
    return None if best is None else str(best[1])


def reference_iceberg_schema(document: Any, snapshot_id: int | None) -> Any:
    if not isinstance(document, dict):
        return None
    current = document.get("current-schema-id")
    snapshots = document.get("snapshots") if snapshot_id is not None else None
    for snapshot in snapshots if isinstance(snapshots, list) else []:
        if isinstance(snapshot, dict) and snapshot.get("snapshot-id") == snapshot_id:
            current = snapshot.get("schema-id", current)
    schemas = document.get("schemas")
    try:
        for schema in schemas if isinstance(schemas, list) else []:
            if isinstance(schema, dict) and schema.get("schema-id") == current:
                return _reference_struct(schema)
        legacy = document.get("schema")
        return _reference_struct(legacy) if isinstance(legacy, dict) else None
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def _reference_struct(struct: Any) -> tuple[Field, ...]:
    return tuple(_reference_field(f["name"], f["type"]) for f in struct["fields"])


def _reference_field(name: str, kind: Any) -> Field:
    if not isinstance(name, str):
        raise TypeError(name)
    if isinstance(kind, str):
        if kind.startswith("fixed["):
            return Field(name, "binary")
        return field_of(name, _REF_ICEBERG_TYPES.get(kind, kind))
    form = kind["type"]
    if form == "struct":
        return Field(name, "struct", _reference_struct(kind))
    if form == "list":
        return Field(name, "array", (_reference_field("_element", kind["element"]),))
    if form == "map":
        key = _reference_field("key", kind["key"])
        return Field(name, "map", (key, _reference_field("value", kind["value"])))
    raise ValueError(form)


def reference_delta(raws: list[bytes], start_ms: int, end_ms: int) -> str | None:
    try:
        for version in reversed(range(len(raws))):
            stamp = _reference_commit_time(raws[version])
            if stamp is None:
                continue
            if stamp < start_ms:
                return None
            if stamp <= end_ms:
                return str(version)
    except ValueError:
        return None
    return None


def _reference_commit_time(raw: bytes) -> int | None:
    for line in raw.splitlines():
        if b'"commitInfo"' not in line:
            continue
        action = json.loads(line)
        info = action.get("commitInfo") if isinstance(action, dict) else None
        stamp = info.get("timestamp") if isinstance(info, dict) else None
        if isinstance(stamp, int) and not isinstance(stamp, bool):
            return stamp
    return None


def reference_delta_schema(raws: list[bytes], at: int | None) -> tuple[Field, ...] | None:
    versions = [v for v in reversed(range(len(raws))) if at is None or v <= at]
    try:
        for version in versions:
            for line in raws[version].splitlines():
                if b'"metaData"' not in line:
                    continue
                action = json.loads(line)
                meta = action.get("metaData") if isinstance(action, dict) else None
                text = meta.get("schemaString") if isinstance(meta, dict) else None
                if isinstance(text, str):
                    return spark_struct(text)
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return None


# Few distinct ids, times and windows: snapshots and commits at the same time, the asked
# snapshot listed twice, windows ending on a commit.
ids = st.sampled_from([1, 7, 8, 2**63 - 1, -(2**63)])
stamps = st.sampled_from([500, 1000, 1500, 2000])
windows = st.tuples(st.sampled_from([0, 999, 1000, 1500]), st.sampled_from([999, 1000, 2000, 3000]))
iceberg_types: st.SearchStrategy[Any] = st.recursive(
    st.sampled_from(["int", "long", "string", "timestamptz", "timestamp", "fixed[4]", "uuid"])
    | st.sampled_from(["decimal(10,2)", "date", "bad<type", 7]),
    lambda inner: (
        st.builds(lambda e: {"type": "list", "element-id": 2, "element": e}, inner)
        | st.builds(lambda k, v: {"type": "map", "key": k, "value": v}, inner, inner)
        | st.builds(
            lambda fs: {"type": "struct", "fields": fs},
            st.lists(st.builds(lambda n, t: {"name": n, "type": t}, st.text(max_size=3), inner)),
        )
        | st.just({"type": "variant"})
    ),
    max_leaves=6,
)
fields: st.SearchStrategy[list[dict[str, Any]]] = st.lists(
    st.builds(dict, name=st.text(max_size=4), type=iceberg_types), max_size=4
)
iceberg_schema = st.fixed_dictionaries(
    {"type": st.just("struct"), "schema-id": st.integers(0, 3), "fields": fields}
) | st.fixed_dictionaries({"type": st.just("struct"), "fields": fields})
summary = st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)
snapshot = st.fixed_dictionaries(
    {"snapshot-id": ids, "timestamp-ms": stamps},
    optional={"schema-id": st.integers(0, 3), "summary": summary},
) | st.fixed_dictionaries(  # as no Iceberg writer writes them
    {},
    optional={
        "snapshot-id": ids | st.sampled_from(["7", 7.5, None]) | st.integers(),
        "timestamp-ms": stamps | st.just("1000"),
        "schema-id": st.integers(0, 3),
    },
)
iceberg_document = st.fixed_dictionaries(
    {},
    optional={
        "format-version": st.sampled_from([1, 2]),
        "current-schema-id": st.integers(0, 3) | st.sampled_from([1.0, "1", [1]]),
        "schemas": st.lists(iceberg_schema, max_size=4)
        | st.just(ICEBERG_SCHEMAS)
        | st.just({"0": {}}),
        "schema": iceberg_schema,
        "snapshots": st.lists(snapshot | st.sampled_from([5, "x", []]), max_size=8),
        "properties": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    },
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    document=iceberg_document | st.sampled_from([[], "x", 3]),
    window=windows,
    asked=st.sampled_from([None, "7", "-3", "x"]),
)
@example(  # the asked snapshot listed twice: its last listing's schema
    document={
        "schemas": ICEBERG_SCHEMAS,
        "snapshots": [{"snapshot-id": 7, "timestamp-ms": 500, "schema-id": 0}],
    },
    window=(0, 3000),
    asked="7",
)
def test_iceberg_answers_as_the_whole_document_gave(
    tmp_path_factory: pytest.TempPathFactory,
    document: Any,
    window: tuple[int, int],
    asked: str | None,
) -> None:
    """On any metadata file an Iceberg writer could write (and some it would not), the
    snapshot a window finds and the schema of a snapshot are those json.loads gave."""
    table = tmp_path_factory.mktemp("iceberg")
    if isinstance(document, dict) and document.get("snapshots"):  # one snapshot listed twice
        listed = {"snapshot-id": 7, "timestamp-ms": 1500, "schema-id": 1}
        document = {**document, "snapshots": [*document["snapshots"], listed]}
    iceberg_file(table, "v1.metadata.json", document)
    tables = DiskTableMetadata()
    at = int(asked) if asked is not None and asked.lstrip("-").isdigit() else None
    assert tables.committed("iceberg", str(table), *window) == reference_iceberg_committed(
        document, *window
    )
    assert tables.schema("iceberg", str(table), asked) == reference_iceberg_schema(document, at)


def test_a_key_given_twice_counts_with_its_last_value(tmp_path: Path) -> None:
    """A key repeated in an Iceberg metadata file, a snapshot, a Delta action or its
    commitInfo counts with its last value, as json.loads reads it."""
    text = (
        '{"snapshots":[{"snapshot-id":1,"timestamp-ms":1000}],'
        '"snapshots":[{"snapshot-id":2,"timestamp-ms":1000,"snapshot-id":3}],'
        '"current-schema-id":5,"current-schema-id":0,"schemas":[{"schema-id":0,'
        '"fields":[{"name":"a","type":"int"}],"fields":[{"name":"b","type":"long"}]}]}'
    )
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "v1.metadata.json").write_text(text)
    tables = DiskTableMetadata()
    assert tables.committed("iceberg", str(tmp_path), 0, 2000) == "3"
    assert tables.schema("iceberg", str(tmp_path), None) == (Field("b", "long"),)
    assert tables.committed("iceberg", str(tmp_path), 0, 2000) == reference_iceberg_committed(
        json.loads(text), 0, 2000
    )
    log = tmp_path / "delta" / "_delta_log"
    log.mkdir(parents=True)
    schema = json.dumps(json.dumps({"type": "struct", "fields": []}))
    raws = [
        b'{"metaData": {"schemaString": %s}, "metaData": 2}\n' % schema.encode(),
        b'{"commitInfo": {"timestamp": 1000}, "commitInfo": {"timestamp": 2000}}\n',
        b'{"commitInfo": {"timestamp": 1500, "timestamp": "x"}}\n'
        b'{"metaData": {"schemaString": 3, "schemaString": %s}}\n' % schema.encode(),
    ]
    for version, raw in enumerate(raws):
        (log / f"{version:020d}.json").write_bytes(raw)
    delta = str(tmp_path / "delta")
    assert tables.committed("delta", delta, 0, 1999) is None  # commit 1 was at 2000
    assert tables.committed("delta", delta, 0, 2000) == "1"
    assert tables.schema("delta", delta, None) == ()
    assert tables.schema("delta", delta, "1") is None  # commit 0's metaData is no object
    for window in ((0, 1999), (0, 2000)):
        assert tables.committed("delta", delta, *window) == reference_delta(raws, *window)
    assert tables.schema("delta", delta, "1") == reference_delta_schema(raws, 1)


SCHEMA_STRINGS = [
    json.dumps(DELTA_SCHEMA),
    json.dumps({"type": "struct", "fields": []}),
    json.dumps({"type": "struct", "fields": [{"name": "a"}]}),  # unreadable: no type
    "{not json",
]
delta_line = st.one_of(
    st.builds(
        lambda stamp: json.dumps({"commitInfo": {"operation": "WRITE", **stamp}}),
        st.fixed_dictionaries(
            {}, optional={"timestamp": stamps | st.sampled_from(["1", True, 1.5])}
        ),
    ),
    st.builds(
        lambda text: json.dumps({"metaData": {"id": "x", "schemaString": text}}),
        st.sampled_from(SCHEMA_STRINGS) | st.just(3),
    ),
    st.builds(
        lambda stamp, text: json.dumps(
            {"commitInfo": {"timestamp": stamp}, "metaData": {"schemaString": text}}
        ),
        stamps,
        st.sampled_from(SCHEMA_STRINGS),
    ),
    st.just(json.dumps({"add": {"path": "part-0.parquet", "size": 1}})),
    st.sampled_from(  # malformed, not an object, a key given twice
        [
            '{"commitInfo": {',
            '["commitInfo"]',
            '{"metaData": 1} 2',
            '"metaData"',
            "",
            '{"add": ',
            '{"commitInfo": {"timestamp": 1500, "timestamp": "x"}}',
            '{"commitInfo": {"timestamp": "x", "timestamp": 1500}}',
            '{"commitInfo": {"timestamp": 1000}, "commitInfo": {"timestamp": 2000}}',
            '{"metaData": {"schemaString": "{}"}, "metaData": 2}',
        ]
    ),
)
delta_commit_text = st.builds(
    lambda lines, end: end.join(lines) + end,
    st.lists(delta_line, min_size=1, max_size=4),
    st.sampled_from(["\n", "\r\n", "\r"]),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    commits=st.lists(delta_commit_text, min_size=1, max_size=4),
    window=windows,
    at=st.sampled_from([None, 0, 1, 2]),
)
def test_delta_answers_as_the_whole_commits_gave(
    tmp_path_factory: pytest.TempPathFactory,
    commits: list[str],
    window: tuple[int, int],
    at: int | None,
) -> None:
    """On any commits (and some lines no Delta writer writes), the version a window finds and
    the schema at a version are those the whole-file reading gave."""
    table = tmp_path_factory.mktemp("delta")
    (table / "_delta_log").mkdir()
    raws = [text.encode() for text in commits]
    for version, raw in enumerate(raws):
        (table / "_delta_log" / f"{version:020d}.json").write_bytes(raw)
    tables = DiskTableMetadata()
    asked = None if at is None else str(at)
    assert tables.committed("delta", str(table), *window) == reference_delta(raws, *window)
    assert tables.schema("delta", str(table), asked) == reference_delta_schema(raws, at)
