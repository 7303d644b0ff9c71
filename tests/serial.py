"""Tests that must not run beside another test when pytest-xdist spreads the suite over workers.

`make test` runs the tests on one xdist worker per CPU. Most tests are independent (their own
``tmp_path``, ports the system picks, processes found by their own folder), but a few must have
the machine to themselves: they start hundreds of processes, or change the machine (Docker,
network namespaces), or measure something another test's load would disturb. Such a test holds
a lock that every other test shares: it starts once the tests then running have ended, and no
other test starts until it has ended. A serial test that is waiting goes first: new tests queue
behind it, so a stream of short tests on the other workers cannot keep it waiting.

The lock is a pair of ``flock`` files in a folder the xdist controller makes for the run and
hands to its workers; without xdist nothing runs beside a test and no lock is taken. A module
fixture's setup and teardown run inside its first and last test on a worker, so under that
test's lock; between its tests it stays up while other tests run.
(xdist's own ``xdist_group`` with ``--dist loadgroup`` does not group with pytest 9.2: xdist
3.8 renames ``item._nodeid``, which pytest 9.2 no longer reads.)
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest

#: Markers whose tests run alone under xdist (``serial`` says so explicitly; the Docker and
#: network-namespace tests change the machine: a daemon that a module starts and stops, bridges).
SERIAL_MARKERS = ("serial", "docker", "netns")

#: The key of the lock folder in ``workerinput`` (what the controller hands each worker).
LOCK_DIR_KEY = "dcop_serial_lock_dir"


class SuiteLock:
    """A readers-writer lock across xdist workers: shared by ordinary tests, exclusive for
    serial ones, with a gate that a waiting exclusive holder closes to new shared holders."""

    def __init__(self, folder: Path) -> None:
        self._gate: BinaryIO = (folder / "gate.lock").open("ab")
        self._lock: BinaryIO = (folder / "tests.lock").open("ab")

    @contextlib.contextmanager
    def held(self, exclusive: bool) -> Iterator[None]:
        # Every taker passes the gate; a serial test keeps it closed until the tests running
        # now have ended, so that no new test starts meanwhile.
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)

    def close(self) -> None:
        self._gate.close()
        self._lock.close()


# ---- pytest hooks (tests/conftest.py imports them; `-p tests.serial` loads them alone) ---------
_LOCK_DIR = pytest.StashKey[Path]()
_LOCK = pytest.StashKey[SuiteLock]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(xdist controller, once per worker) Hand the worker the folder of this run's lock."""
    config = node.config
    if _LOCK_DIR not in config.stash:
        config.stash[_LOCK_DIR] = Path(tempfile.mkdtemp(prefix="dcop-pytest-lock-"))
    node.workerinput[LOCK_DIR_KEY] = str(config.stash[_LOCK_DIR])


def pytest_configure(config: pytest.Config) -> None:
    folder = getattr(config, "workerinput", {}).get(LOCK_DIR_KEY)
    if folder is not None:
        config.stash[_LOCK] = SuiteLock(Path(folder))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _LOCK in config.stash:
        config.stash[_LOCK].close()
    if _LOCK_DIR in config.stash:
        shutil.rmtree(config.stash[_LOCK_DIR], ignore_errors=True)


def runs_alone(item: pytest.Item) -> bool:
    """Whether ``item`` takes the lock alone: a serial marker, and not skipped at collection
    (a skipped test would only stall the other workers)."""
    return item.get_closest_marker("skip") is None and any(
        item.get_closest_marker(m) is not None for m in SERIAL_MARKERS
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: waiting is not in pytest-timeout's time
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Setup, call and teardown under the lock (a module fixture's setup and teardown too)."""
    lock = item.config.stash.get(_LOCK, None)
    if lock is None:
        return (yield)
    with lock.held(exclusive=runs_alone(item)):
        return (yield)
