"""Parsers of untrusted event-log text finish in linear time on the worst inputs known for
them: plan lines and node names on which Python's `re` backtracked cubically or
quadratically, an application's own `spark.redaction.regex` on which it backtracked
exponentially, and random mixes of the plan grammar's characters. A worst case runs in a
child interpreter that is killed at `LIMIT`, so a parser that hangs fails its test instead
of holding the run."""

from __future__ import annotations

import ast
import importlib
import math
import multiprocessing
import multiprocessing.pool
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.spark.plan.attributes.columns import PlanGraph
from agent.spark.plan.attributes.typeinfer import TypeOracle
from agent.spark.plan.syntax.text import Block, parse_description, parse_plan
from agent.spark.plan.touched.read import read_plan
from agent.spark.translate.facets.appfacets import redaction
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator
from tests.applog import read_through, staged
from tests.samples import sample_bytes

ROOT = Path(__file__).resolve().parents[1]
#: What a worst case may take, in seconds (the best of three runs): linear parsing of these
#: takes milliseconds, Python's `re` took from half a second to forever.
BUDGET = 0.25
#: When a worst case's child is killed: a backtracking parser would take minutes or more.
LIMIT = 60.0
APP_ID = "app-20261127000000-0000"
SQL = "org.apache.spark.sql.execution.ui.SparkListenerSQL"
#: A detail line that backtracked cubically: a capital, spaces, no colon.
SPACES_LINE = "A" + " " * 4000 + "x"
#: A node name that backtracked quadratically: the Delta state scan's separator, repeated.
DELTA_STATE = "Scan ExistingRDD Delta Table State " + " - " * 8000


# -- timing in a child interpreter -------------------------------------------------------------


def _best_of_three(call: Callable[..., object], *args: object) -> float:
    times = []
    for _ in range(3):
        began = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - began)
    return min(times)


class Timer:
    """Times calls in a child interpreter, replaced when one is killed at LIMIT."""

    def __init__(self) -> None:
        self._pool: multiprocessing.pool.Pool | None = None

    def seconds(self, call: Callable[..., object], *args: object) -> float:
        """The best of three runs of `call(*args)`, in seconds; inf if it outlived LIMIT."""
        if self._pool is None:
            self._pool = multiprocessing.get_context("spawn").Pool(1)
        pending = self._pool.apply_async(_best_of_three, (call, *args))
        try:
            return float(pending.get(LIMIT))
        except multiprocessing.TimeoutError:
            self.close()
            return math.inf

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


@pytest.fixture(scope="module")
def timer() -> Iterator[Timer]:
    """One child interpreter for the module's worst cases."""
    timer = Timer()
    yield timer
    timer.close()


# -- the worst cases ---------------------------------------------------------------------------


def plan_text(description: str, name: str = "Project", simple: str = "") -> None:
    """Everything the agent reads of one plan: its description and its node tree."""
    parse_description(description)
    parse_plan(description)
    read_plan({"nodeName": name, "simpleString": simple, "children": []}, description)


def type_of(expression: str) -> None:
    TypeOracle(PlanGraph(parse_plan("")), {}).expression(expression)


def pattern_search(module: str, name: str, text: str) -> None:
    """A pattern searched through the whole text: linear whatever its callers do today."""
    getattr(importlib.import_module(module), name).search(text)


