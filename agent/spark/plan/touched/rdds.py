"""RDD jobs outside SQL, read from a JobStart's `Stage Infos`.

`rdd_inputs`: RDDs named by a path (`sc.textFile`) are inputs. An RDD save's output path
never reaches the event log: `rdd_output` takes it from the `spark.lineageAgent.output` job
property the program sets for the save (`sc.setLocalProperty`), and only for a job that
saves. `rdd_job_suffix` names an RDD job after its RDD lineage, as the OpenLineage
integration does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from agent import linear
from agent.spark.plan.syntax.tables import normalize

#: RDD classes named after themselves (`MapPartitionsRDD`), and the suffix their step drops.
_RDD_CLASS = linear.compile(rf"[A-Z][{linear.WORD}]*RDD\d*")
_RDD_SUFFIX = linear.compile(r"RDD\d*$")
#: The `name` of an RDD's scope, a JSON text in the event log.
_SCOPE_NAME = linear.compile(r'"name":"((?:[^"\\]|\\.)*)"')
_URI = linear.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:/")
_FILE_RDD_SCOPES: Final = frozenset(
    {
        "textFile",
        "wholeTextFiles",
        "binaryFiles",
        "hadoopFile",
        "newAPIHadoopFile",
        "sequenceFile",
        "objectFile",
    }
)


def rdd_inputs(stage_infos: object) -> tuple[str, ...]:
    """Paths read by an RDD job: RDDs that `textFile` and friends name after their input."""
    found: list[str] = []
    for rdd in _rdds(stage_infos):
        name = rdd.get("Name")
        if not isinstance(name, str) or not _looks_like_location(name):
            continue
        scope = _scope_name(rdd.get("Scope"))
        if scope is not None and scope not in _FILE_RDD_SCOPES:
            continue
        for path in name.split(","):  # textFile accepts comma-joined paths
            if path.strip() and path.strip() not in found:
                found.append(path.strip())
    return tuple(found)


#: The job property a program sets to name an RDD save's output, which Spark never logs.
OUTPUT_PROPERTY: Final = "spark.lineageAgent.output"
_SAVE_SCOPES: Final = frozenset(
    {
        "saveAsTextFile",
        "saveAsHadoopFile",
        "saveAsHadoopDataset",
        "saveAsNewAPIHadoopFile",
        "saveAsNewAPIHadoopDataset",
        "saveAsSequenceFile",
        "saveAsObjectFile",
    }
)


def rdd_output(stage_infos: object, properties: Mapping[str, Any]) -> str | None:
    """The path an RDD save writes, as the job's `spark.lineageAgent.output` property names
    it; None for a job that saves nothing (a property left set by an earlier save must not
    name a later count's output) or without the property."""
    path = properties.get(OUTPUT_PROPERTY)
    if not isinstance(path, str) or not path.strip():
        return None
    if not any(_scope_name(r.get("Scope")) in _SAVE_SCOPES for r in _rdds(stage_infos)):
        return None
    return path.strip()


def rdd_job_suffix(stage_infos: object) -> str | None:
    """Name an RDD job after its RDD lineage (`python_map_partitions_hadoop`), as the
    OpenLineage integration does: class names for unnamed RDDs, `hadoop` for the RDD named
    after its input path, `map_partitions` for one named like its parent."""
    rdds: dict[int, Mapping[str, Any]] = {}
    final_stage: tuple[int, list[int]] | None = None
    if not isinstance(stage_infos, Sequence) or isinstance(stage_infos, str):
        return None
    for stage in stage_infos:
        if not isinstance(stage, Mapping):
            continue
        ids = [r["RDD ID"] for r in _rdds([stage]) if isinstance(r.get("RDD ID"), int)]
        for rdd in _rdds([stage]):
            if isinstance(rdd.get("RDD ID"), int):
                rdds[rdd["RDD ID"]] = rdd
        stage_id = stage.get("Stage ID")
        if isinstance(stage_id, int) and ids and (final_stage is None or stage_id > final_stage[0]):
            final_stage = (stage_id, ids)
    if final_stage is None:
        return None
    suffix = _name_rdd(max(final_stage[1]), rdds, depth=0)
    return normalize(suffix) or None


def _name_rdd(rdd_id: int, rdds: Mapping[int, Mapping[str, Any]], depth: int) -> str:
    rdd = rdds[rdd_id]
    name = rdd.get("Name") if isinstance(rdd.get("Name"), str) else ""
    parents = [p for p in _int_list(rdd.get("Parent IDs")) if p in rdds and p != rdd_id]
    if _RDD_CLASS.fullmatch(name or ""):
        own = normalize(_RDD_SUFFIX.sub("", name or ""))
    elif not name or _looks_like_location(name):
        same_as_parent = any(rdds[p].get("Name") == name for p in parents)
        own = "map_partitions" if same_as_parent else "hadoop"
    else:
        own = name
    if not parents or depth > 50:
        return own
    deps = "_".join(_name_rdd(p, rdds, depth + 1) for p in parents)[:100]
    return deps if deps.startswith(own) else f"{own}_{deps}"


def _rdds(stage_infos: object) -> Iterator[Mapping[str, Any]]:
    if not isinstance(stage_infos, Sequence) or isinstance(stage_infos, str):
        return
    for stage in stage_infos:
        infos = stage.get("RDD Info") if isinstance(stage, Mapping) else None
        if isinstance(infos, Sequence) and not isinstance(infos, str):
            yield from (r for r in infos if isinstance(r, Mapping))


def _scope_name(scope: object) -> str | None:
    if not isinstance(scope, str):
        return None
    match = _SCOPE_NAME.search(scope)
    return match[1] if match else None


def _looks_like_location(name: str) -> bool:
    return name.startswith("/") or _URI.match(name) is not None


def _int_list(value: object) -> list[int]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
