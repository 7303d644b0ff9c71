"""What a forked agent writes after the fork, step by step up to its hello, beside the floor's.

    .venv/bin/python benchmarks/agent_dirty.py                 # 9 children of each kind
    .venv/bin/python benchmarks/agent_dirty.py --children 15 --out /tmp/x

A forked child shares its template's memory copy-on-write: every page it writes (a reference
count, an allocation, a first call's cache) becomes a private page of its own, a page fault, and
part of its PSS. This process becomes a template as dcop's does (``forked.prepare_template``:
the preloaded imports, the rehearsals of the solving path and of the links, the children's streams and log handler, the frozen heap)
and forks children that run an agent's start-up one step at a time, with dcop's own functions:
the child's descriptors and title (``forked.run_child``), its log handler (``run.agent_logging``),
the transport (``ZmqAgentTransport``: its context, ZAP handler, the DEALER to the coordinator and
its monitor; then ``open``: the ROUTER, which has none), the jobs' thread, the rehearsal,
``freeze_heap`` and the hello. After each step a child reads its own ``/proc/self/smaps_rollup``
(private dirty kB), its minor page faults and its CPU (all threads); a step of nothing but that
read is measured first and taken off every step. Then, from the same template, children that
run the floor's start-up (``agent_floor.py``: a context, a ROUTER, a DEALER, a msgpack hello).
Medians over the children. Writes benchmarks/results/agent_dirty.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scale import report_head  # noqa: E402

Step = tuple[str, Callable[[], None]]


def _state() -> tuple[int, int, float]:
    """This process's private dirty kB, minor faults so far and CPU seconds (all threads)."""
    with open("/proc/self/smaps_rollup") as rollup:
        text = rollup.read()
    dirty = next(
        int(line.split()[1]) for line in text.splitlines() if line.startswith("Private_Dirty:")
    )
    return dirty, resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()


def _child(steps: list[Step], out: int) -> None:
    """Run ``steps`` in order, measuring after each, and write the figures to ``out``."""
    rows: list[tuple[str, int, int, float]] = []
    last = _state()
    rows.append(("after the fork", last[0], 0, 0.0))
    for name, step in [("(a read of the figures alone)", lambda: None), *steps]:
        step()
        now = _state()
        rows.append((name, now[0] - last[0], now[1] - last[1], now[2] - last[2]))
        last = _state()  # the read itself is not the next step's
    os.write(out, json.dumps(rows).encode())


def _run(make_steps: Callable[[], list[Step]], children: int) -> list[dict[str, Any]]:
    """Fork ``children`` children running the steps; the medians per step."""
    runs: list[list[list[Any]]] = []
    for _ in range(children):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                _child(make_steps(), write)
            finally:
                os._exit(0)
        os.close(write)
        data = b""
        while chunk := os.read(read, 1 << 16):
            data += chunk
        os.close(read)
        os.waitpid(pid, 0)
        runs.append(json.loads(data))
    base_kb = statistics.median(r[1][1] for r in runs)
    base_faults = statistics.median(r[1][2] for r in runs)
    base_cpu = statistics.median(r[1][3] for r in runs)
    out = []
    for i, (name, *_rest) in enumerate(runs[0]):
        if i == 1:
            continue  # the read alone: taken off every step below
        first = i == 0
        out.append(
            {
                "step": name,
                "dirty_kb": statistics.median(r[i][1] for r in runs) - (0 if first else base_kb),
                "faults": statistics.median(r[i][2] for r in runs) - (0 if first else base_faults),
                "cpu_ms": 1000
                * (statistics.median(r[i][3] for r in runs) - (0 if first else base_cpu)),
            }
        )
    return out


