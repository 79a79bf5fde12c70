"""Reading the YAML config file into the dataclasses of `agent.config.model`.

Errors:
    ConfigError: the file is missing, unreadable, not a regular file (a FIFO or device is
    never read from), over 1 MiB, not YAML, or a key is unknown, of the wrong type or out of
    range. The message names the file, the line and the dotted key,
    e.g. ``/etc/lineage-agent/config.yaml:7: lineage.queue_size: expected an integer >= 0,
    got 'many'``; a file with several such keys gets one line for each (`messages`), in
    the file's order, so that one `config check` shows them all. Config code never exits;
    the commands map ConfigError to exit 78.

This module reads the file and runs the stages: `yamlnodes` composes it with line marks,
`walk` reads the nodes into the dataclasses, `client` resolves the OpenLineage client's
settings into the lineage section, and `rules` checks what spans several keys.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
from collections.abc import Mapping
from typing import Final, TypedDict, Unpack

from yaml.nodes import MappingNode

from agent.config import client
from agent.config.clientsources import AgentSide
from agent.config.model import AgentConfig
from agent.config.rules import check_rules
from agent.config.walk import Failed, Reader
from agent.config.yamlnodes import compose, describe, is_null
from agent.errors import ConfigError
from agent.fsutil import file_kind

#: A config is a few KiB; anything larger is refused before it is read.
MAX_CONFIG_BYTES: Final = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Located:
    """A loaded config and where its keys are: for `config check`, which names the line of
    a key a later check refuses and the relative paths the file holds."""

    config: AgentConfig
    lines: Mapping[str, int]  # dotted key -> line of the key in the file
    relative: Mapping[str, str]  # dotted key -> relative path as written (resolved in config)


def load_config(
    path: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> AgentConfig:
    """Read and validate the YAML file at `path`; relative paths in it are taken from its folder.
    The OpenLineage client's variables and its openlineage.yml are read from `environ`
    (default: this process's environment); see `agent.config.client`."""
    return load_located(path, environ).config


def load_located(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Located:
    """`load_config`, with the line of every key and the relative paths as written."""
    source = os.fspath(path)
    text = read_text(source)
    return parse_located(
        text, source, base_dir=os.path.dirname(os.path.abspath(source)), environ=environ
    )


def read_text(source: str) -> str:
    """The UTF-8 text of the regular file `source` (at most MAX_CONFIG_BYTES)."""
    data = _read_regular(source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: cannot read: not UTF-8 text (byte {exc.start})") from None


def _read_regular(source: str) -> bytes:
    """The file's bytes; a FIFO, device or file over MAX_CONFIG_BYTES is refused unread."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
        fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"{source}: cannot read: Is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"{source}: cannot read: not a regular file ({file_kind(info.st_mode)})"
            )
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(_too_large(source, info.st_size))
        chunks: list[bytes] = []
        size = 0
        for _ in range(MAX_CONFIG_BYTES // 65536 + 2):  # the file may grow while read
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:
                raise ConfigError(_too_large(source, size))
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _too_large(source: str, size: int) -> str:
    limit = MAX_CONFIG_BYTES // (1024 * 1024)
    return f"{source}: cannot read: {size} bytes, more than a config file may have ({limit} MiB)"


class ParseOptions(TypedDict, total=False):
    """`parse_config`'s and `parse_located`'s options."""

    base_dir: str | os.PathLike[str] | None
    environ: Mapping[str, str] | None


def parse_config(text: str, source: str, **options: Unpack[ParseOptions]) -> AgentConfig:
    """Validate YAML `text`; errors name `source`. Relative paths resolve against `base_dir`
    (default: the folder of `source`, taken from the working directory if `source` is relative).
    `environ` (default: `os.environ`) holds the OpenLineage client's variables.
    """
    return parse_located(text, source, **options).config


def parse_located(
    text: str,
    source: str,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Located:
    """`parse_config`, with the line of every key and the relative paths as written."""
    root = compose(text, source)
    if root is None or is_null(root):
        raise ConfigError(f"{source}: empty configuration; expected a 'lineage' section")
    reader = Reader(source, os.path.abspath(base_dir or os.path.dirname(os.path.abspath(source))))
    if not isinstance(root, MappingNode):
        raise reader.error(root, "", f"expected a mapping of sections, got {describe(root)}")
    config: AgentConfig | None = None
    with contextlib.suppress(Failed):
        config = reader.value(root, AgentConfig, "")
    if reader.errors or config is None:
        raise ConfigError(*_in_file_order(reader.errors))
    lineage, origins = client.resolve(
        config.lineage,
        AgentSide(
            reader.client_nodes.get("lineage.transport"),
            reader.lines.get("lineage.transport"),
            {
                key: reader.lines[key]
                for key in (
                    "lineage.http",
                    "lineage.file",
                    "lineage.kafka",
                    "lineage.http.endpoint",
                )
                if key in reader.lines
            },
            source,
            reader.base_dir,
        ),
        os.environ if environ is None else environ,
        read_text,
    )
    # the client's variables or openlineage.yml may stand for the whole section
    client_decided = "lineage.transport" in dict(origins) or not lineage.enabled
    if "lineage" not in reader.lines and not client_decided:
        raise reader.error(root, "lineage", "required section is missing")
    config = dataclasses.replace(config, lineage=lineage, source=source, origins=origins)
    check_rules(config, reader, dict(origins))
    if reader.errors:
        raise ConfigError(*_in_file_order(reader.errors))
    return Located(config, dict(reader.lines), dict(reader.relative))


def _in_file_order(errors: list[ConfigError]) -> list[str]:
    """The messages by line (`file:LINE: ...`), each once, in the order found per line."""

    def line(message: str) -> int:
        where = message.rpartition(": ")[0]
        for part in where.split(":"):
            if part.isdigit():
                return int(part)
        return 0

    messages = list(dict.fromkeys(m for error in errors for m in error.messages))
    return sorted(messages, key=line)
