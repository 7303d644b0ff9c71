"""How far dcop's forked agents are from the floor of their process model.

The floor: N processes forked from a template that has imported what dcop's template imports
(NumPy, ZeroMQ, dcop's agent modules), each with what the issue asks of every agent - its own log
file, its process title, its own ZeroMQ context, a ROUTER on a port the system picks, a DEALER to
the coordinator and one to each neighbour (a ring, four neighbours each, about the degree of the
random instances) - exchanging the message pattern of a DPOP run as msgpack maps: hello, setup
(three 400-byte tables), a degree to each neighbour, ready, start, a DFS token over every agent
and back (2(n-1) hops, as many as dcop's DFS), the tree, go, UTIL up a path of all n agents
(1000 float32, added to on the way), VALUE down it, result, stop, and ``os._exit``. No dcop logic:
no validation, no sizing, no candidate trees, no metrics, no monitors, no heartbeats.

Every message is of a size independent of n: the token carries its hop count (a DFS token of
dcop carries its path from the root, O(depth): at most 15 ids on the scale series' tree of 2000
agents), a VALUE the child's separator (on the path, its parent alone). Until issue 49 the
token carried every agent it had passed and each VALUE every value above it, O(n) bytes a hop
over 4n hops in sequence: from n = 1000 to 2000 the time per hop of those phases doubled (the
floor's wall grew 2.75x), where with messages of a fixed size it stayed within 15%.

Beside it, per n, ``dcop run FILE -q --json OUT`` and ``dcop solve FILE -q`` on the random
instance of that size from ``benchmarks/instances/distributed`` (seed 0): their wall
times, and from the run's result document each agent's CPU and page faults (the template's
kernel account) and the agents' lifetime, from the first one's start to the last one's exit
(``processes.total_s``).

    .venv/bin/python benchmarks/agent_floor.py                    # n = 10, 20, 30; 5 repeats
    .venv/bin/python benchmarks/agent_floor.py --sizes 30 --repeat 9
    .venv/bin/python benchmarks/agent_floor.py --floor-only --sizes 250,1000 --repeat 3

Every floor run also reads each agent's PSS and private pages while all are alive (after the
whole run; that read is left out of its wall), its launch (``hello_s``: the first fork to the last
hello, before any setup goes out) and its parent's CPU per agent (``parent_cpu_ms``: the forks
and the coordinator's side, the role of dcop's templates and coordinator). Writes benchmarks/results/agent_floor.json and agent_floor.md (``--floor-only``:
agent_floor_scale.*, the floor at any n, no dcop command). Medians over the repeats; the
floor runs in a fresh interpreter each time (``--one N``), alternating with the dcop commands.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

RESULTS = Path(__file__).resolve().parent / "results"
INSTANCES = RESULTS.parent / "instances" / "distributed"
DCOP = str(Path(sys.executable).with_name("dcop"))
#: neighbours on each side of an agent in the floor's ring
RING_SIDE = 2
UTIL_FLOATS = 1000


def _ring(agent: int, n: int) -> list[int]:
    return sorted({(agent + d) % n for d in range(-RING_SIDE, RING_SIDE + 1) if d} - {agent})


def _floor_agent(agent: int, n: int, coordinator: str, folder: str) -> NoReturn:
    """One floor agent's whole life (a forked child)."""
    import msgpack
    import numpy as np
    import setproctitle
    import zmq

    os.setsid()
    log = os.open(f"{folder}/agent-{agent}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    setproctitle.setproctitle(f"floor-agent --id {agent}")
    ctx = zmq.Context()
    inbox = ctx.socket(zmq.ROUTER)
    inbox.bind("tcp://127.0.0.1:*")
    boss = ctx.socket(zmq.DEALER)
    boss.setsockopt(zmq.IDENTITY, b"%d" % agent)
    boss.connect(coordinator)
    boss.send(msgpack.packb({"t": "hello", "at": inbox.getsockopt_string(zmq.LAST_ENDPOINT)}))
    setup = msgpack.unpackb(boss.recv())
    links: dict[int, Any] = {}
    for peer, endpoint in setup["neighbours"]:
        link = ctx.socket(zmq.DEALER)
        link.setsockopt(zmq.IDENTITY, b"%d" % agent)
        link.connect(endpoint)
        link.send(msgpack.packb({"t": "degree", "d": len(setup["neighbours"])}))
        links[peer] = link
    poller = zmq.Poller()
    poller.register(inbox, zmq.POLLIN)
    poller.register(boss, zmq.POLLIN)
    degrees = 0
    while True:
        ready = dict(poller.poll())
        if boss in ready:
            order = msgpack.unpackb(boss.recv())
            if order["t"] == "stop":
                break
            if order["t"] == "start" and agent == 0:
                links[1].send(msgpack.packb({"t": "token", "hops": 1}))
            if order["t"] == "go" and agent == n - 1:
                util = np.zeros(UTIL_FLOATS, np.float32)
                links[agent - 1].send(msgpack.packb({"t": "util", "u": util.tobytes()}))
        if inbox in ready:
            message = msgpack.unpackb(inbox.recv_multipart()[-1])
            kind = message["t"]
            if kind == "degree":
                degrees += 1
                if degrees == len(links):
                    boss.send(msgpack.packb({"t": "ready"}))
            elif kind == "token":
                if message["hops"] == 2 * (n - 1):
                    boss.send(msgpack.packb({"t": "tree", "depth": n - 1}))
                else:
                    message["hops"] += 1
                    onward = agent + 1 if message["hops"] <= n - 1 else agent - 1
                    links[onward].send(msgpack.packb(message))
            elif kind == "util":
                util = np.frombuffer(message["u"], np.float32) + 1
                if agent > 0:
                    links[agent - 1].send(msgpack.packb({"t": "util", "u": util.tobytes()}))
                else:
                    links[1].send(msgpack.packb({"t": "value", "v": [[0, int(util[0])]]}))
                    boss.send(msgpack.packb({"t": "result", "value": 0}))
            elif kind == "value":
                if agent < n - 1:  # the child's separator on the path: this agent alone
                    links[agent + 1].send(msgpack.packb({"t": "value", "v": [[agent, 1]]}))
                boss.send(msgpack.packb({"t": "result", "value": 1}))
    os._exit(0)


def measure_floor(n: int) -> dict[str, Any]:
    """One floor run of ``n`` agents from this interpreter (which becomes their template)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as dcop's template (dcop.blas)
    import msgpack
    import numpy as np
    import setproctitle  # noqa: F401  (dcop's template has it imported too)
    import zmq

    import dcop.agents.run  # the template's imports, as dcop's
    import dcop.protocol.zmqlink  # noqa: F401

    gc.collect()
    gc.freeze()
    folder = tempfile.mkdtemp(prefix="dcop-floor-")
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind("tcp://127.0.0.1:*")
    coordinator = router.getsockopt_string(zmq.LAST_ENDPOINT)
    tables = [np.zeros(100, np.float32).tobytes()] * 3
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    pids = []
    for agent in range(n):
        pid = os.fork()
        if pid == 0:
            _floor_agent(agent, n, coordinator, folder)
        pids.append(pid)
    endpoints: dict[int, str] = {}
    identities: dict[int, bytes] = {}
    while len(endpoints) < n:
        who, body = router.recv_multipart()
        endpoints[int(who)] = msgpack.unpackb(body)["at"]
        identities[int(who)] = who
    hello_s = time.perf_counter() - started  # the launch: the first fork to the last hello

    def tell_all(message: dict[str, Any]) -> None:
        for agent in range(n):
            router.send_multipart([identities[agent], msgpack.packb(message)])

    def wait_for(kind: str, count: int) -> None:
        while count:
            count -= msgpack.unpackb(router.recv_multipart()[1])["t"] == kind

    for agent in range(n):
        neighbours = [[peer, endpoints[peer]] for peer in _ring(agent, n)]
        setup = {"t": "setup", "neighbours": neighbours, "tables": tables}
        router.send_multipart([identities[agent], msgpack.packb(setup)])
    wait_for("ready", n)
    tell_all({"t": "start", "algo": "dpop"})
    wait_for("tree", 1)
    tell_all({"t": "go", "tree": 0})
    wait_for("result", n)
    sampling, sampling_at = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    memory = _memory(pids)  # every agent alive, its whole run done
    sampled = resource.getrusage(resource.RUSAGE_SELF)
    sampling_s = sampled.ru_utime - sampling.ru_utime + sampled.ru_stime - sampling.ru_stime
    sampling_wall = time.perf_counter() - sampling_at  # left out of the wall: dcop has none
    tell_all({"t": "stop"})
    for _ in range(n):
        os.wait()
    wall = time.perf_counter() - started - sampling_wall
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = used.ru_utime - before.ru_utime + used.ru_stime - before.ru_stime
    faults = used.ru_minflt - before.ru_minflt + used.ru_majflt - before.ru_majflt
    own = resource.getrusage(resource.RUSAGE_SELF)
    parent = own.ru_utime - own_before.ru_utime + own.ru_stime - own_before.ru_stime - sampling_s
    shutil.rmtree(folder)
    return {
        "wall_s": wall,
        "hello_s": hello_s,
        "agent_cpu_ms": cpu * 1000 / n,
        # the template's and coordinator's side (one process here): forks, setups, the reads
        "parent_cpu_ms": parent * 1000 / n,
        "agent_faults": faults / n,
        **memory,
    }


def _memory(pids: list[int]) -> dict[str, Any]:
    """The agents' summed PSS and their mean PSS and private dirty pages (MB), from
    ``/proc/PID/smaps_rollup`` (``agent_memory.rollup``, as dcop's agents are measured)."""
    from agent_memory import breakdown, rollup

    # one agent's private pages by mapping (the middle one: no end of the chain)
    by_mapping = breakdown(pids[len(pids) // 2])
    rolls = [r for r in map(rollup, pids) if r is not None]
    pss = sum(r["Pss"] for r in rolls) / 1024
    private = sum(r["Private_Dirty"] for r in rolls) / 1024
    return {
        "summed_pss_mb": pss,
        "agent_pss_mb": pss / len(rolls),
        "agent_private_mb": private / len(rolls),
        "one_agent_private_kb": dict(list(by_mapping.items())[:8]),
    }


def _timed(argv: list[str]) -> float:
    """The command's wall time (``distributed.timed_command``); a failed command ends the bench."""
    from distributed import timed_command

    timed = timed_command(argv, timeout=120.0)
    if timed["exit"] != 0:
        raise SystemExit(f"{' '.join(argv[1:3])}: {timed.get('error')}")
    return float(timed["wall_s"])


def measure_dcop(file: Path, out: Path) -> dict[str, float]:
    """``dcop run`` and ``dcop solve`` on ``file``: walls, and the run's per-agent account."""
    run_wall = _timed([DCOP, "run", str(file), "-q", "--json", str(out)])
    doc = json.loads(out.read_text())
    if doc["status"] != "ok":
        raise SystemExit(f"dcop run {file.name}: {doc['status']}: {doc.get('message')}")
    used = doc["processes"]
    cpu = list(used["agent_cpu_s"].values())
    faults = list(used["agent_page_faults"].values())
    solve_wall = _timed([DCOP, "solve", str(file), "-q", "--json", str(out)])
    return {
        "run_wall_s": run_wall,
        "solve_wall_s": solve_wall,
        # from the first agent's start to the last one's exit
        "agent_phase_s": used["total_s"],
        "agent_cpu_ms": 1000 * sum(cpu) / len(cpu),
        "agent_faults": sum(faults) / len(faults),
        "template_cpu_ms": 1000 * float(used["template_cpu_s"]),
    }


def _median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median; a breakdown (a dict) from the run of the median summed PSS."""
    middle = sorted(rows, key=lambda row: row.get("summed_pss_mb", 0.0))[len(rows) // 2]
    return {
        key: middle[key]
        if isinstance(middle[key], dict)
        else statistics.median(r[key] for r in rows)
        for key in rows[0]
    }


def floor_once(n: int) -> dict[str, Any]:
    """One floor run of ``n`` agents in a fresh interpreter (``--one``)."""
    one = [sys.executable, __file__, "--one", str(n)]
    done = subprocess.run(one, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def measure(sizes: list[int], repeat: int, floor_only: bool = False) -> list[dict[str, Any]]:
    """Per n, the floor's medians, and (unless ``floor_only``) dcop's on the random instance of
    that size, alternating with the floor's runs."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="dcop-floor-bench-") as tmp:
        out = Path(tmp) / "run.json"
        for n in sizes:
            file = INSTANCES / f"random_n{n}_d3_s0.yaml"
            floors, dcops = [], []
            for _ in range(repeat):
                floors.append(floor_once(n))
                if not floor_only:
                    dcops.append(measure_dcop(file, out))
            row: dict[str, Any] = {"n": n, "floor": _median(floors)}
            if dcops:
                row.update(instance=file.name, dcop=_median(dcops))
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def ratio_at_floor(dcop: dict[str, float], floor: dict[str, float]) -> float:
    """``dcop run`` / ``dcop solve`` had the run's agent phase cost what the floor's does."""
    return (dcop["run_wall_s"] - dcop["agent_phase_s"] + floor["wall_s"]) / dcop["solve_wall_s"]


def markdown(report: dict[str, Any]) -> str:
    from compare.machine import describe

    meta = report["meta"]
    compared = [row for row in report["rows"] if "dcop" in row]
    lines = [
        "# dcop's forked agents beside the floor of their process model"
        if compared
        else "# The floor of dcop's process model: forked agents that do nothing else",
        "",
        f"- Machine: {describe(meta['machine'])}",
        f"- Command: `{meta['command']}`; medians of {meta['repeat']} repeats",
        f"- Written: {meta['date']}",
        "",
        "The floor is N forked processes with a log file, a process title, a ZeroMQ context, a "
        "ROUTER, a DEALER to the coordinator and one per neighbour (four), exchanging DPOP's "
        "message pattern as msgpack maps and nothing else (`benchmarks/agent_floor.py` says "
        "exactly what). The agent phase is, for the floor, its first fork to its last exit; for "
        "dcop, the run's `processes.total_s` (from its first agent's start to its last agent's "
        "exit). *At the floor* is an estimate: `dcop run`'s "
        "wall with its agent phase replaced by the floor's, over `dcop solve`'s.",
        "",
    ]
    if compared:
        lines += [
            "| n | dcop solve (s) | dcop run (s) | run / solve | CPU per agent, dcop / floor (ms) "
            "| page faults per agent, dcop / floor | agent phase, dcop / floor (s) "
            "| run / solve at the floor (estimate) |",
            "|---|---|---|---|---|---|---|---|",
        ]
    for row in compared:
        d, f = row["dcop"], row["floor"]
        lines.append(
            f"| {row['n']} | {d['solve_wall_s']:.3f} | {d['run_wall_s']:.3f} "
            f"| {d['run_wall_s'] / d['solve_wall_s']:.2f}x "
            f"| {d['agent_cpu_ms']:.1f} / {f['agent_cpu_ms']:.1f} "
            f"| {d['agent_faults']:.0f} / {f['agent_faults']:.0f} "
            f"| {d['agent_phase_s']:.3f} / {f['wall_s']:.3f} "
            f"| {ratio_at_floor(d, f):.2f}x |"
        )
    lines += [
        "",
        "The floor's own memory, sampled (`/proc/PID/smaps_rollup`, as `agent_memory.py` reads "
        "dcop's agents) with every agent alive after its whole run:",
        "",
        "| n | floor wall (s) | CPU per agent (ms) | page faults per agent | PSS per agent (MB) "
        "| private dirty per agent (MB) | summed PSS (MB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        f = row["floor"]
        lines.append(
            f"| {row['n']} | {f['wall_s']:.2f} | {f['agent_cpu_ms']:.1f} "
            f"| {f['agent_faults']:.0f} | {f.get('agent_pss_mb', math.nan):.2f} "
            f"| {f.get('agent_private_mb', math.nan):.2f} | {f.get('summed_pss_mb', math.nan):.0f} |"
        )
    for row in report["rows"]:
        mappings = row["floor"].get("one_agent_private_kb")
        if mappings:
            lines += ["", f"One agent of the n = {row['n']} run, private dirty kB by mapping "
                      "(anonymous ones by size: Python's 1 MiB object arenas, thread stacks of "
                      "8 MiB; [heap] is malloc's):", "", "| mapping | kB |", "|---|---|"]  # fmt: skip
            lines += [f"| {name} | {kb} |" for name, kb in mappings.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,20,30")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--floor-only",
        action="store_true",
        help="the floor alone (any n; no dcop run), into agent_floor_scale.{json,md}",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one floor run, as JSON
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure_floor(args.one)))
        return
    sys.path.insert(0, str(RESULTS.parent))
    from compare.machine import machine_info

    sizes = [int(s) for s in args.sizes.split(",")]
    rows = measure(sizes, args.repeat, args.floor_only)
    report = {
        "meta": {
            "machine": machine_info(),
            "command": "python benchmarks/agent_floor.py " + " ".join(sys.argv[1:]),
            "repeat": args.repeat,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
        "rows": rows,
    }
    from keep import write_results

    name = "agent_floor_scale" if args.floor_only else "agent_floor"
    write_results(RESULTS, name, report, markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
