"""What the agent reports for Spark 3.5 applications, replayed from the checked-in real logs
of PySpark 3.5.9 (tests/data/eventlogs/spark35, see its NOTES.md for what differs from Spark 4).

Each log goes through `ApplicationLog` (the step the daemon's source and `replay` share) and
every event is validated against the official schemas. File, table, JDBC and failure shapes
are checked statement by statement; the Delta, Kafka and streaming shapes ran the very jobs
of the Spark 4.1 lakehouse logs and must translate to the same runs, datasets and lineage.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from agent.spark.translate.model import task_error
from tests.data.make_spark35_logs import SPARK35
from tests.logsets import TERMINAL, LogSet, assert_runs_end_once, lineage, replayed

DATA = Path(__file__).resolve().parent / "data" / "eventlogs"
LOGS = DATA / "spark35"
SHAPES = tuple(SPARK35.shapes)
#: The shapes that ran the same job as a Spark 4.1 log of `eventlogs/lakehouse/`.
AS_IN_SPARK4 = (
    "delta_path",
    "delta_catalog",
    "kafka_batch",
    "stream_file_parquet",
    "stream_failure",
)
P = "/data/spark35"
WAREHOUSE = f"{P}/warehouse"
DERBY = "derby:memory:spark35"
SPARK35_LOGS = LogSet(LOGS, "spark35", P)
events_of, spark_events = SPARK35_LOGS.events, SPARK35_LOGS.spark_events
statements, terminal = SPARK35_LOGS.statements, SPARK35_LOGS.terminal


@pytest.mark.parametrize("shape", SHAPES)
def test_every_log_is_a_whole_scrubbed_spark_35_application(shape: str) -> None:
    """Each log is one PySpark 3.5.9 application, its paths under /data/spark35."""
    SPARK35_LOGS.assert_whole_and_scrubbed(shape, "3.5.9")


@pytest.mark.parametrize("shape", SHAPES)
def test_every_event_is_schema_valid_and_every_run_ends_once(shape: str) -> None:
    """Every event validates; each run has one START first and one terminal event last."""
    assert len(assert_runs_end_once(events_of(shape))) > 1


def comparable(log: Path, app: str, placeholder: str) -> list[tuple[Any, ...]]:
    """Each event of a replayed log as (type, job without the application, inputs, outputs
    with their facets but the byte sizes), the log's path placeholder made `/data/spark35`."""
    events = copy.deepcopy(replayed(log)[0])  # the replay is cached: its sizes stay
    found = []
    for event in events:
        for dataset in event["inputs"] + event["outputs"]:
            for facets in (dataset.get("inputFacets", {}), dataset.get("outputFacets", {})):
                for statistics in facets.values():
                    statistics.pop("size", None)  # the parquet writers' bytes differ
        text = json.dumps(
            {
                "job": event["job"]["name"].removeprefix(app),
                "inputs": event["inputs"],
                "outputs": event["outputs"],
            },
            sort_keys=True,
        )
        found.append((event["eventType"], text.replace(placeholder, P)))
    return found


@pytest.mark.parametrize("shape", AS_IN_SPARK4)
def test_same_job_translates_as_its_spark_4_log(shape: str) -> None:
    """The Delta, Kafka and streaming jobs of the Spark 4.1 lakehouse logs, run on Spark 3.5:
    the same runs in the same order, with the same datasets, facets and column lineage."""
    spark35 = comparable(LOGS / f"{shape}.jsonl.zst", f"spark35_{shape}", P)
    spark4 = comparable(
        DATA / "lakehouse" / f"{shape}.jsonl.zst", f"lakehouse_{shape}", "/data/lakehouse"
    )
    assert len(spark35) > 2
    assert spark35 == spark4


