"""Kafka in a batch plan: the topics a query reads or a save writes, as the plan names them.

Reads: `Scan KafkaRelation(strategy=Subscribe[a, b] | SubscribePattern[p] | Assign[t-0, t-1],
…)`; the bootstrap servers of a read are not in the plan (the translator takes them from what
else the application's log names, see `translate/brokers`). A pattern is named as it is
written and marked a pattern (`DatasetRef.pattern`): the topics it matched are not in the log.
Writes: `SaveIntoDataSourceCommand` of `KafkaSourceProvider` with the options
`kafka.bootstrap.servers` and `topic`. Without a `topic` option the rows' `topic` column
names the topics: its definition in the command's child (`<expr> AS topic#N`, Spark prints
string literals unquoted) gives them when it is a literal, a CASE or an IF of literals
(`CASE WHEN (…) THEN events-a ELSE events-b END`). A topic computed from the data names one
dataset by the pattern of the topics it can take (`concat(alarms-, level#3)` -> `alarms-.*`,
marked a pattern like a `subscribePattern` read) and a note says so; a topic that is null on
every row names none. The query a save writes is its child, printed as a logical plan
(`lineage` follows it, `LogicalRelation` naming the relations it reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from agent import linear
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.syntax.schema import split_top
from agent.spark.plan.syntax.text import Block, bracketed, parse_attribute

_RELATION = linear.compile(
    rf"^Scan KafkaRelation\(strategy=(?P<kind>[{linear.WORD}]+)\[(?P<items>[^\]]*)\]"
)
#: Items and expressions are stripped: `$` is their end.
_PARTITION = linear.compile(r"^(?P<topic>.+)-\d+$")
#: A legal Kafka topic name: what a string literal naming a topic prints as.
_TOPIC = linear.compile(r"^[A-Za-z0-9._-]{1,249}$")
_ATTRIBUTE_REF = linear.compile(rf"^[{linear.WORD}]+#(?P<id>\d+)L?$")
_MAX_DEPTH = 32  # aliases and nested CASE / IF followed at most, against hostile plans
_ANY = ".*"  # the pattern of a computed part of a topic
#: Why a Kafka sink of a streaming query names no topic.
STREAM_TOPIC: Final = "the event log does not show the topic option of a Kafka sink"
_MAX_PATTERN_TEXT = 2000  # characters of a topic expression read for its literal parts
_MAX_STEPS = 10_000  # expressions looked at per save, however often aliases repeat
_MAX_PATTERN = 1000  # characters of a topic pattern; a longer one says any topic


def kafka_scan(name: str) -> list[DatasetRef] | None:
    """The topics a `KafkaRelation` scan reads; None if `name` is no Kafka scan."""
    matched = _RELATION.match(name)
    if matched is None:
        return None
    items = [i.strip() for i in split_top(matched["items"]) if i.strip()]
    if matched["kind"] == "Assign":  # topic partitions: `clicks-0`
        items = [m["topic"] if (m := _PARTITION.match(i)) else i for i in items]
    pattern = matched["kind"] == "SubscribePattern"
    if pattern:
        items = [matched["items"].strip()]
    return [
        DatasetRef("input", name, kafka=(None, topic), format="kafka", pattern=pattern)
        for topic in dict.fromkeys(items)
    ]


def kafka_save(
    node: str, options: Mapping[str, str], described: Sequence[Block], notes: list[str]
) -> list[DatasetRef]:
    """The topics a Kafka batch save writes, on the servers its options name: its `topic`
    option, else the literal topics of its rows' `topic` column; none when not understood."""
    servers = options.get("kafka.bootstrap.servers")
    topic = options.get("topic")
    if topic:
        return [DatasetRef("output", node, kafka=(servers, topic), format="kafka")]
    topics, why = column_topics(described)
    if topics:
        return [DatasetRef("output", node, kafka=(servers, t), format="kafka") for t in topics]
    pattern = column_pattern(described)
    if pattern is None:
        notes.append(f"Kafka save without a topic option names no topic: {why}")
        return []
    notes.append(
        f"Kafka save without a topic option: {why}; its topics are chosen per row (the pattern "
        f"{pattern!r}), so it names no output dataset"
    )
    return [DatasetRef("output", node, kafka=(servers, pattern), format="kafka", pattern=True)]


