"""The documentation site builds with `mkdocs build --strict`, and the README stays short."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = Path(sys.executable).with_name("mkdocs")
README_MAX_LINES = 250

#: A link from the README into the site: `[text](docs/page.md#anchor)`.
DOCS_LINK = re.compile(r"\]\((docs/[^)#\s]+\.md)(?:#([^)\s]+))?\)")


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of `project`'s mkdocs.yml into `site`."""
    # Material's end-of-life notice is not a warning of the build; it only clutters the output.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def page_html(site: Path, page: str) -> Path:
    """The built HTML of `docs/...md` (directory URLs: `a/b.md` is `a/b/index.html`)."""
    relative = Path(page).relative_to("docs").with_suffix("")
    if relative.name == "index":
        return site / relative.parent / "index.html"
    return site / relative / "index.html"


def test_docs_build_strict(tmp_path: Path) -> None:
    """Every page builds with no warning: no broken link or anchor, no page left out of nav."""
    result = build(ROOT, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "operations/files/index.html").is_file()


def test_readme_is_short() -> None:
    """README.md has at most 250 lines; everything else lives under docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_readme_links_into_docs_resolve(tmp_path: Path) -> None:
    """Each README link into docs/ names a page of the site, and an anchor that page has."""
    site = tmp_path / "site"
    result = build(ROOT, site)
    assert result.returncode == 0, result.stdout + result.stderr
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = DOCS_LINK.findall(readme)
    assert links, "the README links to no docs page"
    broken: list[str] = []
    for page, anchor in links:
        if not (ROOT / page).is_file():
            broken.append(f"{page}: no such file")
            continue
        if anchor and f'id="{anchor}"' not in page_html(site, page).read_text(encoding="utf-8"):
            broken.append(f"{page}#{anchor}: no such anchor")
    assert broken == []


def test_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The check works: a link to a page that does not exist makes the strict build fail."""
    shutil.copy2(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    with (tmp_path / "docs/index.md").open("a", encoding="utf-8") as index:
        index.write("\n[x](nowhere.md)\n")
    result = build(tmp_path, tmp_path / "site")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "nowhere.md" in result.stdout + result.stderr
