"""The scale series: ``dcop run`` at 100 to 2000 agents, wall time and summed memory against n,
each row beside the floor of the process model at the same n.

    .venv/bin/python benchmarks/scale.py                         # the whole series (long)
    .venv/bin/python benchmarks/scale.py --series tiny           # a few seconds: 10-20 agents
    .venv/bin/python benchmarks/scale.py --only tree:1000        # one row
    .venv/bin/python benchmarks/scale.py --frodo DIR             # FRODO's DPOP beside each row

Rows: trees (``dcop generate scalefree --links 1``) at n = 250, 500, 1000, 2000; scale-free
``--links 2`` at 100-250; grids at 100, 144, 196 (d and p2 as ``dcop generate``'s defaults
unless given). After each row's ``dcop run``, ``benchmarks/agent_floor.py`` runs its floor at the
same n (``--no-floor``: not), and the row gives dcop's wall, agents' launch and summed PSS over
the floor's. Each row writes the instance, then times ``dcop run FILE --algo dpop -q --json
OUT`` as a subprocess (a user's wall clock: interpreter, launch and exit included) while a sampler
counts the run's agents every ``--sample-s`` seconds and sums the PSS of its processes (the agents
alone, and every process of the run) as soon as all n agents are alive (:class:`PssSampler`); a
few agents' mappings are read then too, by kind (what an agent holds). ``dcop solve FILE`` of the
same file is timed beside it.
With ``--frodo DIR`` (FRODO built as benchmarks/compare describes), FRODO's stock DPOP agent runs
the same instance (as XCSP) in the same run, with its message counting off (timed) and on.

Every row must end ``ok`` (or ``infeasible``: a proof), or ``too_large`` naming the ADPOP z that
fits; anything else (an error, a timeout) is marked. Writes benchmarks/results/scale.json,
scale.md and scale.png (wall time and summed PSS against n, one line per family; ``--name STEM``:
STEM.json, .md and .png).
"""

from __future__ import annotations

import abc
import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, Self

from dcop.generators import grid_network, scale_free_network
from dcop.io import write_problem
from dcop.model import Problem

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))
from compare.machine import machine_info  # noqa: E402
from distributed import timed_command  # noqa: E402
from keep import _public  # noqa: E402

DCOP = str(Path(sys.executable).with_name("dcop"))

#: family -> how its instance is made from (n, d, p2, seed)
FAMILIES: dict[str, Callable[[int, int, float, int], Problem]] = {
    "tree": lambda n, d, p2, seed: scale_free_network(n, d, p2, seed, m=1),
    "links2": lambda n, d, p2, seed: scale_free_network(n, d, p2, seed, m=2),
    "grid": lambda n, d, p2, seed: grid_network(n, d, p2, seed),
}
SERIES: dict[str, list[tuple[str, int]]] = {
    "full": [
        *(("tree", n) for n in (250, 500, 1000, 2000)),
        *(("links2", n) for n in (100, 150, 200, 250)),
        *(("grid", n) for n in (100, 144, 196)),
    ],
    "tiny": [("tree", 10), ("tree", 20), ("links2", 10), ("grid", 9)],
}
#: A PSS sample waits at least this many times what it took: at most a fifth of one core (at
#: twice, a third of one, a sixth of the 2-core machine, taken from the run it measures).
SAMPLER_PAUSE = 4
#: Past this share of the agents asked for, the sampler only counts them until all are alive.
NEARLY = 0.7
#: statuses that end a row as it should
GOOD = ("ok", "infeasible")


# ---- memory -------------------------------------------------------------------------------------
def descendants(root: int, leaves: AbstractSet[int] = frozenset()) -> list[int]:
    """Every live process below ``root``: from each task's ``children`` file where the kernel has
    them (a read per process of the tree, not of the machine: the sampler polls the tree's agents
    every few tenths of a second), else from every process's parent in /proc. ``leaves``:
    processes known to start none (agents), whose children are not read."""
    try:
        return _descendants_by_children(root, leaves)
    except OSError:
        return _descendants_by_parent(root)


