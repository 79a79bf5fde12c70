"""JSON read as a stream of events in bounded memory: a value is built only within a budget,
everything else is skipped as it goes by.

`json.loads` of a 32 MiB file of `{},{},...` holds 11 million dicts at once (800 MB). The
readers of table metadata take yajl's incremental parser's events (ijson's C backend) one at
a time instead, keep what they need, and charge what they build to a `Budget`: an estimate
(`_cost`) of what CPython takes for each value (64-bit, 3.11), never below it, so a value built
within a budget is at most that large. `check_loads` charges a text the same way before
`json.loads` may read it. Nesting deeper than `MAX_DEPTH` is refused (json.loads refuses it
past Python's recursion limit, near 1000).

Values are built as `json.loads` builds them (a repeated key: the last value, in the place of
the first). What no Delta or Iceberg writer produces may read differently: NaN, Infinity and a
byte order mark are refused, an escaped lone surrogate (`\\ud800`) reads as `?`.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Final, Protocol

import ijson

#: What a malformed text raises from the event stream (ijson's errors are no ValueError).
JSONError: Final = ijson.JSONError
MAX_DEPTH: Final = 512
Event = tuple[str, Any]
Events = Iterator[Event]

_OPEN: Final = {"start_map": 64, "start_array": 56}  # an empty dict, an empty list
_CLOSE: Final = ("end_map", "end_array")
_ENTRY: Final = 104  # a dict entry, with room for the dict's growth
_ITEM: Final = 16  # a list's slot, with room for the list's growth


class Readable(Protocol):
    """A binary file, or what reads like one."""

    def read(self, size: int = -1, /) -> bytes: ...


def events(source: bytes | Readable) -> Events:
    """The parser's events of one JSON text: (kind, value), numbers as int or Decimal (exact:
    a fraction becomes the float json.loads makes of it when built)."""
    stream: Events = ijson.basic_parse(source, use_float=False)
    return stream


def following(stream: Events) -> Event:
    """The next event; ValueError when the text ends (ijson says so first, for a cut text)."""
    event = next(stream, None)
    if event is None:
        raise ValueError("the JSON text ends inside a value")
    return event


def finish(stream: Events) -> None:
    """Read to the end of the text: anything after its one value is an error."""
    for _ in stream:
        raise ValueError("more than one JSON value")


class Budget:
    """Bytes a value being built may take; `charge` raises ValueError past the limit."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.what = what
        self.used = 0

    def charge(self, size: int) -> None:
        self.used += size
        if self.used > self.limit:
            raise ValueError(f"{self.what} takes more than {self.limit >> 20} MiB in memory")


def build(stream: Events, first: Event, budget: Budget) -> Any:
    """The value that begins with the event `first`, as json.loads would make it, charged to
    `budget`."""
    kind, value = first
    if kind not in _OPEN:
        budget.charge(_cost(kind, value))
        return _scalar(value)
    budget.charge(_OPEN[kind])
    root: Any = {} if kind == "start_map" else []
    stack: list[Any] = [root]
    keys: list[str] = [""]  # the key the next value of each open map takes
    for kind, value in stream:
        if kind == "map_key":
            budget.charge(_ENTRY + _text_cost(value))
            keys[-1] = value
            continue
        if kind in _CLOSE:
            stack.pop()
            keys.pop()
            if not stack:
                return root
            continue
        if kind in _OPEN:
            budget.charge(_OPEN[kind])
            item: Any = {} if kind == "start_map" else []
        else:
            budget.charge(_cost(kind, value))
            item = _scalar(value)
        top = stack[-1]
        if isinstance(top, list):
            budget.charge(_ITEM)
            top.append(item)
        else:
            top[keys[-1]] = item
        if kind in _OPEN:
            if len(stack) >= MAX_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
            stack.append(item)
            keys.append("")
    raise ValueError("the JSON text ends inside a value")


def skip(stream: Events, first: Event) -> None:
    """Read past the value that begins with the event `first`, keeping nothing."""
    if first[0] not in _OPEN:
        return
    depth = 1
    for kind, _ in stream:
        if kind in _OPEN:
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
        elif kind in _CLOSE:
            depth -= 1
            if not depth:
                return
    raise ValueError("the JSON text ends inside a value")


def check_loads(text: str, budget: Budget) -> None:
    """Raise ValueError unless `text` is one JSON value that json.loads makes within `budget`
    (what build would charge), without building anything."""
    stream = events(text.encode())  # ijson reads text through a slow path, with a warning
    in_list = bytearray()  # per open container: 1 for a list
    try:
        for kind, value in stream:
            if kind == "map_key":
                budget.charge(_ENTRY + _text_cost(value))
                continue
            if kind in _CLOSE:
                in_list.pop()
                continue
            if in_list and in_list[-1]:
                budget.charge(_ITEM)
            if kind in _OPEN:
                budget.charge(_OPEN[kind])
                if len(in_list) >= MAX_DEPTH:
                    raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
                in_list.append(kind == "start_array")
            else:
                budget.charge(_cost(kind, value))
    except JSONError as error:
        raise ValueError(f"not JSON: {first_line(error)}") from None


def first_line(error: BaseException) -> str:
    """The first line of a parser error (yajl's go on to draw the text where it stopped)."""
    text = error.args[0] if error.args else ""
    if isinstance(text, bytes):  # yajl's message about bytes that are no UTF-8
        text = text.decode("utf-8", "replace")
    return str(text).split("\n", 1)[0]


def _scalar(value: Any) -> Any:
    return float(value) if isinstance(value, Decimal) else value


def _cost(kind: str, value: Any) -> int:
    if kind == "string":
        return _text_cost(value)
    if kind == "number":
        if isinstance(value, int):
            return 32 + value.bit_length() // 30 * 4
        return 24  # a float
    return 0  # true, false and null are shared


def _text_cost(text: str) -> int:
    return 49 + len(text) if text.isascii() else 76 + 4 * len(text)
