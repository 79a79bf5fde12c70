"""The checkout is self-contained: no code or test reads a path above the repository root."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What is scanned: the package, the tests, the scripts and the two entry points.
SCANNED = ("agent", "tests", "scripts", "run", ".ci")
#: The team's reference folder beside the checkout, named by a pattern, not spelled out.
SIBLING = re.compile(r"\.\./+shared\b")
#: In shell scripts: the script's own directory, climbed with `/..`.
SHELL_HERE = re.compile(r'dirname "?\$(?:0|\{BASH_SOURCE\[0\]\})"?\)"?((?:/\.\.)*)')
#: In shell scripts (which run from the root): a relative path that starts by climbing.
SHELL_CLIMB = re.compile(r"""(?:^|[\s"'=:(])\.\./""")
_RESOLVERS = {"Path", "PurePath", "resolve", "absolute", "abspath", "realpath", "normpath"}


def scanned_files(root: Path) -> list[Path]:
    """Python and shell sources under `root` that belong to the scanned parts."""
    files: list[Path] = []
    for name in SCANNED:
        path = root / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in sorted(path.rglob("*")) if p.is_file() and _is_source(p)]
    return files


def _is_source(path: Path) -> bool:
    if path.suffix == ".py":
        return True
    return path.suffix == ".sh" or path.parent.name == ".ci"


def climbs_above(root: Path) -> list[str]:
    """`file:line: what` for every path expression that leaves `root`."""
    problems: list[tuple[str, int, str]] = []
    for path in scanned_files(root):
        relative = path.relative_to(root)
        text = path.read_text(encoding="utf-8", errors="replace")
        found: dict[int, str] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            if SIBLING.search(line):
                found.setdefault(number, "names the shared folder beside the checkout")
        if path.suffix == ".py":
            for number, what in _python_climbs(text, len(relative.parts)):
                found.setdefault(number, what)
        else:
            for number, what in _shell_climbs(text, len(relative.parts)):
                found.setdefault(number, what)
        problems += [(str(relative), n, what) for n, what in found.items()]
    return [f"{name}:{n}: {what}" for name, n, what in sorted(problems)]


def _shell_climbs(text: str, depth: int) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        for match in SHELL_HERE.finditer(code):
            if 1 + match.group(1).count("/..") > depth:
                found.append((number, "climbs above the repository root"))
        if SHELL_CLIMB.search(code):
            found.append((number, "a relative path that starts above the repository root"))
    return found


def _python_climbs(text: str, depth: int) -> list[tuple[int, str]]:
    """Path expressions built on `__file__` whose level (directories above the file) exceeds
    `depth`, the level of the repository root: `.parent`, `.parents[N]`, `dirname`, and
    joins with `..` (`/` or `os.path.join`), also through names assigned such a path."""
    tree = ast.parse(text)
    names: dict[str, int] = {}
    found: list[tuple[int, str]] = []

    def level(node: ast.expr) -> int | None:
        if isinstance(node, ast.Name):
            return 0 if node.id == "__file__" else names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = level(node.value)
            if base is None:
                return None
            return base + 1 if node.attr == "parent" else None
        if isinstance(node, ast.Subscript):
            value, index = node.value, node.slice
            if (
                isinstance(value, ast.Attribute)
                and value.attr == "parents"
                and isinstance(index, ast.Constant)
                and isinstance(index.value, int)
            ):
                base = level(value.value)
                return None if base is None else base + index.value + 1
            return None
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in _RESOLVERS:
                target = node.args[0] if node.args else getattr(func, "value", None)
                return level(target) if isinstance(target, ast.expr) else None
            if called == "dirname" and node.args:
                base = level(node.args[0])
                return None if base is None else base + 1
            if called == "join" and node.args:
                return joined(level(node.args[0]), node.args[1:])
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return joined(level(node.left), [node.right])
        return None

    def joined(base: int | None, parts: list[ast.expr]) -> int | None:
        if base is None:
            return None
        for part in parts:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                return None
            for segment in part.value.split("/"):
                if segment == "..":
                    base += 1
                    if base > depth:
                        return base
                elif segment not in ("", "."):
                    base -= 1
        return base

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = level(node.value)
            for target in targets:
                if isinstance(target, ast.Name) and value is not None:
                    names[target.id] = value
    for node in ast.walk(tree):
        if isinstance(node, ast.expr):
            value = level(node)
            if value is not None and value > depth:
                found.append((node.lineno, "climbs above the repository root"))
    return found


def test_nothing_reads_above_the_repository_root() -> None:
    """No path in agent/, tests/, scripts/, run or .ci/ leaves the checkout."""
    assert climbs_above(ROOT) == []


def test_scan_names_each_climb_by_file_and_line(tmp_path: Path) -> None:
    """Joins with `..`, parents[N] past the root, the sibling folder and a shell `../` fail."""
    (tmp_path / "tests" / "deep").mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    (tmp_path / ".ci").mkdir()
    (tmp_path / "tests" / "deep" / "a.py").write_text(
        "from pathlib import Path\n"
        "ROOT = Path(__file__).resolve().parents[2]\n"
        "OK = ROOT / 'tests' / '..' / 'agent'\n"
        "UP = ROOT / '..' / 'elsewhere'\n"
        "TOO_FAR = Path(__file__).parents[3]\n"
        "ALSO = Path(__file__).parent.parent.parent.parent\n"
        "OTHER = '" + ".." + "/shared/spec'\n"
    )
    (tmp_path / "scripts" / "b.py").write_text(
        "import os\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
        "X = os.path.join(HERE, '..', '..', 'x')\n"
    )
    (tmp_path / ".ci" / "run").write_text('#!/bin/bash\ncd "$(dirname "$0")/../.."\n')
    (tmp_path / "run").write_text('#!/bin/bash\ncd "$(dirname "$0")"\ncat ../notes\n')
    assert climbs_above(tmp_path) == [
        ".ci/run:2: climbs above the repository root",
        "run:3: a relative path that starts above the repository root",
        "scripts/b.py:3: climbs above the repository root",
        "tests/deep/a.py:4: climbs above the repository root",
        "tests/deep/a.py:5: climbs above the repository root",
        "tests/deep/a.py:6: climbs above the repository root",
        "tests/deep/a.py:7: names the shared folder beside the checkout",
    ]