def stream_topics(node: str, described: Sequence[Block]) -> list[DatasetRef]:
    """The topics a Kafka sink of a micro-batch writes (its writer prints none): the literal
    topics of its rows' `topic` column, a pattern when it is computed; without such a
    column its `topic` option chose, which no plan prints (`STREAM_TOPIC`)."""
    topics, _ = column_topics(described)
    if topics:
        return [DatasetRef("output", node, kafka=(None, t), format="kafka") for t in topics]
    pattern = column_pattern(described)
    if pattern is not None:
        return [DatasetRef("output", node, kafka=(None, pattern), format="kafka", pattern=True)]
    return [DatasetRef("output", node, format="kafka", unknown_reason=STREAM_TOPIC)]


def column_topics(described: Sequence[Block]) -> tuple[tuple[str, ...], str]:
    """The topics the `topic` column of a save's rows can take, from its definitions in the
    plan (a union defines it once per branch); () and why when any is not understood."""
    defined, topic_ids = _definitions(described)
    if not topic_ids:
        return (), "the rows' topic column is not computed in the plan"
    found: list[str] = []
    budget = _Budget()
    for expr_id in dict.fromkeys(topic_ids):
        expression = defined[expr_id]
        topics = _literals(expression, defined, 0, budget)
        if not topics:
            return (), f"topic column {expression[:200]!r} is no literal, CASE or IF of literals"
        found += topics
    return tuple(dict.fromkeys(found)), ""


def column_pattern(described: Sequence[Block]) -> str | None:
    """A regular expression (Java's, as `subscribePattern` takes) of the topics a computed
    `topic` column can take: its literal parts kept, every computed part `.*`
    (`concat(alarms-, level#3)` -> `alarms-.*`); None when the plan does not compute the
    column or every row's topic is null."""
    defined, topic_ids = _definitions(described)
    budget = _Budget()
    found = [_pattern(defined[i], defined, 0, budget) for i in dict.fromkeys(topic_ids)]
    branches = list(dict.fromkeys(p for p in found if p is not None))
    if not branches:
        return None
    return _ANY if _ANY in branches else branches[0] if len(branches) == 1 else _any_of(branches)


def _definitions(described: Sequence[Block]) -> tuple[dict[int, str], list[int]]:
    """Every alias the plan defines (expression id -> expression), and the ids of those
    that define a `topic` column."""
    defined: dict[int, str] = {}
    topic_ids: list[int] = []
    for block in described:
        for value in block.details.values():
            for item in bracketed(value) or ():
                head, sep, _ = item.rpartition(" AS ")
                attribute = parse_attribute(item)
                if attribute is None or not sep:
                    continue
                defined.setdefault(attribute.expr_id, head.strip())
                if attribute.name == "topic":
                    topic_ids.append(attribute.expr_id)
    return defined, topic_ids


class _Budget:
    """Steps left for following one save's topic expressions: aliases may refer to one
    another many times over (`concat(t#2, t#2) AS t#1`, …), so a walk is bounded in total
    work, not only in depth."""

    def __init__(self) -> None:
        self.steps = _MAX_STEPS

    def spent(self) -> bool:
        self.steps -= 1
        return self.steps < 0


def _pattern(
    expression: str, defined: Mapping[int, str], depth: int, budget: _Budget
) -> str | None:
    """The pattern of one expression's values (see `column_pattern`); None for `null`.
    Past the budget, or past `_MAX_PATTERN` characters, any topic (`.*`)."""
    found = _pattern_of(expression, defined, depth, budget)
    return _ANY if found is not None and len(found) > _MAX_PATTERN else found


