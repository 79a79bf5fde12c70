"""The Spark jobs of one application that are running now, and which stage belongs to which.

Pure bookkeeping for the translator: a JobStart opens a job (once; a duplicate is refused),
its JobEnd closes it, and a stage's metrics or failed tasks are charged to the job that ran
the stage. Which run a job belongs to is the translator's business, except for the runs of
RDD jobs outside SQL that read files or save to a path the program named (`rdd_run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.spark.plan.touched.rdds import rdd_inputs, rdd_job_suffix, rdd_output
from agent.spark.translate.model import Job, Run, remember
from agent.spark.translate.runs import runids
from agent.spark.translate.values import as_int, as_int_text, int_list, mappings


class Jobs:
    """Open jobs by id, and the job each of their stages belongs to."""

    def __init__(self) -> None:
        self._open: dict[int, Job] = {}
        self._seen: set[int] = set()  # recent job ids: see `remember`
        self._stage_job: dict[int, int] = {}

    def __bool__(self) -> bool:
        """Whether any job is still running."""
        return bool(self._open)

    def start(self, job_id: int, event: Mapping[str, Any]) -> Job | None:
        """Open the job a JobStart describes; None for a job already seen."""
        if job_id in self._seen:
            return None
        remember(self._seen, job_id)
        props = event.get("Properties")
        props = props if isinstance(props, Mapping) else {}
        stages = int_list(event.get("Stage IDs")) or [
            i
            for s in mappings(event.get("Stage Infos"))
            if (i := as_int(s.get("Stage ID"))) is not None
        ]
        job = self._open[job_id] = Job(
            job_id, as_int_text(props.get("spark.sql.execution.id")), stages
        )
        for stage in stages:
            self._stage_job.setdefault(stage, job_id)
        return job

    def end(self, job_id: int | None) -> Job | None:
        """Close a job at its JobEnd; None for one that is not open."""
        job = self._open.pop(job_id, None) if job_id is not None else None
        if job is not None:
            for stage in job.stages:
                if self._stage_job.get(stage) == job.job_id:
                    del self._stage_job[stage]
        return job

    def of_stage(self, stage: int | None) -> Job | None:
        """The open job that ran this stage."""
        return self._open.get(self._stage_job.get(stage, -1)) if stage is not None else None


def rdd_run(
    job: Job,
    job_id: int,
    event: Mapping[str, Any],
    submitted: int,
    app: tuple[str, str | None],
) -> tuple[Run, str] | None:
    """The run of an RDD job outside SQL that reads files (`sc.textFile`) or saves to the
    path its `spark.lineageAgent.output` property names, and its job-name suffix (its RDD
    lineage, as the OpenLineage integration names it); None for any other job."""
    if job.execution is not None:
        return None
    infos = event.get("Stage Infos")
    props = event.get("Properties")
    paths = rdd_inputs(infos)
    output = rdd_output(infos, props if isinstance(props, Mapping) else {})
    if not paths and output is None:
        return None
    run_id = runids.run_id(submitted, app[0], app[1], "rdd", job_id)
    run = Run(
        "rdd",
        run_id,
        "RDD_JOB",
        submitted,
        key=job_id,
        paths=paths,
        output_paths=(output,) if output else (),
    )
    return run, rdd_job_suffix(infos) or f"rdd_job_{job_id}"
