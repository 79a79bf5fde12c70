"""Parsers of untrusted event-log text finish in linear time on the worst inputs known for
them: plan lines and node names on which Python's `re` backtracked cubically or
quadratically, an application's own `spark.redaction.regex` on which it backtracked
exponentially, and random mixes of the plan grammar's characters. A worst case runs in a
child interpreter that is killed at `LIMIT`, so a parser that hangs fails its test instead
of holding the run.

Linear is asserted as growth, not as a wall-time budget a busy machine could exceed: each
worst case is parsed at its size and at `GROWTH` times that size, and the larger may take at
most `GROWTH` times the CPU time of the smaller, with `SLACK` for noise (a quadratic parser
takes 16 times as long, a cubic one 64 times, a backtracking one never ends). CPU time of the
child, best of three, is what a machine busy with other work changes least."""

from __future__ import annotations

import ast
import importlib
import math
import multiprocessing
import multiprocessing.pool
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
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
#: How much larger the second input of a worst case is than the first.
GROWTH = 4
#: Room for noise on top of linear growth: a factor, and CPU seconds (the smaller input's
#: parse takes milliseconds, where a scheduler's tick or a collection weighs the most).
SLACK = 1.5
FLOOR = 0.005
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
        began = time.process_time()
        call(*args)
        times.append(time.process_time() - began)
    return min(times)


class Timer:
    """Times calls in a child interpreter, replaced when one is killed at LIMIT."""

    def __init__(self) -> None:
        self._pool: multiprocessing.pool.Pool | None = None

    def seconds(self, call: Callable[..., object], *args: object) -> float:
        """The best of three runs of `call(*args)`, in CPU seconds of the child; inf if it
        outlived LIMIT."""
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


def kafka_topic_save(calls: int) -> str:
    """A Kafka save whose topic column nests `calls` concat calls over a relation of as many
    columns."""
    return (
        "(2) SaveIntoDataSourceCommand\nArguments: org.apache.spark.sql.kafka010."
        "KafkaSourceProvider@1, [kafka.bootstrap.servers=h:9092], ErrorIfExists\n\n"
        "(3) LogicalRelation\nArguments: json, ["
        + ", ".join(f"c{i}#{i}" for i in range(calls))
        + "], false\n\n(4) Project\nArguments: ["
        + "concat(a-, " * calls
        + "c1#1"
        + ")" * calls
        + f" AS topic#{3 * calls}, c2#2 AS value#{3 * calls + 1}]\n"
    )


def kafka_doubling_aliases(levels: int) -> str:
    """A Kafka save whose topic column is an alias of concat(t#2, t#2), each of those of
    concat(t#3, t#3), `levels` levels down: 2^levels expressions if each reference were
    followed anew."""
    top = levels + 1
    return (
        "(2) SaveIntoDataSourceCommand\nArguments: org.apache.spark.sql.kafka010."
        "KafkaSourceProvider@1, [kafka.bootstrap.servers=h:9092], ErrorIfExists\n\n"
        "(3) Project\nArguments: ["
        + ", ".join(f"concat(t#{i + 1}, t#{i + 1}) AS t#{i}" for i in range(2, top))
        + f", c#1 AS t#{top}, concat(t#2, t#2) AS topic#100000, c#1 AS value#100001]\n"
    )


def nested_redaction(length: int) -> dict[str, str]:
    return {"spark.redaction.regex": "(x+x+)+y", "spark.master": "x" * length}


NESTED_REDACTION = nested_redaction(10_000)
WRITE = "Execute SaveIntoDataSourceCommand"

