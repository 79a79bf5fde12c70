"""The suite's hand-kept file order (tests/order.py) names files that exist, and the files
holding `alone` tests are the ones handed out last."""

from __future__ import annotations

from pathlib import Path

from tests.order import LAST, LONGEST

ROOT = Path(__file__).resolve().parent.parent


def test_every_ranked_file_exists_once() -> None:
    """A renamed or removed file leaves no stale entry (it would silently lose its rank)."""
    ranked = [*LONGEST, *LAST]
    assert len(set(ranked)) == len(ranked)
    assert [path for path in ranked if not (ROOT / path).is_file()] == []


def test_alone_tests_are_in_the_files_handed_out_last() -> None:
    """An `alone` test elsewhere would wait, with the workers behind it, for a Spark module."""
    marked = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
        if "\n@pytest.mark.alone" in path.read_text()
    }
    assert marked == set(LAST)
