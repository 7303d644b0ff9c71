"""Soak test: many consecutive distributed DPOP/ADPOP runs with random agent kills.

    python benchmarks/soak.py [--runs 200] [--kill-share 0.2] [--seed 0] [--timeout 60]

Each run generates a random instance (random / scale-free / grid, n 4..20, d 2..8, the domain
lowered when the DFS pseudo-tree's UTIL tables would be too large for this machine), solves it
with ``run_local`` (one agent process per variable, ZeroMQ on loopback) as DPOP or ADPOP(z), and
checks:

* a completed DPOP run: its cost equals the centralized BE optimum (exactly: integer costs) and
  its bound equals its cost; a completed ADPOP run: lower bound <= BE optimum <= upper bound;
* a run with a killed agent (SIGKILL, either right when every agent is ready, or a few ms into
  the solve): ends with a RunError that names the killed agent, within the run's timeout (the
  delay from the kill to the error is measured); a run the kill reached too late must still be
  right;
* nothing is left behind after any run: no process started for the run (looked up by its
  peers.json path, since agents run in their own sessions and would not show up as children),
  no child process, no file descriptor or socket of this process beyond the warm-up baseline, no
  thread, no file in the (private) temporary folder.

A watchdog marks a run that outlives its timeout by ``--grace`` seconds as a hang and kills it.
Writes ``--out``.json (every run) and ``--out``.md (the summary). Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

# A private temporary folder for this process and every agent it starts: other jobs on the
# machine may write to /tmp at the same time, so only an empty private folder proves no leak.
_PRIVATE_TMP = tempfile.mkdtemp(prefix="dcop-soak-")
os.environ["TMPDIR"] = _PRIVATE_TMP
tempfile.tempdir = None  # re-read TMPDIR on next use

import dcop  # noqa: E402
from dcop.coordinator import AgentProcesses, RunResult, run_local  # noqa: E402
from dcop.errors import DcopError  # noqa: E402
from dcop.generators import generate  # noqa: E402
from dcop.inference import solve_be  # noqa: E402
from dcop.model import Problem  # noqa: E402
from dcop.ordering import dfs_pseudo_tree, induced_width  # noqa: E402
from dcop.protocol import RunSpec  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TOPOLOGIES = ("random", "scalefree", "grid")
GRID_SIZES = (4, 9, 16)
#: Largest UTIL/BE table (entries) a run may need: keeps 20 agents x 2 cores comfortable.
MAX_TABLE_ENTRIES = 1 << 20


# ---- instances ------------------------------------------------------------------------------
def pseudo_tree_width(problem: Problem) -> int:
    """Induced width along the DFS pseudo-tree (what DPOP's UTIL tables depend on)."""
    adjacency = problem.neighbours()
    tree = dfs_pseudo_tree(adjacency)
    return induced_width(adjacency, tree.elimination_order())


def make_instance(rng: np.random.Generator, index: int) -> tuple[Problem, dict[str, Any]]:
    """A random instance; ``d`` is lowered until d^(w+1) fits ``MAX_TABLE_ENTRIES``."""
    topology = str(rng.choice(TOPOLOGIES))
    n = int(rng.choice(GRID_SIZES)) if topology == "grid" else int(rng.integers(4, 21))
    d = int(rng.integers(2, 9))
    p1 = float(rng.choice([0.2, 0.3, 0.4]))
    if topology == "random":
        # floor(p1 n (n-1) / 2) edges must connect n nodes: p1 >= 2 / n.
        p1 = max(p1, math.ceil(200 / n) / 100)
    p2 = float(rng.choice([0.0, 0.1, 0.2, 0.3]))
    seed = 1000 + index
    while True:
        problem = generate(topology, n, d, p1=p1, p2=p2, seed=seed)
        width = pseudo_tree_width(problem)
        if d**width * d <= MAX_TABLE_ENTRIES or d == 2:
            break
        d -= 1
    params = {"topology": topology, "n": n, "d": d, "p1": p1, "p2": p2, "seed": seed}
    params["pseudo_tree_width"] = width
    return problem, params


# ---- what a run leaves behind -------------------------------------------------------------------
def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def socket_count() -> int:
    return len(psutil.Process().net_connections(kind="all"))


def tmp_listing() -> list[str]:
    return sorted(os.listdir(_PRIVATE_TMP))


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text`` (zombies excluded)."""
    out = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(text in part for part in proc.info["cmdline"] or ()):
                out.append(proc.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def live_children() -> list[int]:
    try:
        kids = psutil.Process().children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [k.pid for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]


# ---- one run ----------------------------------------------------------------------------------
class Killer:
    """Hooks for run_local: remembers the agent processes, kills one (now or after a delay)."""

    def __init__(self, mode: str | None, victim: int, delay_s: float) -> None:
        self.mode = mode
        self.victim = victim
        self.delay_s = delay_s
        self.procs: AgentProcesses | None = None
        self.peers_file: str | None = None
        self.killed_at: float | None = None
        self.timer: threading.Timer | None = None

    def before_start(self, procs: AgentProcesses) -> None:
        self.procs = procs
        if self.mode == "ready":
            self.kill()
        elif self.mode == "solve":
            self.timer = threading.Timer(self.delay_s, self.kill)
            self.timer.daemon = True
            self.timer.start()

    def agent_argv(self, agent_id: int, argv: list[str]) -> list[str]:
        self.peers_file = argv[argv.index("--peers") + 1]
        return argv

    def kill(self) -> None:
        assert self.procs is not None
        proc = self.procs.procs[self.victim]
        if proc.poll() is None:
            self.killed_at = time.monotonic()
            os.kill(proc.pid, signal.SIGKILL)

    def kill_everything(self) -> None:
        """For the watchdog: end every agent of a hung run."""
        if self.procs is not None:
            for proc in self.procs.procs.values():
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)

    def finish(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()


def names_agent(message: str, agent_id: int, variable: str) -> bool:
    return bool(
        re.search(rf"\bagent {agent_id}\b", message)
        or re.search(rf"(?<![\w.]){re.escape(variable)}(?![\w.])", message)
    )


def one_run(
    index: int, rng: np.random.Generator, args: argparse.Namespace, baseline: dict[str, Any]
) -> dict[str, Any]:
    problem, params = make_instance(rng, index)
    algo = "dpop" if rng.random() < 0.5 else "adpop"
    z = int(rng.integers(1, 5)) if algo == "adpop" else None
    kill = index > 0 and rng.random() < args.kill_share  # run 0 is the warm-up
    mode = str(rng.choice(["ready", "solve"])) if kill else None
    victim = int(rng.integers(0, problem.n))
    delay_s = float(rng.uniform(0.0, 0.03))
    record: dict[str, Any] = {"run": index, **params, "algo": algo, "z": z, "kill": mode}
    if kill:
        record.update(victim=victim, victim_variable=list(problem.variables)[victim])
        if mode == "solve":
            record["kill_delay_s"] = round(delay_s, 4)

    be = solve_be(problem)
    optimum = be.lower_bound
    record["be_optimum"] = optimum if math.isfinite(optimum) else None

    killer = Killer(mode, victim, delay_s)
    hung = threading.Event()

    def on_hang() -> None:
        hung.set()
        killer.kill_everything()

    watchdog = threading.Timer(args.timeout + args.grace, on_hang)
    watchdog.daemon = True
    watchdog.start()
    t0 = time.monotonic()
    result: RunResult | None = None
    error: str | None = None
    ended = t0
    try:
        result = run_local(
            problem,
            RunSpec(algo, z),
            timeout=args.timeout,
            agent_argv=killer.agent_argv,
            before_start=killer.before_start,
        )
    except DcopError as exc:
        error = str(exc)
    except Exception as exc:  # anything else from run_local is a bug: record it, carry on
        error = f"UNEXPECTED {type(exc).__name__}: {exc}"
        record["unexpected_exception"] = True
    finally:
        ended = time.monotonic()
        watchdog.cancel()
        watchdog.join()  # a cancelled Timer's thread still needs a moment to end
        killer.finish()
    record["wall_s"] = round(ended - t0, 3)
    record["hang"] = hung.is_set()
    killed = killer.killed_at is not None
    record["killed"] = killed
    if killer.procs is not None:
        # 3 = stopped by the coordinator ("aborted"), -9 = the SIGKILL, -15 = needed a SIGTERM.
        record["exit_codes"] = sorted(set(map(str, killer.procs.exit_codes().values())))
    problems: list[str] = []
    if record["hang"]:
        problems.append(f"hang: still running {args.timeout + args.grace:g} s after start")
    if result is not None:
        record["outcome"] = "solved"
        problems += check_answer(result, algo, optimum, record)
        if killed:
            record["kill_too_late"] = True  # the kill landed after the agent had done its part
    else:
        record["outcome"] = "error"
        record["error"] = error
        if not killed:
            problems.append(f"spurious failure: {error}")
        else:
            assert killer.killed_at is not None
            latency = ended - killer.killed_at
            record["error_latency_s"] = round(latency, 3)
            if not names_agent(error or "", victim, record["victim_variable"]):
                problems.append(f"error does not name killed agent {victim}: {error}")
            if ended - t0 > args.timeout:
                problems.append(f"error after {ended - t0:.1f} s, beyond the {args.timeout} s")
    problems += check_leaks(killer, baseline, record)
    record["problems"] = problems
    record["ok"] = not problems
    return record


def check_answer(result: RunResult, algo: str, optimum: float, rec: dict[str, Any]) -> list[str]:
    cost, lower = result.cost, result.bound
    rec.update(
        cost=cost if math.isfinite(cost) else None,
        lower_bound=lower if math.isfinite(lower) else None,
    )
    rec["solve_wall_s"] = round(result.metrics["solve_wall_s"], 4)
    rec["messages"] = result.metrics["total_messages"]
    if algo == "dpop":
        if cost != optimum or lower != optimum:
            return [f"wrong answer: DPOP cost {cost}, bound {lower}, BE optimum {optimum}"]
        return []
    tolerance = 1e-9 * max(1.0, abs(optimum)) if math.isfinite(optimum) else 0.0
    if not (lower <= optimum + tolerance and optimum <= cost + tolerance):
        return [f"wrong answer: ADPOP bounds [{lower}, {cost}] miss the BE optimum {optimum}"]
    return []


def check_leaks(killer: Killer, baseline: dict[str, Any], rec: dict[str, Any]) -> list[str]:
    out: list[str] = []
    # Processes exit asynchronously after a kill; run_local promises they are gone on return.
    left = processes_mentioning(killer.peers_file) if killer.peers_file else []
    kids = live_children()
    fds, sockets, threads, tmp = fd_count(), socket_count(), threading.active_count(), tmp_listing()
    rec.update(fds=fds, sockets=sockets, threads=threads)
    if left:
        out.append(f"leak: agent processes still running: {left}")
    if kids:
        out.append(f"leak: child processes still running: {kids}")
    if fds > baseline["fds"]:
        out.append(f"leak: {fds} open fds, {baseline['fds']} after the warm-up run")
    if sockets > baseline["sockets"]:
        out.append(f"leak: {sockets} sockets, {baseline['sockets']} after the warm-up run")
    if threads > baseline["threads"]:
        out.append(f"leak: {threads} threads, {baseline['threads']} after the warm-up run")
    if tmp:
        out.append(f"leak: temporary files left: {tmp[:5]}")
    return out


# ---- the soak ---------------------------------------------------------------------------------
def summarize(
    records: list[dict[str, Any]], started: float, args: argparse.Namespace
) -> dict[str, Any]:
    solved = [r for r in records if r["outcome"] == "solved"]
    killed = [r for r in records if r["killed"]]
    killed_errors = [r for r in killed if r["outcome"] == "error"]
    latencies = [r["error_latency_s"] for r in killed_errors]
    walls = [r["wall_s"] for r in records]

    def count(prefix: str) -> int:
        return sum(1 for r in records if any(p.startswith(prefix) for p in r["problems"]))

    return {
        "runs": len(records),
        "dpop_runs": sum(r["algo"] == "dpop" for r in records),
        "adpop_runs": sum(r["algo"] == "adpop" for r in records),
        "kills_planned": sum(r["kill"] is not None for r in records),
        "kills": len(killed),
        "kills_ready_phase": sum(r["kill"] == "ready" for r in killed),
        "kills_solve_phase": sum(r["kill"] == "solve" for r in killed),
        "killed_runs_with_clear_error": sum(
            1 for r in killed_errors if not any("does not name" in p for p in r["problems"])
        ),
        "kills_too_late_run_still_right": sum(
            1 for r in killed if r["outcome"] == "solved" and r["ok"]
        ),
        # run_local stops agents with a stop message, then SIGTERM after 3 s, then SIGKILL.
        "runs_where_an_agent_needed_sigterm": sum(
            "-15" in r.get("exit_codes", ()) for r in records
        ),
        "completed_runs": len(solved),
        "completed_runs_checked_against_be": len(solved),
        "infeasible_instances": sum(r["be_optimum"] is None for r in records),
        "wrong_answers": count("wrong answer"),
        "hangs": count("hang"),
        "spurious_failures": count("spurious failure"),
        "unclear_errors": count("error does not name"),
        "errors_after_timeout": count("error after"),
        "leaks": count("leak"),
        "failed_runs": sum(not r["ok"] for r in records),
        "error_latency_s": {
            "max": max(latencies, default=None),
            "median": float(np.median(latencies)) if latencies else None,
        },
        "run_wall_s": {"max": max(walls), "median": float(np.median(walls))},
        "run_timeout_s": args.timeout,
        "n_range": [min(r["n"] for r in records), max(r["n"] for r in records)],
        "d_range": [min(r["d"] for r in records), max(r["d"] for r in records)],
        "topologies": {t: sum(r["topology"] == t for r in records) for t in TOPOLOGIES},
        "total_s": round(time.monotonic() - started, 1),
    }


def markdown(summary: dict[str, Any], records: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    s = summary
    lines = [
        "# Soak: consecutive distributed DPOP/ADPOP runs with agent kills",
        "",
        f"Command: `{meta['command']}` on {meta['machine']}, {meta['date']}.",
        *([meta["note"]] if meta["note"] else []),
        "",
        "Every run: a fresh random instance, one agent process per variable (ZeroMQ on loopback),",
        "checked against centralized BE; a share of runs has one agent SIGKILLed either right",
        "when all agents are ready (`ready`) or 0-30 ms into the solve (`solve`). After every run:",
        "no process of the run, no child, no fd/socket/thread beyond the warm-up baseline, and an",
        "empty private temporary folder (TMPDIR for this process and all agents).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| runs (DPOP / ADPOP) | {s['runs']} ({s['dpop_runs']} / {s['adpop_runs']}) |",
        f"| n range, d range | {s['n_range'][0]}..{s['n_range'][1]}, "
        f"{s['d_range'][0]}..{s['d_range'][1]} |",
        f"| topologies | {', '.join(f'{k} {v}' for k, v in s['topologies'].items())} |",
        f"| kills (ready phase / solve phase) | {s['kills']} ({s['kills_ready_phase']} / "
        f"{s['kills_solve_phase']}) |",
        f"| killed runs ended by a RunError naming the agent | "
        f"{s['killed_runs_with_clear_error']} |",
        f"| kills that landed after the agent's part was done (run still right) | "
        f"{s['kills_too_late_run_still_right']} |",
        f"| kill -> error delay, median / max (s) | {_fmt(s['error_latency_s']['median'])} / "
        f"{_fmt(s['error_latency_s']['max'])} (run timeout {s['run_timeout_s']:g} s) |",
        f"| runs where an agent ignored the stop message for 3 s and got SIGTERM | "
        f"{s['runs_where_an_agent_needed_sigterm']} |",
        f"| completed runs checked against BE | {s['completed_runs_checked_against_be']} "
        f"({s['infeasible_instances']} instances infeasible) |",
        f"| **wrong answers** | **{s['wrong_answers']}** |",
        f"| **hangs** | **{s['hangs']}** |",
        f"| **leaks** (processes, fds, sockets, threads, temp files) | **{s['leaks']}** |",
        f"| spurious failures (no kill, still an error) | {s['spurious_failures']} |",
        f"| errors not naming the killed agent | {s['unclear_errors']} |",
        f"| run wall time, median / max (s) | {_fmt(s['run_wall_s']['median'])} / "
        f"{_fmt(s['run_wall_s']['max'])} |",
        f"| total time (s) | {s['total_s']} |",
        "",
    ]
    failed = [r for r in records if not r["ok"]]
    if failed:
        lines += ["## Failed runs", ""]
        for r in failed:
            lines.append(
                f"- run {r['run']} ({r['topology']} n={r['n']} d={r['d']} {r['algo']}): "
                + "; ".join(r["problems"])
            )
        lines.append("")
    examples = [r for r in records if r["killed"] and r["outcome"] == "error"][:3]
    if examples:
        lines += ["## Example errors of killed runs", ""]
        lines += [f"- run {r['run']} (`{r['kill']}` kill): `{r['error']}`" for r in examples]
        lines.append("")
    lines += ["Per-run records: `soak.json`.", ""]
    return "\n".join(lines)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--kill-share", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per run (run_local)")
    ap.add_argument("--grace", type=float, default=30.0, help="seconds past it = a hang")
    ap.add_argument("--out", type=Path, default=RESULTS / "soak")
    ap.add_argument("--note", default="", help="a line for the report (e.g. the commit)")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    records: list[dict[str, Any]] = []
    baseline: dict[str, Any] = {"fds": 10**9, "sockets": 10**9, "threads": 10**9}
    fds_at_start = fd_count()
    for index in range(args.runs):
        rec = one_run(index, rng, args, baseline)
        if index == 0:
            # Warm-up: the ZeroMQ context and the thread pools stay open after the first run.
            baseline = {"fds": rec["fds"], "sockets": rec["sockets"], "threads": rec["threads"]}
        records.append(rec)
        status = "ok" if rec["ok"] else "FAIL " + "; ".join(rec["problems"])
        kill = f" kill={rec['kill']}:{rec.get('victim')}" if rec["kill"] else ""
        print(
            f"[{index + 1:3d}/{args.runs}] {rec['topology']:9s} n={rec['n']:2d} d={rec['d']} "
            f"{rec['algo']:5s}{kill} -> {rec['outcome']} {rec['wall_s']:.1f}s {status}",
            flush=True,
        )
    summary = summarize(records, started, args)
    summary["fds"] = {
        "before_first_run": fds_at_start,
        "baseline": baseline["fds"],
        "after_last_run": fd_count(),
    }
    meta = {
        "command": " ".join(["python benchmarks/soak.py", *sys.argv[1:]]),
        "machine": f"{platform.machine()} Linux ({os.cpu_count()} cores, "
        f"Python {platform.python_version()})",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seed": args.seed,
        "kill_share": args.kill_share,
        "dcop_package": str(Path(dcop.__file__).resolve().parent),
        "note": args.note,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"meta": meta, "summary": summary, "runs": records}
    args.out.with_suffix(".json").write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n")
    args.out.with_suffix(".md").write_text(markdown(summary, records, meta))
    print(json.dumps(summary, indent=1))
    with contextlib.suppress(OSError):
        os.rmdir(_PRIVATE_TMP)  # empty unless something leaked
    return 0 if summary["failed_runs"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