def test_file_reads_and_writes() -> None:
    """Parquet, CSV and JSON outputs by path; a read of two paths names both; INSERT
    OVERWRITE DIRECTORY writes its directory; the CSV schema-inference scan is no run."""
    people, more, orders = f"{P}/data/people", f"{P}/data/people_more", f"{P}/data/orders"
    csv = f"{P}/data/people_csv"
    write = "execute_insert_into_hadoop_fs_relation_command"
    assert statements("files") == [
        (f"{write}.data_people", [], [("file", people)]),
        (f"{write}.data_people_more", [], [("file", more)]),
        (f"{write}.data_people_csv", [("file", people)], [("file", csv)]),
        (f"{write}.data_orders", [], [("file", orders)]),
        (
            f"{write}.data_all_people",
            [("file", people), ("file", more)],
            [("file", f"{P}/data/all_people")],
        ),
        (
            f"{write}.data_named_orders",
            [("file", csv), ("file", orders)],
            [("file", f"{P}/data/named_orders")],
        ),
        (
            "execute_insert_into_data_source_dir_command.data_leeds",
            [("file", people)],
            [("file", f"{P}/data/leeds")],
        ),
        (
            f"{write}.data_city_tags",
            [("file", people), ("file", orders)],
            [("file", f"{P}/data/city_tags")],
        ),
    ]


def test_join_aggregate_explode_column_lineage() -> None:
    """Column lineage through a broadcast join, `explode` and a hash aggregate under AQE's
    root: each output column from its input field, join keys and filters at dataset level."""
    event = terminal("files", "execute_insert_into_hadoop_fs_relation_command.data_city_tags")
    people, orders = f"{P}/data/people", f"{P}/data/orders"
    assert lineage(event) == {
        "city": {(people, "city", "IDENTITY")},
        "tag": {(people, "tags", "TRANSFORMATION")},
        "total": {(orders, "amount", "AGGREGATION")},
        "*": {
            (people, "id", "JOIN"),
            (people, "id", "FILTER"),  # isnotnull(id) below the join
            (orders, "person", "JOIN"),
            (orders, "person", "FILTER"),
            (people, "tags", "FILTER"),  # size(tags) > 0: explode drops empty arrays
            (people, "tags", "GROUP_BY"),  # grouped by its exploded `tag`
            (people, "city", "GROUP_BY"),
        },
    }
    two_paths = terminal("files", "execute_insert_into_hadoop_fs_relation_command.data_all_people")
    more = f"{P}/data/people_more"
    assert lineage(two_paths) == {
        "id": {(people, "id", "IDENTITY"), (more, "id", "IDENTITY")},
        "city": {(people, "city", "IDENTITY"), (more, "city", "IDENTITY")},
        "*": set(),
    }
    directory = terminal("files", "execute_insert_into_data_source_dir_command.data_leeds")
    assert lineage(directory) == {
        "id": {(people, "id", "IDENTITY")},
        "name": {(people, "name", "TRANSFORMATION")},
        "*": {(people, "city", "FILTER")},
    }


def test_session_catalog_tables() -> None:
    """Hive-less session-catalog tables by their warehouse paths: INSERT, saveAsTable new and
    append (both Spark 3.5's CreateDataSourceTableAsSelectCommand), CTAS, INSERT OVERWRITE,
    a table read, ALTER, TRUNCATE and DROP; CREATE TABLE alone is no run."""
    pets, owners, pet_owners = (f"{WAREHOUSE}/{t}" for t in ("pets", "owners", "pet_owners"))
    insert, ctas = (
        "execute_insert_into_hadoop_fs_relation_command",
        "execute_create_data_source_table_as_select_command",
    )
    assert statements("tables") == [
        (f"{insert}.default_owners", [], [("file", owners)]),
        (f"{ctas}.default_pets", [], [("file", pets)]),
        (f"{ctas}.default_pets", [], [("file", pets)]),
        (
            f"{ctas}.default_pet_owners",
            [("file", pets), ("file", owners)],
            [("file", pet_owners)],
        ),
        (f"{insert}.default_pet_owners", [("file", pets)], [("file", pet_owners)]),
        (f"{insert}.default_owners_2", [("file", pets)], [("file", owners)]),
        (f"{insert}.data_pet_owners", [("file", pet_owners)], [("file", f"{P}/data/pet_owners")]),
        ("execute_alter_table_add_columns_command.default_pets", [], [("file", pets)]),
        ("execute_truncate_table_command.default_owners", [], [("file", owners)]),
        ("drop_table.default_pet_owners", [], [("file", pet_owners)]),
    ]
    ctas_end = terminal("tables", f"{ctas}.default_pet_owners")
    assert lineage(ctas_end) == {
        "pet": {(pets, "pet", "IDENTITY")},
        "owner": {(owners, "name", "IDENTITY")},
        "*": {
            (pets, "owner_id", "JOIN"),
            (pets, "owner_id", "FILTER"),
            (owners, "id", "JOIN"),
            (owners, "id", "FILTER"),
        },
    }
    symlinks = {
        i["name"]
        for d in ctas_end["outputs"] + ctas_end["inputs"]
        for i in d["facets"].get("symlinks", {}).get("identifiers", [])
    }
    assert symlinks == {"default.pet_owners", "default.pets", "default.owners"}


