"""A signal from dcop's first line on ends in the result document (round 4, finding 14).

The moments are events, not times: a child counts as started once ``/proc/PID/status`` shows
SIGTERM caught (Python catches only SIGINT by itself, so that is ``dcop.cli.entry.main``
installing its handlers, its first act), and the signal is sent then or a little later, while
the command imports its modules, before typer has parsed the options. What is asserted is the
document. Before that line the interpreter is still starting (its own start-up and ``site``,
before any code of dcop runs): a signal then ends the process as it ends any program, which
USAGE.md says.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dcop.generators import random_network
from dcop.io import write_problem
from tests.cli.conftest import assert_valid

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads a child's caught signals in /proc"
)

#: Seconds after the handlers are in at which the signal is sent: at once (the command's
#: imports), then spread over its start-up.
MOMENTS_S = (0.0, 0.005, 0.02, 0.1)


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (``SigCgt`` of its status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except OSError:
        pass
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("command", ["solve", "run"])
def test_a_signal_from_dcops_first_line_on_writes_the_document(
    tmp_path: Path, sig: int, command: str
) -> None:
    problem = tmp_path / "p.wcsp"
    write_problem(random_network(10, 4, 0.3, 0.2, seed=5), problem)
    interrupted = 0
    for k, after_s in enumerate(MOMENTS_S):
        out = tmp_path / f"r{k}.json"
        child = subprocess.Popen(
            [sys.executable, "-m", "dcop", command, str(problem), "--json", str(out), "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while not catches(child.pid, signal.SIGTERM) and child.poll() is None:
            time.sleep(0.0005)
        time.sleep(after_s)
        child.send_signal(sig)
        _, err = child.communicate(timeout=180)
        doc = json.loads(out.read_text())
        assert_valid(doc)
        if child.returncode == 130:
            name = signal.Signals(sig).name
            assert doc["status"] == "interrupted" and name in doc["message"], doc
            assert err == f"dcop: interrupted (signal {name})\n"
            interrupted += 1
        else:  # the answer came first: it is kept
            assert child.returncode == 0 and doc["status"] == "ok", (err, doc)
    # the signal sent as the handlers go in lands while the command still imports
    assert interrupted >= 1


def test_the_entry_point_loads_little_before_its_handlers() -> None:
    """What the console script imports before ``main`` installs the handlers widens the window in
    which a signal leaves no document: dcop's own few modules and ``signal``, not ``typing``
    (4 ms) or anything that loads NumPy."""
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from dcop.cli.entry import main\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert {m for m in loaded if m.startswith("dcop")} == {
        "dcop",
        "dcop.cli",
        "dcop.cli.entry",
        "dcop.cli.signals",
        "dcop.errors",
    }
    assert "typing" not in loaded and "numpy" not in loaded
