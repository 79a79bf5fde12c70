"""The `alone` marker: a test that looks at the machine's processes runs while no other test
does, in this run's worker processes or in another run on the same machine.

`job stop` of another user's driver picks it among that uid's SparkSubmit JVMs that started
when the application was submitted (agent/spark/follow/driver/stopping.py). A Spark job that
another worker starts at that moment is one more candidate, and the agent rightly refuses to
guess: the test would fail for what its neighbour did. So every other test holds one lock
file shared for its whole protocol (its setup, module and session fixtures it starts
included, its call and its teardown), and an `alone` test holds it exclusively for its call
(its own fixtures start no Spark driver, and building them needs no one to wait). An `alone`
test waits for the tests running elsewhere to end, no new one starting meanwhile (the
turnstile), and they wait for it; the rest run side by side.

Registered through `pytest_plugins` in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

#: One lock for the machine, not for one run: a run started from another checkout (or by
#: another user of a shared machine) starts Spark drivers as well.
LOCK = Path(tempfile.gettempdir()) / "lineage-agent-tests-alone.lock"
#: Passed through on the way to LOCK. An `alone` test holds it while it waits for LOCK, so
#: no test starts meanwhile: with several workers taking LOCK shared one after another it
#: would otherwise find LOCK free only when they all ran out of tests (flock is not fair).
TURNSTILE = LOCK.with_suffix(".turnstile")

_fds: dict[Path, int] = {}


def _lock_fd(path: Path) -> int:
    fd = _fds.get(path)
    if fd is None:
        fd = _fds[path] = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        # Whoever comes next, as any user, may lock it too; made by another user, it is.
        with contextlib.suppress(PermissionError):
            os.fchmod(fd, 0o666)
    return fd


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "alone: runs while no other test runs on this machine (it looks at the machine's "
        "processes); every other test holds the same lock shared",
    )


# Outermost (tryfirst): the wait for the lock is no part of the test's time under
# pytest-timeout, whose wrapper starts its clock inside this one. An `alone` test waits in its
# call, under the timeout: for at most the longest test running elsewhere.
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    if item.get_closest_marker("alone"):
        return (yield)  # its lock is taken around its call
    with contextlib.ExitStack() as held:
        with _locked(TURNSTILE, fcntl.LOCK_SH):  # passed through, not held
            held.enter_context(_locked(LOCK, fcntl.LOCK_SH))
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    if not item.get_closest_marker("alone"):
        return (yield)
    with _locked(TURNSTILE, fcntl.LOCK_EX), _locked(LOCK, fcntl.LOCK_EX):
        return (yield)


@contextlib.contextmanager
def _locked(path: Path, how: int) -> Iterator[None]:
    fd = _lock_fd(path)
    fcntl.flock(fd, how)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def pytest_unconfigure(config: pytest.Config) -> None:
    for fd in _fds.values():
        os.close(fd)
    _fds.clear()