def test_jdbc_derby_named_by_the_url() -> None:
    """In-memory Derby as in the Spark 4 `jdbc_derby` log: the V1 write's options show the url
    (redaction set to passwords only), the read takes it from that write, the INSERT through
    the V2 JDBC catalog from `spark.sql.catalog.derby.url`; nothing warns of a url."""
    table = (DERBY, "APP.PEOPLE")
    more = f"{P}/data/more_people"
    assert statements("jdbc") == [
        ("execute_save_into_data_source_command.APP_PEOPLE", [], [table]),
        (
            "execute_insert_into_hadoop_fs_relation_command.data_jdbc_read",
            [table],
            [("file", f"{P}/data/jdbc_read")],
        ),
        ("execute_insert_into_hadoop_fs_relation_command.data_more_people", [], [("file", more)]),
        ("append_data_exec_v1.APP_PEOPLE", [("file", more)], [table]),
    ]
    read = terminal("jdbc", "execute_insert_into_hadoop_fs_relation_command.data_jdbc_read")
    assert read["inputs"][0]["facets"]["dataSource"]["name"] == DERBY
    assert lineage(read) == {"name": {("APP.PEOPLE", "NAME", "TRANSFORMATION")}, "*": set()}
    insert = terminal("jdbc", "append_data_exec_v1.APP_PEOPLE")
    assert lineage(insert) == {
        "ID": {(more, "id", "TRANSFORMATION")},
        "NAME": {(more, "name", "TRANSFORMATION")},
        "*": set(),
    }
    assert not [w for w in SPARK35_LOGS.warnings("jdbc") if "JDBC" in w]


def test_failed_statements_report_the_task_error() -> None:
    """Spark 3.5 ends a statement whose tasks fail with the job's abort text, executor stack
    inside: the FAIL's errorMessage is the task's error (as Spark 4 gives it), the whole text
    its stack trace. A collect that fails is no run; an unresolved column posts nothing."""
    fail_out, exists = f"{P}/data/fail_out", f"{P}/data/exists"
    write = "execute_insert_into_hadoop_fs_relation_command"
    assert statements("sql_failure", "*") == [
        (f"{write}.data_fail_out", [], [("file", fail_out)]),
        (f"{write}.data_exists", [], [("file", exists)]),
        (f"{write}.data_exists", [], [("file", exists)]),
        (f"{write}.default_nums", [], [("file", f"{WAREHOUSE}/nums")]),
    ]
    ends = [e for e in events_of("sql_failure") if e["eventType"] in TERMINAL]
    assert [e["eventType"] for e in ends] == ["FAIL", "COMPLETE", "FAIL", "FAIL", "FAIL"]
    errors = [e["run"]["facets"]["errorMessage"] for e in ends if e["eventType"] == "FAIL"]
    cast = '[CAST_INVALID_INPUT] The value \'n{}\' of the type "STRING" cannot be cast to "INT"'
    assert errors[0]["message"].startswith(cast.format(2))
    assert errors[0]["message"].endswith("CAST(concat('n', id) AS INT) AS bad\n" + "^" * 28)
    assert errors[1]["message"] == (
        f"[PATH_ALREADY_EXISTS] Path file:{exists} already exists. "
        'Set mode as "overwrite" to overwrite the existing path.'
    )
    assert "stackTrace" not in errors[1]
    for error in (errors[0], errors[2], errors[3]):  # the INSERT's, then the application's
        assert "\tat " not in error["message"]
        assert error["stackTrace"].startswith("Job aborted due to stage failure: Task 1 in stage")
        assert "\tat org.apache.spark.sql.errors.QueryExecutionErrors" in error["stackTrace"]
    assert errors[2]["message"].startswith(cast.format(1))
    assert errors[3] == errors[2]
    log = spark_events("sql_failure")
    ends_of = {e["executionId"]: e for e in log if e["Event"].endswith("SQLExecutionEnd")}
    assert len(ends_of) == 6  # the divide, 2 writes, the failing write, CREATE, INSERT


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "Job aborted due to stage failure: Task 1 in stage 0.0 failed 1 times, most recent "
            "failure: Lost task 1.0 in stage 0.0 (TID 1) (localhost executor driver): "
            "org.apache.spark.SparkArithmeticException: [DIVIDE_BY_ZERO] Division by zero.\n"
            "== SQL(line 1, position 1) ==\n10 / 0\n^^^^^^\n\n\tat org.apache.spark.X.y(X.scala:1)"
            "\n\nDriver stacktrace:",
            "[DIVIDE_BY_ZERO] Division by zero.\n== SQL(line 1, position 1) ==\n10 / 0\n^^^^^^",
        ),
        (
            "Job aborted due to stage failure: Task 0 in stage 2.0 failed 4 times, most recent "
            "failure: Lost task 0.3 in stage 2.0 (TID 9) (10.0.0.5 executor 3): "
            "java.lang.IllegalStateException: boom\n\tat a.B.c(B.java:1)",
            "java.lang.IllegalStateException: boom",
        ),
        (  # a streaming query's exception: the wrapper as the JVM prints it, class first
            "org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage "
            "1.0 failed 1 times, most recent failure: Lost task 0.0 in stage 1.0 (TID 1) "
            "(localhost executor driver): org.apache.spark.SparkException: [TASK_WRITE_FAILED] "
            "Task failed while writing rows to /data/q.",
            "[TASK_WRITE_FAILED] Task failed while writing rows to /data/q.",
        ),
        (  # Spark 4's own words, and a stage failure that is no task's
            "[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012",
            "[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012",
        ),
        (
            "Job aborted due to stage failure: Task serialization failed: "
            "java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.",
            "Job aborted due to stage failure: Task serialization failed: "
            "java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.",
        ),
    ],
)
def test_task_error_unwraps_only_a_lost_task(message: str, expected: str) -> None:
    """Only the lost-task wrapper is taken off; the Java class only before an error class."""
    assert task_error(message) == expected


