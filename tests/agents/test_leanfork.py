"""The template's fork without the interpreter's at-fork handlers (dcop.agents.leanfork).

Each test runs in a fresh interpreter: a fork from the test process itself (threads of pytest,
xdist's channel) would test nothing and risk a deadlock.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from dcop.agents.leanfork import REPLACED_HANDLERS


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_template_registers_only_the_handlers_a_lean_fork_stands_for() -> None:
    """A new at-fork handler among the template's imports would be skipped in every agent:
    lean_fork must then learn to stand for it too."""
    out = _python(
        """
        import os
        registered = []
        real = os.register_at_fork
        def spy(**hooks):
            registered.extend(f.__module__ for f in hooks.values())
            real(**hooks)
        os.register_at_fork = spy
        from dcop.agents.forked import prepare_template
        prepare_template()
        print(" ".join(sorted(set(registered))))
        """
    )
    modules = set(out.split())
    # threading registers at its import, before any spy (the interpreter's start imports it)
    assert modules <= set(REPLACED_HANDLERS), modules


def test_children_of_a_lean_fork_draw_their_own_numbers_and_run_threads() -> None:
    out = _python(
        """
        import os, random, threading
        from dcop.agents.leanfork import after_lean_fork, lean_fork, single_threaded
        assert single_threaded()
        draws = []
        for _ in range(2):
            read, write = os.pipe()
            pid = lean_fork()
            if pid == 0:
                after_lean_fork()
                box = []
                worker = threading.Thread(target=lambda: box.append(random.random()))
                worker.start()
                worker.join()
                os.write(write, repr(box[0]).encode())
                os._exit(0)
            os.close(write)
            draws.append(os.read(read, 100).decode())
            assert os.waitpid(pid, 0)[1] == 0
        print(draws[0], draws[1], random.random())
        """
    )
    first, second, parent = out.split()
    assert len({first, second, parent}) == 3


def test_a_process_with_another_thread_forks_as_usual() -> None:
    out = _python(
        """
        import os, threading
        from dcop.agents.leanfork import lean_fork, single_threaded
        stop = threading.Event()
        other = threading.Thread(target=stop.wait)
        other.start()
        print(single_threaded())
        pid = lean_fork()
        if pid == 0:
            os._exit(7 if threading.active_count() == 1 else 8)
        stop.set()
        other.join()
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        """
    )
    # os.fork's handlers ran in the child: threading knows only the forking thread there
    assert out.split() == ["False", "7"]
