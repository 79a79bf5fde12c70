"""YAML nodes with their line marks: composing a config file and reading its core scalars.

Mappings and sequences are walked by `loader`, never constructed, so every value keeps
the line it was written on and no YAML feature beyond core scalars reaches the config.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agent.errors import ConfigError

_TAG = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = (_TAG + t for t in ("str", "int", "float", "bool", "null"))
MERGE = _TAG + "merge"
# Tags the resolver gives plain YAML; anything else was written explicitly (`!env X`,
# `!!python/name:...`) and would otherwise be silently ignored by the walk.
PLAIN_TAGS = frozenset(
    _TAG + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary")
)
# Builds plain scalars only: mappings and sequences are walked here, never constructed, so
# line marks survive and no YAML feature beyond core scalars reaches the config.
_SCALARS = SafeConstructor()
_SCALAR_ERRORS = (ValueError, KeyError, TypeError, OverflowError, yaml.YAMLError)


def compose(text: str, source: str) -> Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        # The context reads as the start of the sentence: "while scanning a quoted scalar,
        # found unexpected end of stream".
        problem = ", ".join(filter(None, (exc.context, exc.problem))) or "syntax error"
        raise ConfigError(f"{source}{where}: not valid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        problem = str(exc).splitlines()[0]
        raise ConfigError(f"{source}:{line}: not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    except RecursionError:
        # The composer recurses per nesting level; thousands of '[' exhaust the stack.
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None


def line_of(node: Node) -> int:
    return node.start_mark.line + 1


def is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == NULL


def describe(node: Node) -> str:
    """The offending value as the user wrote it: strings quoted, numbers and booleans bare."""
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    if node.tag == NULL:
        return "null"
    text = str(node.value)
    text = text if len(text) <= 80 else text[:77] + "..."
    return text if node.tag in (INT, FLOAT, BOOL) else repr(text)


def scalar(node: Node, tags: tuple[str, ...]) -> Any:
    """The constructed value of a scalar with one of `tags`, or None when it is anything else."""
    if not isinstance(node, ScalarNode) or node.tag not in tags:
        return None
    try:
        if node.tag == INT:
            return _SCALARS.construct_yaml_int(node)
        if node.tag == FLOAT:
            return _SCALARS.construct_yaml_float(node)
        if node.tag == BOOL:
            return _SCALARS.construct_yaml_bool(node)
    except _SCALAR_ERRORS:  # explicit tags on bad text, like `!!int abc`
        return None
    return node.value