def test_failed_streaming_query_reports_the_task_error() -> None:
    """The query whose second micro-batch fails: Spark 3.5's QueryTerminatedEvent has the
    job's abort text (class first) and no `errorClassOnException`; the query's FAIL names the
    task's error, the whole exception is its stack trace. The application completes, as on
    Spark 4 (the program caught the failure)."""
    (query,) = [e for e in events_of("stream_failure") if e["eventType"] == "FAIL"]
    assert query["job"]["name"] == "spark35_stream_failure.streaming_query.bad_cast"
    error = query["run"]["facets"]["errorMessage"]
    assert error["message"] == (
        f"[TASK_WRITE_FAILED] Task failed while writing rows to {P}/data/quantities."
    )
    assert error["stackTrace"].startswith(
        "org.apache.spark.SparkException: Job aborted due to stage failure: "
    )
    assert "[CAST_INVALID_INPUT] The value 'three'" in error["stackTrace"]
    (terminated,) = [e for e in spark_events("stream_failure") if "QueryTerminated" in e["Event"]]
    assert terminated["errorClassOnException"] is None
    assert events_of("stream_failure")[-1]["eventType"] == "COMPLETE"


def test_spark_35_events_lack_what_spark_4_adds() -> None:
    """The fields a translation must not count on (NOTES.md): no `jobGroupId` or `queryId` on
    SQL executions, no `ExitCode` at ApplicationEnd, no `jobTags` on QueryStartedEvent, and no
    nested execution of a Kafka read."""
    sql = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecution"
    for shape in SHAPES:
        log = spark_events(shape)
        starts = [e for e in log if e["Event"] == sql + "Start"]
        assert starts and not [e for e in starts if {"jobGroupId", "queryId"} & set(e)]
        assert not [e for e in log if e["Event"] == sql + "End" and "queryId" in e]
        (end,) = [e for e in log if e["Event"] == "SparkListenerApplicationEnd"]
        assert set(end) == {"Event", "Timestamp"}
        assert not [e for e in log if e["Event"].endswith("QueryStartedEvent") and "jobTags" in e]
    kafka = [e for e in spark_events("kafka_batch") if e["Event"] == sql + "Start"]
    assert [e["executionId"] for e in kafka] == [e["rootExecutionId"] for e in kafka]