def _pattern_of(
    expression: str, defined: Mapping[int, str], depth: int, budget: _Budget
) -> str | None:
    text = expression.strip()
    while text.startswith("(") and _closing(text, 0) == len(text) - 1:
        text = text[1:-1].strip()
    if text == "null":
        return None
    if depth > _MAX_DEPTH or len(text) > _MAX_PATTERN_TEXT or budget.spent():
        return _ANY
    if _TOPIC.match(text):
        return text.replace(".", "\\.")
    reference = _ATTRIBUTE_REF.match(text)
    if reference is not None:
        aliased = defined.get(int(reference["id"]))
        return _ANY if aliased is None else _pattern(aliased, defined, depth + 1, budget)
    if text.startswith("concat(") and _closing(text, 6) == len(text) - 1:
        parts = [_pattern(a, defined, depth + 1, budget) for a in split_top(text[7:-1])]
        if any(p is None for p in parts):
            return None  # concat with a null is null
        joined = "".join(p for p in parts if p is not None)
        while _ANY + _ANY in joined:
            joined = joined.replace(_ANY + _ANY, _ANY)
        return joined
    values = _case_values(text) if text.startswith("CASE ") else _if_values(text)
    if values is None:
        return _ANY
    branches = [p for v in values if (p := _pattern(v, defined, depth + 1, budget)) is not None]
    unique = list(dict.fromkeys(branches))
    if not unique:
        return None
    return _ANY if _ANY in unique else unique[0] if len(unique) == 1 else _any_of(unique)


def _any_of(patterns: Sequence[str]) -> str:
    return "(" + "|".join(patterns) + ")"


def _literals(
    expression: str, defined: Mapping[int, str], depth: int, budget: _Budget
) -> list[str] | None:
    """The topics an expression evaluates to when it is a literal, an alias of one, or a
    CASE / IF whose values are; None otherwise. `null` (a row Kafka refuses) adds none."""
    text = expression.strip()
    while text.startswith("(") and _closing(text, 0) == len(text) - 1:
        text = text[1:-1].strip()
    if depth > _MAX_DEPTH or budget.spent():
        return None
    if text == "null":
        return []
    if _TOPIC.match(text):
        return [text]
    reference = _ATTRIBUTE_REF.match(text)
    if reference is not None:
        aliased = defined.get(int(reference["id"]))
        return None if aliased is None else _literals(aliased, defined, depth + 1, budget)
    values = _case_values(text) if text.startswith("CASE ") else _if_values(text)
    if values is None:
        return None
    found: list[str] = []
    for value in values:
        topics = _literals(value, defined, depth + 1, budget)
        if topics is None:
            return None
        found += topics
    return found


def _case_values(text: str) -> list[str] | None:
    """The values of `CASE WHEN c THEN v [WHEN …] [ELSE v] END` (conditions skipped)."""
    words = _words(text)
    if len(words) < 5 or words[0] != "CASE" or words[-1] != "END":
        return None
    values: list[str] = []
    current: list[str] | None = None  # the words of the value being read
    nested = 0
    for word in words[1:-1]:
        if nested == 0 and word in ("WHEN", "ELSE", "THEN"):
            if current is not None:
                values.append(" ".join(current))
            current = [] if word in ("THEN", "ELSE") else None
            continue
        nested += 1 if word == "CASE" else -1 if word == "END" else 0
        if current is not None:
            current.append(word)
    if current is not None:
        values.append(" ".join(current))
    return values if values and all(values) else None


def _if_values(text: str) -> list[str] | None:
    """The two values of `if (c) a else b`, as Spark prints an IF."""
    if not text.startswith("if ("):
        return None
    end = _closing(text, 3)
    if end is None:
        return None
    branches = _words(text[end + 1 :])
    for at, word in enumerate(branches):  # the first top-level `else` not inside a nested if
        if word == "else" and branches[:at].count("if") == branches[:at].count("else"):
            return [" ".join(branches[:at]), " ".join(branches[at + 1 :])]
    return None


def _words(text: str) -> list[str]:
    """Words separated by spaces outside brackets (a call `f(a, b)` is one word)."""
    return [w for w in split_top(text, " ") if w]


def _closing(text: str, opening: int) -> int | None:
    """The index of the parenthesis closing the one at `opening`."""
    depth = 0
    for at in range(opening, len(text)):
        depth += 1 if text[at] == "(" else -1 if text[at] == ")" else 0
        if depth == 0:
            return at
    return None