#: Each worst case: the parser, and what it is given at `k` times the size that made a
#: backtracking parser take seconds to forever (k = 1).
WORST_CASES: dict[str, tuple[Callable[..., object], Callable[[int], tuple[object, ...]]]] = {
    "detail line of 4,000 spaces": (
        plan_text,
        lambda k: (f"(1) Project\nA{' ' * 4000 * k}x\n",),
    ),
    "cast of 40 KB": (type_of, lambda k: ("cast(" + " as a" * 8000 * k,)),
    "expression nested 400 deep": (
        type_of,
        lambda k: ("(" * 400 * k + "a " * 4000 * k + ")" * 400 * k,),
    ),
    "cast of 40 KB in an output list": (
        plan_text,
        lambda k: ("(1) Project\nOutput [1]: [cast(" + " as a" * 8000 * k + " AS x#1]\n",),
    ),
    "Delta state scan name of 24 KB": (
        plan_text,
        lambda k: ("", "Scan ExistingRDD Delta Table State " + " - " * 8000 * k),
    ),
    "location of 160 KB in a simple string": (
        plan_text,
        lambda k: ("", "Scan parquet t", "Location: a(1 paths)[" * 7700 * k),
    ),
    "Kafka topic of 3,000 nested concat calls": (
        plan_text,
        lambda k: (kafka_topic_save(3000 * k), WRITE),
    ),
    "Kafka topic through 40 levels of doubling aliases": (
        plan_text,
        lambda k: (kafka_doubling_aliases(40 * k), WRITE),
    ),
    "redaction pattern (x+x+)+y on 10,000 characters": (
        application_start,
        lambda k: (nested_redaction(10_000 * k), ("spark.master",)),
    ),
}


Sized = Callable[[int], tuple[object, ...]]


def assert_linear(timer: Timer, call: Callable[..., object], args: Sized) -> None:
    """`call` on the input at `GROWTH` times its size takes at most `GROWTH` times as long,
    plus noise; the smaller input first, so that a hang is caught at the size it was found."""
    small = timer.seconds(call, *args(1))
    assert small < math.inf, f"killed after {LIMIT} s"
    large = timer.seconds(call, *args(GROWTH))
    assert large <= GROWTH * SLACK * small + FLOOR, (small, large)


@pytest.mark.parametrize("case", list(WORST_CASES))
def test_worst_case_parses_in_linear_time(case: str, timer: Timer) -> None:
    """Each input that made a backtracking parser take seconds to forever parses, at four
    times its size, in at most about four times as long."""
    call, args = WORST_CASES[case]
    assert_linear(timer, call, args)


@pytest.mark.parametrize(
    ("module", "name", "unit", "count"),
    [
        ("agent.spark.plan.touched.scans", "_JDBC_SCAN", "Scan JDBCRelation(", 8000),
        ("agent.spark.plan.attributes.typeinfer", "_CAST", " as a", 8000),
        ("agent.spark.plan.touched.read", "_DELTA_STATE", " - ", 8000),
        ("agent.spark.plan.touched.scans", "_LOCATION_TEXT", "Location: a(1 paths)[", 7700),
    ],
    ids=["JDBC scan, 144 KB", "cast, 40 KB", "Delta state scan, 24 KB", "location, 160 KB"],
)
def test_pattern_searches_its_worst_text_in_linear_time(
    module: str, name: str, unit: str, count: int, timer: Timer
) -> None:
    """The patterns found quadratic (144 KB, 40 KB, 24 KB, 160 KB) search their worst text,
    and four times as much of it, in linear time, whichever way a caller applies them."""
    prefix = {"_CAST": "cast(", "_DELTA_STATE": "Scan ExistingRDD Delta Table State "}
    assert_linear(
        timer,
        pattern_search,
        lambda k: (module, name, prefix.get(name, "") + unit * count * k),
    )


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


#: The CPU time one random example may take (Hypothesis's deadline is wall time, which a
#: busy machine stretches; the CPU time of this thread it barely changes).
EXAMPLE_CPU = 1.0


@settings(max_examples=150, deadline=None)
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
    began = time.thread_time()
    read_plan(plan, description)
    parse_plan(description)
    assert time.thread_time() - began < EXAMPLE_CPU


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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=nested_pattern(), length=st.integers(1, 10_000))
@example(pattern="(x+x+)+y", length=10_000)
def test_random_redaction_patterns_run_within_a_second(pattern: str, length: int) -> None:
    """Patterns of nested quantifiers, against a value of up to 10,000 `x`, decide in well
    under a second whether the value is hidden; one that needs what neither holds hides
    nothing."""
    began = time.thread_time()
    hidden = redaction(pattern).hides("spark.master", "x" * length)
    assert time.thread_time() - began < EXAMPLE_CPU
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
    well under a second of CPU time, to exactly the events of the log without them."""
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