def dcop_steps(coordinator: str, folder: str) -> Callable[[], list[Step]]:
    """An agent's start-up, as ``forked.run_child`` and ``run.run_agent`` run it."""

    def make() -> list[Step]:
        from dcop.agents import forked
        from dcop.agents.jobs import Worker
        from dcop.agents.pauses import freeze_heap
        from dcop.agents.rehearsal import rehearse_unless_inherited
        from dcop.agents.run import agent_logging
        from dcop.backends import get_backend
        from dcop.protocol import COORDINATOR_ID, Hello, encode
        from dcop.protocol.zmqlink import ZmqAgentTransport

        held: dict[str, Any] = {}
        ident = os.getpid() % 100000

        def descriptors() -> None:
            os.setsid()
            fd = os.open(f"{folder}/agent-{ident}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            streams = forked.child_streams()
            sys.stdout, sys.stderr = streams.stdout, streams.stderr
            forked.set_title(f"dcop-agent --id {ident}")

        def transport() -> None:
            held["t"] = ZmqAgentTransport(
                ident, "tcp://127.0.0.1:*", {}, coordinator, candidates=range(1000)
            )

        def hello() -> None:
            t = held["t"]
            t.send(
                COORDINATOR_ID,
                encode(ident, COORDINATOR_ID, Hello("x", os.getpid(), "h", t.endpoint)),
            )

        return [
            ("descriptors, streams, title", descriptors),
            ("log handler", lambda: agent_logging(ident, "WARNING")),
            ("transport: context, ZAP, DEALER + monitor", transport),
            ("transport open: ROUTER (no monitor)", lambda: held["t"].open()),
            ("jobs' thread", lambda: held.setdefault("w", Worker("dcop-jobs"))),
            # the template's is inherited: a forked NumPy agent skips its own
            ("rehearsal", lambda: rehearse_unless_inherited(get_backend("numpy")) and None),
            ("freeze_heap", freeze_heap),
            ("hello", hello),
        ]

    return make


def floor_steps(coordinator: str, folder: str) -> Callable[[], list[Step]]:
    """The floor agent's start-up (``agent_floor._floor_agent``), step by step."""

    def make() -> list[Step]:
        import msgpack
        import setproctitle
        import zmq

        held: dict[str, Any] = {}
        ident = os.getpid() % 100000

        def descriptors() -> None:
            os.setsid()
            fd = os.open(f"{folder}/floor-{ident}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            setproctitle.setproctitle(f"floor-agent --id {ident}")

        def sockets() -> None:
            ctx = held["ctx"] = zmq.Context()
            inbox = held["inbox"] = ctx.socket(zmq.ROUTER)
            inbox.bind("tcp://127.0.0.1:*")
            boss = held["boss"] = ctx.socket(zmq.DEALER)
            boss.setsockopt(zmq.IDENTITY, b"%d" % ident)
            boss.connect(coordinator)

        def hello() -> None:
            at = held["inbox"].getsockopt_string(zmq.LAST_ENDPOINT)
            held["boss"].send(msgpack.packb({"t": "hello", "at": at}))

        return [
            ("descriptors, title", descriptors),
            ("context, ROUTER, DEALER", sockets),
            ("hello", hello),
        ]

    return make


def measure(children: int) -> dict[str, Any]:
    import tempfile

    from dcop.agents.forked import prepare_template

    prepare_template()
    import msgpack  # noqa: F401  (the floor's, imported by its template too)
    import setproctitle  # noqa: F401
    import zmq

    ctx = zmq.Context()
    sink = ctx.socket(zmq.ROUTER)  # where the hellos go (never read: the children do not wait)
    sink.bind("tcp://127.0.0.1:*")
    coordinator = sink.getsockopt_string(zmq.LAST_ENDPOINT)
    import gc

    gc.collect()
    gc.freeze()
    with tempfile.TemporaryDirectory(prefix="dcop-dirty-") as folder:
        dcop = _run(dcop_steps(coordinator, folder), children)
        floor = _run(floor_steps(coordinator, folder), children)
    sink.close(0)
    ctx.term()
    return {"children": children, "dcop": dcop, "floor": floor}


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# What a forked agent writes after the fork, up to its hello",
        "",
        f"Command: `{report['command']}`  ",
        f"Machine: {report['machine']}; {report['date']}; load average at the start "
        f"{report['load']}.  ",
        f"Medians over {report['children']} children of one template per kind. Private dirty "
        "kB: pages of its own the step made (copies of the template's pages it wrote, and new "
        "ones); faults: minor page faults; CPU: all threads. `benchmarks/agent_dirty.py` says "
        "how.",
        "",
    ]
    for kind, title in (("dcop", "dcop's agent"), ("floor", "the floor's agent")):
        rows = report[kind]
        lines += [
            f"## {title}",
            "",
            "| step | private dirty kB | page faults | CPU ms |",
            "|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['step']} | {r['dirty_kb']:.0f} | {r['faults']:.0f} | {r['cpu_ms']:.2f} |"
            )
        total = rows[1:]
        lines += [
            f"| **steps after the fork** | **{sum(r['dirty_kb'] for r in total):.0f}** | "
            f"**{sum(r['faults'] for r in total):.0f}** | **{sum(r['cpu_ms'] for r in total):.2f}** |",
            "",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--children", type=int, default=9)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    report = {**report_head("agent_dirty.py"), **measure(args.children)}
    from keep import write_results

    write_results(args.out, "agent_dirty", report, markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
