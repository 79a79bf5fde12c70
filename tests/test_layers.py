"""The layers hold: import-linter's contracts, no import cycles, one door to the daemon."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def graph() -> grimp.ImportGraph:
    """Every import in `agent`, function-level and TYPE_CHECKING ones included."""
    return grimp.build_graph("agent", include_external_packages=False, cache_dir=None)


def cycles(imports: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(imports.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(imports.modules):
        if module not in index:
            visit(module)
    return found


def test_contracts_are_kept() -> None:
    """import-linter's contracts in pyproject.toml (the daemon side's layers, the Spark side's
    one-way stages) hold."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_no_import_cycles() -> None:
    """No two modules of `agent` import each other, directly or through others."""
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    """The cycle check itself reports a cycle when there is one."""
    imports = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        imports.add_module(name)
    imports.add_import(importer="pkg.a", imported="pkg.b")
    imports.add_import(importer="pkg.b", imported="pkg.c")
    imports.add_import(importer="pkg.c", imported="pkg.a")
    assert cycles(imports) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_only_the_run_command_imports_the_daemon() -> None:
    """The daemon is built by the `run` command alone; nothing else reaches into it."""
    importers = graph().find_modules_that_directly_import("agent.service.daemon")
    assert importers == {"agent.commands.run"}


def test_the_top_of_the_package_stays_small() -> None:
    """At most eight modules sit directly under `agent/`; everything else is in a folder."""
    modules = sorted(path.name for path in (ROOT / "agent").glob("*.py"))
    assert len(modules) <= 8, modules


def test_every_folder_says_its_role() -> None:
    """Each package of `agent` opens with a docstring that says what it holds."""
    silent = [
        str(init.relative_to(ROOT))
        for init in sorted((ROOT / "agent").rglob("__init__.py"))
        if ast.get_docstring(ast.parse(init.read_text())) is None
    ]
    assert silent == []
