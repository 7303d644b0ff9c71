"""Rules with one owner each: the mini-bucket size (dcop.choices.check_z), the task names
(dcop.choices.run_task) and the message limit (dcop.protocol.runspec.check_message_limit), and
what the command line makes of a value that breaks them (one line, exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dcop.choices import RUN_TASKS, SUM_TASKS, TaskName, check_z, run_task
from dcop.errors import InputError, ModelError
from dcop.protocol.runspec import (
    MIB,
    MIN_MESSAGE_BYTES,
    RunSpec,
    check_message_limit,
    message_limit,
)


@pytest.mark.parametrize("bad", [0, -1, None, 1.5, True, "2"])
def test_a_mini_bucket_size_is_a_whole_number_of_at_least_one(bad: object) -> None:
    with pytest.raises(InputError, match="MBE needs a mini-bucket size --z of at least 1"):
        check_z(bad, "MBE")
    with pytest.raises(ModelError):
        check_z(bad, "MBE", error=ModelError)


def test_a_mini_bucket_size_may_be_any_integer_type_and_has_an_upper_bound() -> None:
    assert check_z(np.int64(3), "MBE") == 3 and type(check_z(np.int64(3), "MBE")) is int
    assert check_z(64, "adpop", most=64) == 64
    with pytest.raises(InputError, match="between 1 and 64"):
        check_z(65, "adpop", most=64)
    # the run spec and the inference API use the same rule
    with pytest.raises(InputError, match="adpop needs a mini-bucket size"):
        RunSpec("adpop", 0)


def test_task_names_of_the_command_line_and_of_a_run() -> None:
    assert [run_task(t.value) for t in TaskName] == ["min", "pr", "mar"]
    assert run_task(None) == "min" and set(SUM_TASKS) < set(RUN_TASKS)
    with pytest.raises(InputError, match="unknown task 'map'"):
        run_task("map")


def test_the_message_limit_has_one_rule() -> None:
    assert check_message_limit(MIN_MESSAGE_BYTES) == MIN_MESSAGE_BYTES
    assert message_limit(1.0, least=MIB) == MIB
    for bad in (MIN_MESSAGE_BYTES - 1, 4096 * MIB, 2.0**20, True):
        with pytest.raises(InputError, match=r"\(--max-message-mib\) must be between"):
            check_message_limit(bad)
    with pytest.raises(InputError, match=r"between 1 MiB and 4095 MiB, not 0\.5 MiB"):
        message_limit(0.5, least=MIB)
    with pytest.raises(InputError, match="not nan"):
        message_limit(float("nan"))
    with pytest.raises(InputError, match="message limit"):
        RunSpec(max_message_bytes=MIN_MESSAGE_BYTES - 1)


def test_the_command_line_refuses_a_bad_z_in_one_line(tmp_path: Path) -> None:
    wcsp = tmp_path / "p.wcsp"
    wcsp.write_text("p 2 2 1 10\n2 2\n2 0 1 0\n1 2 3 4\n")
    run = subprocess.run(
        [sys.executable, "-m", "dcop", "solve", str(wcsp), "--algo", "mbe", "--z", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    # typer's range check on the shared --z option answers first, in the one-line usage format
    [line] = run.stderr.strip().splitlines()
    assert "error" in line and "--z" in line and "0" in line, line