def _children_of(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:  # gone meanwhile: it has no children left
        return out
    for task in tasks:
        try:
            out += map(int, Path(f"/proc/{pid}/task/{task}/children").read_bytes().split())
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return out


def _descendants_by_children(root: int, leaves: AbstractSet[int]) -> list[int]:
    if not Path(f"/proc/self/task/{threading.get_native_id()}/children").exists():
        raise OSError("no /proc/PID/task/TID/children here")
    out: list[int] = []
    stack = [root]
    while stack:
        for c in _children_of(stack.pop()):
            out.append(c)
            if c not in leaves:  # reading 1000 agents' task lists took most of a poll
                stack.append(c)
    return out


def _descendants_by_parent(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    stack = [root]
    while stack:
        for c in children.get(stack.pop(), []):
            out.append(c)
            stack.append(c)
    return out


def pss_kb(pid: int) -> int:
    """A process's proportional set size (kB; 0 once it has gone)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    m = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) if m else 0


#: Agents whose mappings are read (``/proc/PID/smaps``) while all n are alive, for the breakdown
#: of what an agent holds at the end of its run; and how often that read is repeated (each read
#: replaces the last: the last one before the first agent exits stands).
BREAKDOWN_AGENTS = 8
BREAKDOWN_EVERY_S = 1.0
#: The kinds of mapping an agent's private pages are counted by (see :func:`mapping_kind`).
KINDS = (
    "anonymous (Python objects, buffers)",
    "malloc heap (brk)",
    "libpython",
    "other libraries",
    "thread stacks",
    "main stack",
    "other",
)
#: glibc's default thread stack: an anonymous mapping of exactly this size (kB)
THREAD_STACK_KB = 8192


def mapping_kind(name: str, size_kb: int) -> str:
    """Which of :data:`KINDS` a mapping of ``/proc/PID/smaps`` is (its path or pseudo-name)."""
    if name == "[heap]":
        return KINDS[1]
    if name == "[stack]":
        return KINDS[5]
    if not name:
        return KINDS[4] if size_kb == THREAD_STACK_KB else KINDS[0]
    if "libpython" in name:
        return KINDS[2]
    if ".so" in name:
        return KINDS[3]
    return KINDS[6]


def smaps_by_kind(pid: int) -> dict[str, dict[str, int]] | None:
    """A process's private dirty and PSS kB per kind of mapping; None once it has gone."""
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return None
    out = {k: {"private_dirty_kb": 0, "pss_kb": 0} for k in KINDS}
    kind = KINDS[6]
    for line in text.splitlines():
        head = _MAPPING.match(line)
        if head:
            size = (int(head[2], 16) - int(head[1], 16)) // 1024
            kind = mapping_kind(head[3].strip(), size)
        elif line.startswith("Private_Dirty:"):
            out[kind]["private_dirty_kb"] += int(line.split()[1])
        elif line.startswith("Pss:"):
            out[kind]["pss_kb"] += int(line.split()[1])
    return out


_MAPPING = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+(.*)$")


def is_agent(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"dcop-agent --id")
    except OSError:
        return False


class Sampling(abc.ABC):
    """A daemon thread that runs :meth:`_run` for the length of a ``with`` block; ``_run`` loops
    until ``_stop`` is set (the benches' process samplers)."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @abc.abstractmethod
    def _run(self) -> None: ...


class PssSampler(Sampling):
    """Sums the PSS of a process tree and keeps the peaks (agents alone, and the whole run:
    command, template and agents).

    A sample reads every agent's page tables (smaps_rollup): at n = 1000 that is a second or so
    of one core, and it waits at least SAMPLER_PAUSE times its own cost before the next, so
    that the run it measures keeps most of the machine. Waiting blindly, the samples of a 1000-
    agent run fell in its launch (544 of 1000 agents alive at the peak). So between samples it
    only counts the tree's agents (cheap: ``every_s``), and samples at once when the count first
    reaches ``expect``: the agents' peak is the largest sample with all ``expect`` alive
    (``peak_agents``: how many answered it), else the largest of any."""

    def __init__(self, root: int, every_s: float, expect: int | None = None) -> None:
        super().__init__("pss-sampler")
        self.root, self.every_s, self.expect = root, every_s, expect
        self.peak_agents_kb = 0
        self.peak_all_kb = 0
        #: agents alive at the sample of peak_agents_kb (those whose PSS could be read)
        self.peak_agents = 0
        #: whether peak_agents_kb was begun with every expected agent alive
        self.peak_complete = False
        #: samples taken, and those with every expected agent alive
        self.samples = 0
        self.complete_samples = 0
        #: the sampler's own CPU seconds (the reads of /proc it made)
        self.cpu_s = 0.0
        self._known: set[int] = set()
        #: per kind of mapping, the mean kB of BREAKDOWN_AGENTS agents read with all alive, at
        #: the last such read (see breakdown_of); and how many agents that read covered
        self.breakdown: dict[str, dict[str, float]] = {}
        self.breakdown_agents = 0
        self._breakdown_at = -float("inf")

    def _agents(self, pids: list[int]) -> list[int]:
        # an agent stays one (its title is set once, after its fork): only new pids are read
        fresh = [p for p in pids if p not in self._known and is_agent(p)]
        self._known.update(fresh)
        return [p for p in pids if p in self._known]

    def sample(self, agents: list[int], others: list[int]) -> None:
        """Sum the PSS of ``agents`` and ``others`` now, and keep it if it is a peak: a sample
        begun with every expected agent listed beats any other (its agents read one by one,
        seconds at n = 1000: those that exit meanwhile are not counted in ``peak_agents``)."""
        complete = self.expect is not None and len(agents) >= self.expect
        read = [pss_kb(p) for p in agents]
        alive = sum(1 for kb in read if kb > 0)
        agents_kb = sum(read)
        all_kb = agents_kb + sum(pss_kb(p) for p in others)
        self.samples += 1
        self.complete_samples += complete
        # a sample with every agent alive beats any without; among equals, the larger
        if (complete, agents_kb) > (self.peak_complete, self.peak_agents_kb):
            self.peak_agents_kb, self.peak_agents = agents_kb, alive
            self.peak_complete = complete
        self.peak_all_kb = max(self.peak_all_kb, all_kb)

    def read_breakdown(self, agents: list[int]) -> None:
        """Read BREAKDOWN_AGENTS of ``agents`` (spread over their pids) by kind of mapping; kept
        only where every one of them answered."""
        ordered = sorted(agents)
        step = max(1, len(ordered) // BREAKDOWN_AGENTS)
        reads = [smaps_by_kind(p) for p in ordered[::step][:BREAKDOWN_AGENTS]]
        if not reads or any(r is None for r in reads):
            return
        got = [r for r in reads if r is not None]
        self.breakdown = {
            k: {f: sum(r[k][f] for r in got) / len(got) for f in ("private_dirty_kb", "pss_kb")}
            for k in KINDS
        }
        self.breakdown_agents = len(got)

    def _run(self) -> None:
        next_sample = 0.0
        while not self._stop.is_set():
            began = time.thread_time()
            pids = [self.root, *descendants(self.root, self._known)]
            agents = self._agents(pids)
            complete = self.expect is not None and len(agents) >= self.expect
            first_complete = complete and self.complete_samples == 0
            # the last agents' launch is left alone: a sample then (seconds at n = 1000) would
            # still be reading when the window with all of them alive opens, and miss it
            nearly = self.expect is not None and len(agents) >= NEARLY * self.expect
            sampled = first_complete or (time.monotonic() >= next_sample and not nearly)
            if complete and time.monotonic() >= self._breakdown_at + BREAKDOWN_EVERY_S:
                self._breakdown_at = time.monotonic()
                self.read_breakdown(agents)  # a few agents first: done before the first exit
            if sampled:
                self.sample(agents, [p for p in pids if p not in self._known])
            spent = time.thread_time() - began
            self.cpu_s += spent
            if sampled:
                next_sample = time.monotonic() + max(self.every_s, SAMPLER_PAUSE * spent)
            self._stop.wait(self.every_s)


def agents_pss(sampler: PssSampler) -> dict[str, Any]:
    """The run's summed PSS of its agents: the peak sample where it read all n alive; else, where
    the run ended during that read (the window with every agent alive is under a second up to
    n = 500, a read of every agent seconds), the PSS of the agents of the breakdown, read first
    with all n alive, times n: an agent read late, with most others gone, had the template's
    pages shared among few, and counted several times its PSS. ``pss_source``: which."""
    expect = sampler.expect
    out: dict[str, Any] = {
        "pss_agents_mb": sampler.peak_agents_kb / 1024,
        "agents_sampled": sampler.peak_agents,
        "pss_all_alive": sampler.peak_complete,
        "pss_source": "sum" if sampler.peak_complete else "partial",
    }
    if expect is not None and sampler.peak_complete and sampler.peak_agents < expect:
        if sampler.breakdown:
            per_agent = sum(kind["pss_kb"] for kind in sampler.breakdown.values())
            out["pss_agents_mb"] = per_agent * expect / 1024
            out["agents_sampled"] = sampler.breakdown_agents
            out["pss_source"] = "breakdown"
        else:
            out["pss_all_alive"] = False
            out["pss_source"] = "partial"
    return out


def timed_with_memory(
    argv: list[str], timeout: float, every_s: float, expect: int | None = None
) -> dict[str, Any]:
    """:func:`timed_command`, with the peak summed PSS of the command's process tree (taken with
    all ``expect`` agents alive where a sample caught them: :class:`PssSampler`)."""
    import subprocess

    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with PssSampler(proc.pid, every_s, expect) as sampler:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            code: int | None = None
        else:
            code = proc.returncode
    out: dict[str, Any] = {
        "wall_s": time.perf_counter() - t0,
        "exit": code,
        **agents_pss(sampler),
        "pss_all_mb": sampler.peak_all_kb / 1024,
        "pss_samples": sampler.samples,
        "agent_breakdown_kb": sampler.breakdown,
        "breakdown_agents": sampler.breakdown_agents,
        "sampler_cpu_s": round(sampler.cpu_s, 3),
    }
    if code != 0:
        out["error"] = (err.strip().splitlines() or [f"exit {code}"])[-1][:300]
    return out


# ---- one row ------------------------------------------------------------------------------------
def _doc(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    path.unlink()
    out: dict[str, Any] = {"status": doc.get("status"), "cost": doc.get("cost")}
    if doc.get("message"):
        out["message"] = doc["message"][:300]
    times = doc.get("times") or {}
    out.update({f"times_{k}": v for k, v in times.items()})
    processes = doc.get("processes") or {}
    hellos = processes.get("hello_s") or {}
    out["launch_ms_per_agent"] = 1000 * hellos["per_agent"] if hellos else None
    # the agents' launch alone (first fork asked for to last hello): what the floor times
    out["agents_launch_s"] = hellos.get("agents")
    cpu = processes.get("agent_cpu_s") or {}
    if cpu:
        out["agent_cpu_ms"] = 1000 * sum(cpu.values()) / len(cpu)
        out["template_cpu_ms"] = 1000 * (processes.get("template_cpu_s") or 0.0) / len(cpu)
        out["coordinator_cpu_ms"] = 1000 * processes.get("coordinator_cpu_s", 0.0) / len(cpu)
    m = doc.get("metrics") or {}
    if m.get("messages"):
        msgs, nbytes = m["messages"], m["bytes"]
        out.update(
            messages=m.get("total_messages"),
            heartbeat_share=msgs.get("heartbeat", 0) / max(1, m.get("total_messages") or 1),
            token_bytes=nbytes.get("token", 0),
            util_bytes=nbytes.get("util", 0),
        )
    return out


def row_ends_well(row: dict[str, Any]) -> bool:
    """``ok``/``infeasible``, or ``too_large`` naming the ADPOP z that fits."""
    status = row.get("run", {}).get("status")
    if status in GOOD:
        return True
    return status == "too_large" and "--algo adpop --z" in row["run"].get("message", "")


def one_row(
    family: str, n: int, args: argparse.Namespace, folder: Path, frodo: Any = None
) -> dict[str, Any]:
    problem = FAMILIES[family](n, args.d, args.p2, args.seed)
    file = folder / f"{family}_n{n}.wcsp"
    write_problem(problem, file)
    out = folder / "result.json"
    run_argv = [DCOP, "run", str(file), "--algo", "dpop", "-q", "--json", str(out)]
    run_argv += ["--timeout", str(args.timeout)]
    run = timed_with_memory(run_argv, args.timeout + 30, args.sample_s, n) | _doc(out)
    solve = timed_command([DCOP, "solve", str(file), "-q", "--json", str(out)], args.timeout)
    solve |= _doc(out)
    row: dict[str, Any] = {"family": family, "n": n, "run": run, "solve": solve}
    if run.get("wall_s") and solve.get("wall_s") and solve.get("status") in GOOD:
        row["run_over_solve"] = run["wall_s"] / solve["wall_s"]
    if args.floor:
        row["floor"] = floor_row(n)
        row.update(floor_ratios(run, row["floor"]))
    if frodo is not None:
        xml = folder / f"{family}_n{n}.xml"
        write_problem(problem, xml)
        row["frodo"] = frodo(xml)
    row["ends_well"] = row_ends_well(row)
    return row


def floor_row(n: int) -> dict[str, Any]:
    """The floor bench at ``n`` agents, in a fresh interpreter, right after the row's dcop run
    (``agent_floor.floor_once``): its wall, its fork-and-hello time, CPU and PSS per agent."""
    from agent_floor import floor_once

    floor = floor_once(n)
    keep = ("wall_s", "hello_s", "agent_cpu_ms", "parent_cpu_ms", "summed_pss_mb", "agent_pss_mb")
    return {k: floor.get(k) for k in keep}


def floor_ratios(run: dict[str, Any], floor: dict[str, Any]) -> dict[str, float]:
    """dcop over the floor at the same n: the whole run's wall over the floor's whole run, the
    agents' launch over the floor's forks and hellos, the peak summed PSS over the floor's."""
    out: dict[str, float] = {}
    pairs = (
        ("wall_over_floor", run.get("wall_s"), floor.get("wall_s")),
        ("launch_over_floor", run.get("agents_launch_s"), floor.get("hello_s")),
        ("pss_over_floor", run.get("pss_agents_mb"), floor.get("summed_pss_mb")),
    )
    for key, mine, theirs in pairs:
        if mine and theirs:
            out[key] = mine / theirs
    return out


def frodo_runner(frodo_dir: Path, timeout: float, folder: Path) -> Callable[[Path], Any]:
    """FRODO's DPOP on an XCSP file: counting off (timed) and on (benchmarks/compare)."""
    from compare.context import Context
    from compare.external import run_frodo_twice

    ctx = Context(out_dir=folder, frodo=frodo_dir, time_limit=timeout, work_dir=folder)

    def run(xml: Path) -> Any:
        res = run_frodo_twice(ctx, xml)
        keep = ("status", "wall_s", "max_rss_mb", "cost", "messages", "bytes", "stats_run")
        return {k: res.get(k) for k in keep}

    return run


def frodo_version(frodo_dir: Path) -> str:
    """``FRODO 2.18.1`` from the build's BUILD_INFO.txt (the first word), else ``FRODO``."""
    try:
        words = (frodo_dir / "BUILD_INFO.txt").read_text().split()
    except OSError:
        return "FRODO"
    return f"FRODO {words[0]}" if words else "FRODO"


# ---- report -------------------------------------------------------------------------------------
def _f(x: Any, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def breakdown_table(rows: list[dict[str, Any]]) -> list[str]:
    """What one agent holds at the end of its run, by kind of mapping (the rows that have it)."""
    have = [r for r in rows if r["run"].get("agent_breakdown_kb")]
    if not have:
        return []
    lines = [
        "",
        f"What an agent holds once all n are up: private dirty kB (PSS kB) per kind of "
        f"mapping, the mean of {BREAKDOWN_AGENTS} agents spread over the run's pids, read from "
        f"`/proc/PID/smaps` as soon as all n are alive, then every {BREAKDOWN_EVERY_S:g} s until "
        "the first exit (the last complete read stands). Anonymous: CPython's object arenas, NumPy's and msgspec's "
        "buffers and the thread arenas of glibc; thread stacks: the 8 MiB mappings of "
        "ZeroMQ's I/O and reaper threads and the jobs' thread.",
        "",
        "| family | n | " + " | ".join(KINDS) + " | all |",
        "|---" * (len(KINDS) + 3) + "|",
    ]
    for r in have:
        b = r["run"]["agent_breakdown_kb"]
        cells = [f"{b[k]['private_dirty_kb']:.0f} ({b[k]['pss_kb']:.0f})" for k in KINDS]
        dirty = sum(b[k]["private_dirty_kb"] for k in KINDS)
        pss = sum(b[k]["pss_kb"] for k in KINDS)
        lines.append(
            f"| {r['family']} | {r['n']} | " + " | ".join(cells) + f" | {dirty:.0f} ({pss:.0f}) |"
        )
    return lines


def markdown(report: dict[str, Any]) -> str:
    rows = report["rows"]
    with_frodo = any(r.get("frodo") for r in rows)
    lines = [
        "# The scale series: `dcop run` from 100 to 2000 agents, beside the floor",
        "",
        f"Command: `{report['command']}`  ",
        f"Machine: {report['machine']}; {report['date']}.  ",
        f"Load average at the start: {report['load_start']}, at the end: {report['load_end']}.  ",
        f"Instances: d = {report['d']}, p2 = {report['p2']}, seed {report['seed']}; tree = "
        "`dcop generate scalefree --links 1`, links2 = `--links 2`, grid = `dcop generate grid`.",
        "",
        "run s = wall clock of `dcop run FILE --algo dpop` (interpreter, launch and exit "
        "included); floor = `benchmarks/agent_floor.py` at the same n, run right after the row's "
        "`dcop run` (forked agents that only open their sockets and pass DPOP's message pattern; "
        "its wall is its first fork to its last exit). launch s = from the first agent asked for "
        "to the last hello (dcop's `processes.hello_s.agents`; the floor's first fork to its "
        "last hello), per agent: over n. CPU ms/agent = each agent's CPU (all threads, the "
        "kernel's account at its exit), and after the + the template's and coordinator's share "
        "(the floor's one parent process). PSS = peak summed proportional set size of the "
        "agents: the run's agents are counted every "
        f"{report['sample_s']:g} s, and their PSS summed (`smaps_rollup`, one agent after "
        "another) as soon as all n are alive; before that, every "
        f"{SAMPLER_PAUSE} times a sample's own cost until {NEARLY:.0%} of them are up; the peak "
        "is the largest sample begun with all n alive (in brackets: the agents it read); where "
        f"the run ended during that read, the PSS of the {BREAKDOWN_AGENTS} agents of the "
        "breakdown below, read first, times n (in brackets: `8 x n`); * where no sample read "
        "all n alive (the agents read); the floor's, "
        "read once with every agent alive after its run. solve s = `dcop solve FILE`. msgs = "
        "messages of the run; heartbeats = "
        "their share.",
        "",
    ]
    if with_frodo:
        lines += [
            f"FRODO = {report.get('frodo_version') or 'FRODO'}'s stock DPOP agent on the same "
            "instance as XCSP, in the same run: its wall clock with message counting off, then "
            "on (a second run, only where the first finished; its status in brackets where "
            f"not ok: its time limit was {report.get('frodo_timeout_s', '-')} s); run / FRODO = "
            "`dcop run`'s wall over FRODO's with counting off; RSS = FRODO's peak (its one JVM).",
            "",
        ]
    head = (
        "| family | n | status | run s | floor s | run / floor | launch s, dcop / floor | "
        "launch / floor | launch ms/agent, dcop / floor | CPU ms/agent, dcop / floor | "
        "solve s | run / solve | agents' PSS MB (alive) | floor PSS MB | PSS / floor | "
        "PSS MB/agent, dcop / floor | msgs | heartbeats |"
    )
    if with_frodo:
        head += " FRODO s (counting off / on) | run / FRODO (off) | FRODO RSS MB |"
    lines += [head, "|---" * head.count(" |") + "|"]
    for r in rows:
        run, solve, fr = r["run"], r["solve"], r.get("frodo") or {}
        floor = r.get("floor") or {}
        status = run.get("status") or f"exit {run.get('exit')}"
        if not r["ends_well"]:
            status += " (!)"
        sampled = run.get("agents_sampled")
        source = run.get("pss_source", "sum" if run.get("pss_all_alive", True) else "partial")
        counted = r["n"] if source in ("sum", "breakdown") else sampled
        read = (
            f"({sampled} x n)"
            if source == "breakdown"
            else f"({sampled or '-'}{'*' if source == 'partial' else ''})"
        )
        per_agent = run["pss_agents_mb"] / counted if counted and run.get("pss_agents_mb") else None
        n = r["n"]
        launch = run.get("agents_launch_s")
        floor_launch = floor.get("hello_s")
        dcop_cpu = (
            f"{_f(run.get('agent_cpu_ms'), '.1f')} + "
            f"{_f((run.get('template_cpu_ms') or 0) + (run.get('coordinator_cpu_ms') or 0), '.1f')}"
            if run.get("agent_cpu_ms") is not None
            else "-"
        )
        floor_cpu = (
            f"{_f(floor.get('agent_cpu_ms'), '.1f')} + {_f(floor.get('parent_cpu_ms'), '.1f')}"
            if floor
            else "-"
        )
        line = (
            f"| {r['family']} | {n} | {status} | {_f(run.get('wall_s'))} | "
            f"{_f(floor.get('wall_s'))} | {_f(r.get('wall_over_floor'))} | "
            f"{_f(launch)} / {_f(floor_launch)} | {_f(r.get('launch_over_floor'))} | "
            f"{_f(1000 * launch / n if launch else None, '.1f')} / "
            f"{_f(1000 * floor_launch / n if floor_launch else None, '.1f')} | "
            f"{dcop_cpu} / {floor_cpu} | "
            f"{_f(solve.get('wall_s'))} | {_f(r.get('run_over_solve'), '.1f')} | "
            f"{_f(run.get('pss_agents_mb'), '.0f')} {read} | "
            f"{_f(floor.get('summed_pss_mb'), '.0f')} | {_f(r.get('pss_over_floor'))} | "
            f"{_f(per_agent)} / {_f(floor.get('agent_pss_mb'))} | "
            f"{run.get('messages') or '-'} | {_f(run.get('heartbeat_share'), '.1%')} |"
        )
        if with_frodo:
            stats = fr.get("stats_run") or {}
            over_frodo = (
                run["wall_s"] / fr["wall_s"]
                if fr.get("status") == "ok" and fr.get("wall_s") and run.get("wall_s")
                else None
            )
            line += (
                f" {_f(fr.get('wall_s'))} / {_f(stats.get('wall_s'))}"
                f"{'' if fr.get('status') in (None, 'ok') else ' (' + str(fr['status']) + ')'} | "
                f"{_f(over_frodo)} | {_f(fr.get('max_rss_mb'), '.0f')} |"
            )
        lines.append(line)
    lines += breakdown_table(rows)
    bad = [f"{r['family']}:{r['n']}" for r in rows if not r["ends_well"]]
    lines += [
        "",
        "Every row ended ok, infeasible, or too_large naming z."
        if not bad
        else f"Rows that did not end well: {', '.join(bad)}.",
        "",
    ]
    if not with_frodo:
        lines += ["FRODO was not run (no `--frodo DIR`).", ""]
    if report.get("plot"):
        lines += [f"![wall time and summed PSS against n]({report['plot']})", ""]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot written", file=sys.stderr)
        return False
    fig, (wall, mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    for family in FAMILIES:
        rows = [r for r in report["rows"] if r["family"] == family and r["run"].get("wall_s")]
        if not rows:
            continue
        ns = [r["n"] for r in rows]
        wall.plot(ns, [r["run"]["wall_s"] for r in rows], "-o", label=f"dcop run: {family}")
        mem.plot(ns, [r["run"]["pss_agents_mb"] for r in rows], "-o", label=f"dcop: {family}")
        floors = [(r["n"], r["floor"]) for r in rows if r.get("floor")]
        if floors:
            fns = [n for n, _ in floors]
            wall.plot(fns, [f["wall_s"] for _, f in floors], ":^", label=f"floor: {family}")
            mem.plot(fns, [f["summed_pss_mb"] for _, f in floors], ":^", label=f"floor: {family}")
        fr = [(r["n"], r["frodo"]) for r in rows if (r.get("frodo") or {}).get("wall_s")]
        if fr:
            wall.plot(
                [n for n, _ in fr], [f["wall_s"] for _, f in fr], "--s", label=f"FRODO: {family}"
            )
            rss = [(n, f["max_rss_mb"]) for n, f in fr if f.get("max_rss_mb")]
            if rss:
                mem.plot(
                    [n for n, _ in rss], [m for _, m in rss], "--s", label=f"FRODO RSS: {family}"
                )
    wall.set(xlabel="agents (n)", ylabel="wall s", title="wall time")
    mem.set(xlabel="agents (n)", ylabel="MB", title="summed PSS of the agents")
    for ax in (wall, mem):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def parse_only(text: str) -> list[tuple[str, int]]:
    """``tree:1000,grid:64`` -> rows (family names checked)."""
    out = []
    for part in text.split(","):
        family, _, n = part.partition(":")
        if family not in FAMILIES or not n.isdigit():
            raise SystemExit(
                f"--only: {part!r} is not FAMILY:N with FAMILY in {', '.join(FAMILIES)}"
            )
        out.append((family, int(n)))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--series", choices=sorted(SERIES), default="full")
    ap.add_argument("--only", help="rows as FAMILY:N,... instead of a series")
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--p2", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--sample-s", type=float, default=0.1)
    ap.add_argument("--frodo", type=Path, help="FRODO's folder: run its DPOP beside each row")
    ap.add_argument(
        "--frodo-timeout",
        type=float,
        help="FRODO's time limit per run (default: --timeout); a grid's DPOP runs out of it",
    )
    ap.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="leave out the floor bench (benchmarks/agent_floor.py) beside each row",
    )
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for scale.json/.md/.png")
    ap.add_argument(
        "--name",
        default="scale",
        help="the files' stem: NAME.json/.md/.png (a part of the series kept beside the whole)",
    )
    args = ap.parse_args(argv)
    from startup import compile_package

    # the template imports what it forks from its bytecode: a module changed since it was last
    # compiled would be compiled in every run's template where PYTHONDONTWRITEBYTECODE is set
    # (on this VM it is), its garbage a part of every agent's address space (issue 49)
    compile_package()
    rows_asked = parse_only(args.only) if args.only else SERIES[args.series]
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        # a folder of this machine (--frodo DIR, --out) shows as PATH (keep._public)
        "command": "benchmarks/scale.py "
        + " ".join(map(_public, argv if argv is not None else sys.argv[1:])),
        "machine": machine_summary(),
        "machine_info": machine_info(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_start": _load(),
        "d": args.d,
        "p2": args.p2,
        "seed": args.seed,
        "sample_s": args.sample_s,
        "rows": [],
    }
    with tempfile.TemporaryDirectory(prefix="dcop-scale-") as tmp:
        folder = Path(tmp)
        frodo_limit = args.frodo_timeout if args.frodo_timeout is not None else args.timeout
        frodo = frodo_runner(args.frodo, frodo_limit, folder) if args.frodo else None
        if args.frodo:
            report["frodo_version"] = frodo_version(args.frodo)
            report["frodo_timeout_s"] = frodo_limit
        for family, n in rows_asked:
            row = one_row(family, n, args, folder, frodo)
            report["rows"].append(row)
            run = row["run"]
            print(
                f"{family} n={n}: {run.get('status')} run {run['wall_s']:.2f} s, agents' PSS "
                f"{run['pss_agents_mb']:.0f} MB",
                file=sys.stderr,
            )
    report["load_end"] = _load()
    png = args.out / f"{args.name}.png"
    report["plot"] = png.name if plot(report, png) else None
    from keep import write_results

    write_results(args.out, args.name, report, markdown(report))
    return report


def machine_summary() -> str:
    info = machine_info()
    return f"{info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB"


def report_head(script: str) -> dict[str, str]:
    """The header fields of an agent bench's report (agent_memory.py, agent_cpu.py): its command
    line, the machine, the date and the load at the start."""
    return {
        "command": " ".join([f"benchmarks/{script}", *sys.argv[1:]]),
        "machine": machine_summary(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": _load(),
    }


def report_top(title: str, report: dict[str, Any], how: str) -> list[str]:
    """The first Markdown lines of an agent bench's report: ``title``, the header fields of
    :func:`report_head`, the instance, then ``how`` the figures were taken."""
    return [
        f"# {title}",
        "",
        f"Command: `{report['command']}`  ",
        f"Machine: {report['machine']}; {report['date']}; load average at the start "
        f"{report['load']}.  ",
        "Instance: `dcop generate scalefree --links 1 --d 10 --p2 0.5 --seed 1` (the scale "
        f"series' tree); `dcop run --algo dpop`. {how}",
    ]


def sized_bench_main(
    script: str,
    name: str,
    measure: Callable[[int], dict[str, Any]],
    markdown: Callable[[dict[str, Any]], str],
    description: str | None,
) -> None:
    """The command line of an agent bench measured at several agent counts (agent_cpu.py,
    agent_phases.py): ``--sizes`` and ``--out``; the package compiled first, then one row per
    size, written as ``out/name.json`` and ``.md``."""
    import argparse

    ap = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--sizes", default="250,1000")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = ap.parse_args()
    from startup import compile_package

    # the template imports what it forks from its bytecode: a module changed since it was last
    # compiled would be compiled in every run's template where PYTHONDONTWRITEBYTECODE is set
    # (on this VM it is), its garbage a part of every agent's address space (issue 49)
    compile_package()
    report: dict[str, Any] = {
        **report_head(script),
        "rows": [measure(int(x)) for x in args.sizes.split(",")],
    }
    write_report(args.out, name, report, markdown(report))


def write_report(out: Path, name: str, report: dict[str, Any], text: str) -> None:
    """Write ``out/name.json`` (the report) and ``out/name.md`` (``text``), and print the text."""
    from keep import write_results

    write_results(out, name, report, text)
    print(text)


def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


if __name__ == "__main__":
    main()