def application_start(props: Mapping[str, str], facet: tuple[str, ...]) -> list[dict[str, Any]]:
    """The events of an application that logged `props`, with `facet` allowed."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark", properties_facet=facet))
    environment = {"Event": "SparkListenerEnvironmentUpdate", "Spark Properties": dict(props)}
    start = {
        "Event": "SparkListenerApplicationStart",
        "App Name": "hostile",
        "App ID": APP_ID,
        "Timestamp": 1_800_000_000_000,
        "User": "spark",
    }
    end = {"Event": "SparkListenerApplicationEnd", "Timestamp": 1_800_000_001_000}
    return [*translator.feed(environment), *translator.feed(start), *translator.feed(end)]


#: A Kafka save whose topic column nests 3,000 concat calls over a 3,000-column relation.
KAFKA_TOPIC_SAVE = (
    "(2) SaveIntoDataSourceCommand\nArguments: org.apache.spark.sql.kafka010."
    "KafkaSourceProvider@1, [kafka.bootstrap.servers=h:9092], ErrorIfExists\n\n"
    "(3) LogicalRelation\nArguments: json, ["
    + ", ".join(f"c{i}#{i}" for i in range(3000))
    + "], false\n\n(4) Project\nArguments: ["
    + "concat(a-, " * 3000
    + "c1#1"
    + ")" * 3000
    + " AS topic#9000, c2#2 AS value#9001]\n"
)
#: A Kafka save whose topic column is an alias of concat(t#2, t#2), each of those of
#: concat(t#3, t#3), 40 levels down: 2^40 expressions if each reference were followed anew.
KAFKA_DOUBLING_ALIASES = (
    "(2) SaveIntoDataSourceCommand\nArguments: org.apache.spark.sql.kafka010."
    "KafkaSourceProvider@1, [kafka.bootstrap.servers=h:9092], ErrorIfExists\n\n"
    "(3) Project\nArguments: ["
    + ", ".join(f"concat(t#{i + 1}, t#{i + 1}) AS t#{i}" for i in range(2, 41))
    + ", c#1 AS t#41, concat(t#2, t#2) AS topic#1000, c#1 AS value#1001]\n"
)
NESTED_REDACTION = {"spark.redaction.regex": "(x+x+)+y", "spark.master": "x" * 10_000}

#: Each worst case: the parser, and what it is given.
WORST_CASES: dict[str, tuple[Callable[..., object], tuple[object, ...]]] = {
    "detail line of 4,000 spaces": (plan_text, (f"(1) Project\n{SPACES_LINE}\n",)),
    "cast of 40 KB": (type_of, ("cast(" + " as a" * 8000,)),
    "expression nested 400 deep": (type_of, ("(" * 400 + "a " * 4000 + ")" * 400,)),
    "cast of 40 KB in an output list": (
        plan_text,
        ("(1) Project\nOutput [1]: [cast(" + " as a" * 8000 + " AS x#1]\n",),
    ),
    "Delta state scan name of 24 KB": (plan_text, ("", DELTA_STATE)),
    "location of 160 KB in a simple string": (
        plan_text,
        ("", "Scan parquet t", "Location: a(1 paths)[" * 7700),
    ),
    "Kafka topic of 3,000 nested concat calls": (
        plan_text,
        (KAFKA_TOPIC_SAVE, "Execute SaveIntoDataSourceCommand"),
    ),
    "Kafka topic through 40 levels of doubling aliases": (
        plan_text,
        (KAFKA_DOUBLING_ALIASES, "Execute SaveIntoDataSourceCommand"),
    ),
    "redaction pattern (x+x+)+y on 10,000 characters": (
        application_start,
        (NESTED_REDACTION, ("spark.master",)),
    ),
}


@pytest.mark.parametrize("case", list(WORST_CASES))
def test_worst_case_parses_within_the_budget(case: str, timer: Timer) -> None:
    """Each input that made a backtracking parser take seconds to forever takes milliseconds."""
    call, args = WORST_CASES[case]
    assert timer.seconds(call, *args) < BUDGET


@pytest.mark.parametrize(
    ("module", "name", "text"),
    [
        ("agent.spark.plan.touched.scans", "_JDBC_SCAN", "Scan JDBCRelation(" * 8000),
        ("agent.spark.plan.attributes.typeinfer", "_CAST", "cast(" + " as a" * 8000),
        ("agent.spark.plan.touched.read", "_DELTA_STATE", DELTA_STATE),
        ("agent.spark.plan.touched.scans", "_LOCATION_TEXT", "Location: a(1 paths)[" * 7700),
    ],
    ids=["JDBC scan, 144 KB", "cast, 40 KB", "Delta state scan, 24 KB", "location, 160 KB"],
)
def test_pattern_searches_its_worst_text_within_the_budget(
    module: str, name: str, text: str, timer: Timer
) -> None:
    """The patterns found quadratic (144 KB, 40 KB, 24 KB, 160 KB) search their worst text
    in milliseconds, whichever way a caller applies them."""
    assert timer.seconds(pattern_search, module, name, text) < BUDGET


def test_a_detail_line_of_spaces_is_a_line_without_a_key() -> None:
    """The line of spaces reads as what it is: text of the operator without a `Key:`."""
    assert parse_description(f"(1) Project\n{SPACES_LINE}\nOutput [1]: [a#1]\n") == [
        Block("Project", {"": SPACES_LINE, "Output": "[a#1]"}, 1, {"Output": 1})
    ]


def test_a_nested_redaction_pattern_still_hides_what_it_matches() -> None:
    """`(x+x+)+y` runs in linear time and hides what it matches; what it does not match shows."""
    props = {**NESTED_REDACTION, "spark.executor.memory": "xxy"}
    [start, _] = application_start(props, ("spark.master", "spark.executor.memory"))
    shown = start["run"]["facets"]["lineageAgent_sparkProperties"]["properties"]
    assert shown == {"spark.master": "x" * 10_000}


# -- an application's pattern that RE2 cannot compile ------------------------------------------

LOOKBEHIND = {"spark.redaction.regex": "(?<!public)hunter2"}
CONSERVATIVE_WARNING = (
    "spark.redaction.regex is not used: RE2 cannot compile it (invalid perl operator); "
    "Spark's default pattern and a conservative one for credentials hide properties instead"
)


def test_a_pattern_re2_cannot_compile_gives_way_to_the_conservative_redaction() -> None:
    """Lookbehind is Java's, not RE2's: names of credentials, URLs with user information and
    opaque tokens are hidden; plain settings still show."""
    props = {
        **LOOKBEHIND,
        "spark.master": "local[2]",
        "spark.executor.memory": "512m",
        "spark.sql.warehouse.dir": "file:/tmp/spark-warehouse",
        "spark.hadoop.fs.s3a.secret.key": "s3cr3t",
        "spark.authenticate.enableSaslEncryption": "true",
        "spark.custom.catalog": "jdbc:postgresql://ada:hunter2@db:5432/lake",
        "spark.custom.id": "AKIAIOSFODNN7EXAMPLE1",
        "spark.custom.note": "a-plain-hyphenated-name-of-words",
    }
    [start, _] = application_start(props, tuple(props.keys() - LOOKBEHIND.keys()))
    shown = start["run"]["facets"]["lineageAgent_sparkProperties"]["properties"]
    assert shown == {
        "spark.custom.note": "a-plain-hyphenated-name-of-words",
        "spark.executor.memory": "512m",
        "spark.master": "local[2]",
        "spark.sql.warehouse.dir": "file:/tmp/spark-warehouse",
    }


def test_a_pattern_re2_cannot_compile_is_warned_about_once_without_the_pattern() -> None:
    """One warning for the application, however many events carry the facet, word for word,
    and quoting nothing of the pattern."""
    translator = ApplicationTranslator(
        TranslateOptions(namespace="spark", properties_facet=("spark.master",))
    )
    translator.feed({"Event": "SparkListenerEnvironmentUpdate", "Spark Properties": LOOKBEHIND})
    for event in (
        {"Event": "SparkListenerApplicationStart", "App ID": APP_ID, "Timestamp": 1, "User": "u"},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 2},
    ):
        assert translator.feed(event)
    assert translator.warnings == [CONSERVATIVE_WARNING]
    assert "hunter2" not in CONSERVATIVE_WARNING


def test_an_unset_or_compilable_pattern_warns_nothing() -> None:
    """Spark's default alone, or with the application's own pattern: no problem to report."""
    assert redaction(None).problem is None
    assert redaction("(?i)internal|(x+x+)+y").problem is None


# -- random mixes of the plan grammar ----------------------------------------------------------

#: How a line, a name or an expression of the plan grammar starts.
STARTS = st.sampled_from(
    ["", "A", "Output", "Condition : ", "(1) ", "+- ", ":- ", "* ", "== ", "Subquery:1 ",
     "cast(", "CASE WHEN ", "lambda ", "Scan JDBCRelation(", "Location: a(1 paths)[",
     "Scan ExistingRDD Delta Table State "]
)  # fmt: skip
#: What fills it: spaces most of all, brackets, quotes, commas, `#`, newlines, keywords.
FILLERS = st.sampled_from(
    [" ", " ", " ", "(", ")", "[", "]", "'", '"', "`", ",", "#", "#1", "L", ":", "\n", "A",
     "x", " as ", " AS ", " - ", " THEN ", " END", " + ", "=", "+- ", "/_delta_log"]
)  # fmt: skip


@st.composite
def hostile_text(draw: st.DrawFn) -> str:
    """A start of the plan grammar, a short mix of its characters repeated up to 8,000
    characters (the long runs that make a backtracking parser explode), in brackets
    nested up to 400 deep."""
    unit = "".join(draw(st.lists(FILLERS, min_size=1, max_size=3)))
    text = (draw(STARTS) + unit * draw(st.integers(500, 4000)))[:8000]
    nesting = draw(st.sampled_from([0, 0, 0, 400]))
    return "(" * nesting + text + ")" * nesting


def _write_execution() -> tuple[dict[str, Any], str]:
    """The plan of a real aggregate written as JSON (`success` sample, execution 2)."""
    for line in sample_bytes("success").splitlines():
        event = orjson.loads(line)
        if event["Event"] == f"{SQL}ExecutionStart" and event["executionId"] == 2:
            return event["sparkPlanInfo"], event["physicalPlanDescription"]
    raise LookupError("no execution 2 in the success sample")


PLAN, DESCRIPTION = _write_execution()


def _with_text(slot: str, at: int, text: str) -> tuple[dict[str, Any], str]:
    """The real plan with `text` as a line, as the expression of a written column (typed
    and traced), as a node name or as a simple string (the node at `at`, depth first)."""
    plan, description = orjson.loads(orjson.dumps(PLAN)), DESCRIPTION
    if slot == "line":
        lines = description.split("\n")
        lines.insert(at % len(lines), text)
        description = "\n".join(lines)
    elif slot == "column":  # `c` no longer long: its type is the expression's
        description = description.replace("count(1)#8L AS c#6L", f"{text} AS c#6L")
        description = description.replace("c#6L", "c#6")
    else:
        nodes, stack = [], [plan]
        while stack:
            nodes.append(stack.pop())
            stack.extend(nodes[-1]["children"])
        nodes[at % len(nodes)]["nodeName" if slot == "name" else "simpleString"] = text
    return plan, description


@settings(max_examples=150, deadline=timedelta(seconds=1))
@given(
    slot=st.sampled_from(["line", "line", "column", "name", "simple"]),
    at=st.integers(0, 60),
    text=hostile_text(),
)
@example(slot="line", at=10, text=SPACES_LINE)
def test_random_plan_text_parses_within_a_second(slot: str, at: int, text: str) -> None:
    """Long runs of the plan grammar's characters, as a line, an expression, a node name or
    a simple string of a real plan, parse in well under a second each."""
    plan, description = _with_text(slot, at, text)
    read_plan(plan, description)
    parse_plan(description)


#: What a pattern may end with that neither `spark.master` nor a value of `x` holds.
LACKED = ("y", "z", "[yz]", r"\d")
#: Pieces of a quantified group that matches `x` in more than one way.
AMBIGUOUS = st.sampled_from(["x", "x+", "x*", "x?", "(x|x)", "(x+)", "(?:x|xx)", "[x]+"])


@st.composite
def nested_pattern(draw: st.DrawFn) -> str:
    """`(x+x+)+y` and its kin: a quantified group of ambiguous pieces, then what the value
    lacks, so that a backtracking engine tries every way of splitting it."""
    start = draw(st.sampled_from(["", "^", "a|"]))
    group = "".join(draw(st.lists(AMBIGUOUS, min_size=1, max_size=3)))
    quantifier = draw(st.sampled_from(["+", "*", "{2,}", "+?"]))
    end = draw(st.sampled_from((*LACKED, "")))
    return f"{start}({group}){quantifier}{end}"


@settings(
    max_examples=150, deadline=timedelta(seconds=1), suppress_health_check=[HealthCheck.too_slow]
)
@given(pattern=nested_pattern(), length=st.integers(1, 10_000))
@example(pattern="(x+x+)+y", length=10_000)
def test_random_redaction_patterns_run_within_a_second(pattern: str, length: int) -> None:
    """Patterns of nested quantifiers, against a value of up to 10,000 `x`, decide in well
    under a second whether the value is hidden; one that needs what neither holds hides
    nothing."""
    hidden = redaction(pattern).hides("spark.master", "x" * length)
    if pattern.endswith(LACKED) and not pattern.startswith("a|"):
        assert not hidden


# -- a log with the worst plan lines, replayed -------------------------------------------------


def _hostile_log() -> bytes:
    """The `success` sample with the worst plan lines added where no dataset is read from:
    a line of spaces and a cast of 40 KB in the detail block of its aggregate write."""
    lines = []
    for line in sample_bytes("success").splitlines(keepends=True):
        event = orjson.loads(line)
        if event["Event"] == f"{SQL}ExecutionStart" and event["executionId"] == 2:
            cast = "cast(" + " as a" * 8000
            description = event["physicalPlanDescription"].replace(
                "(5) WriteFiles\n", f"(5) WriteFiles\n{SPACES_LINE}\nNote: {cast}\n"
            )
            assert description != event["physicalPlanDescription"]
            event["physicalPlanDescription"] = description
            line = orjson.dumps(event) + b"\n"
        lines.append(line)
    return b"".join(lines)


def replay_seconds(log: bytes) -> float:
    """How long one replay of `log` takes, read as the daemon reads it."""
    with tempfile.TemporaryDirectory() as tmp:
        ref = staged(Path(tmp) / "events", log)
        began = time.perf_counter()
        read_through(ref, TranslateOptions(namespace="spark"))
        return time.perf_counter() - began


def test_a_log_with_the_worst_plan_lines_replays_quickly_to_the_same_events(
    tmp_path: Path, timer: Timer
) -> None:
    """A real log whose write plan holds a line of 4,000 spaces and a 40 KB cast replays in
    well under a second, to exactly the events of the log without them."""
    hostile = _hostile_log()
    assert timer.seconds(replay_seconds, hostile) < 1.0
    options = TranslateOptions(namespace="spark")
    events, _ = read_through(staged(tmp_path / "hostile", hostile), options)
    clean, _ = read_through(staged(tmp_path / "clean", sample_bytes("success")), options)
    assert events == clean
    assert any(e["outputs"] for e in events)


# -- no backtracking engine on the Spark side --------------------------------------------------

#: Modules outside the Spark side that use Python's `re`, and why that is safe.
RE_ALLOWED = {
    "agent/config/kinds.py": "the operator's own config file",
    "agent/delivery/transports/http/settings.py": "one character class over header names",
    "agent/delivery/canonical.py": "single characters and fixed-length shapes: no repetition",
    "agent/delivery/verify.py": "a key id of fixed length, matched whole",
    "agent/service/control/handlers.py": "ids and signal names of bounded length, matched whole",
    "agent/commands/replay_report.py": "one character class, no repetition",
    "agent/commands/marquez.py": "a time of bounded length, each repetition counted, matched",
    "agent/state/sqlschema.py": "run once over the agent's own schema text, never over input",
}


def _imports_re(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import) and any(a.name == "re" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "re":
            return True
    return False


def test_only_modules_safe_with_backtracking_import_re() -> None:
    """No module of the Spark side imports Python's `re` (its patterns are RE2's, through
    `agent.linear`); the few elsewhere that do are listed with the reason it is safe."""
    importing = {
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "agent").rglob("*.py"))
        if _imports_re(path)
    }
    assert importing == set(RE_ALLOWED)
