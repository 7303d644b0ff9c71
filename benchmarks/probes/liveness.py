"""Liveness traffic before and after: the same DPOP instances solved by ``dcop run`` of an older
checkout and of this one, with messages and bytes by type (heartbeats apart) and wall times.

    .venv/bin/python benchmarks/probes/liveness.py --old OLD_CHECKOUT/.venv/bin/dcop
    .venv/bin/python benchmarks/probes/liveness.py --old ... --only random_n30 --repeat 2

The older runtime sent a heartbeat every 0.5 s from every agent to the coordinator and to every
neighbour; this one sends one a second to the coordinator only and leaves the links to ZeroMQ's
own ZMTP heartbeats (protocol pings below the application, not counted by either version).
Both versions count messages on their own sockets the same way (each agent's sends up to its
result, plus the coordinator's), so the per-type counts compare directly.

Writes ``benchmarks/probes/out/liveness.json`` and ``liveness.md`` (not committed). The instances: the random
network of the issue (n = 20, d = 10, p1 = 0.3, p2 = 0.5, seed 1; a run of tens of seconds), the
30-variable random network of ``benchmarks/distributed.py`` (d = 3, seed 0) and a FRODO-generated
Max-DisCSP with 30 variables, d = 6, p1 = 0.15 (``benchmarks/instances/frodo``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]  # benchmarks/
RESULTS = Path(__file__).resolve().parent / "out"  # not committed (benchmarks/probes/.gitignore)
sys.path.insert(0, str(HERE))
from compare.machine import machine_info  # noqa: E402  (benchmarks/compare)
from compare.report import markdown_table  # noqa: E402

#: What this probe found (2-core VM, 2026-11-23, commits a5435ab -> 9f3883b; results are not
#: kept): replacing 0.5 s heartbeats to the coordinator and every neighbour by 1 s heartbeats to
#: the coordinator only (links watched by ZMTP) cut heartbeats 2633 -> 140, 196 -> 0 and
#: 6237 -> 60 on the three instances, and `dcop run`'s wall time 1.8x, 3.4x and 9.4x.
CONCLUSION = "application heartbeats to neighbours cost up to 9x wall time; ZMTP watches links"

NEW_DCOP = str(Path(sys.executable).with_name("dcop"))
MAX_MESSAGE_MIB = 2048
ALGORITHM_TYPES = ("degree", "token", "util", "value")


def instances(folder: Path) -> list[tuple[str, Path]]:
    """The instance files, written by this checkout's writers (both versions read them)."""
    from dcop.generators import random_network
    from dcop.io import write_problem

    out = []
    for name, problem in (
        ("random_n20_d10_p0.3_s1", random_network(20, 10, 0.3, 0.5, seed=1)),
        ("random_n30_d3_s0", random_network(30, 3, 4.0 / 29, 0.3, seed=0)),
    ):
        path = folder / f"{name}.yaml"
        write_problem(problem, path)
        out.append((name, path))
    frodo = HERE / "instances" / "frodo" / "max_discsp_n30_d6_p0.15_t0.5_1.xml"
    out.append((frodo.stem, frodo))
    return out


def commit_of(executable: str) -> str | None:
    """The git commit of the checkout an executable's venv lives in."""
    try:
        out = subprocess.run(
            ["git", "-C", str(Path(executable).resolve().parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def solve(dcop: str, file: Path, timeout: float, work: Path) -> dict[str, Any]:
    """``dcop run FILE --algo dpop --json OUT`` timed by the wall clock; the document's figures."""
    out = work / "result.json"
    out.unlink(missing_ok=True)
    argv = [dcop, "run", str(file), "--algo", "dpop", "--timeout", f"{timeout:g}"]
    argv += ["--max-message-mib", str(MAX_MESSAGE_MIB), "--json", str(out)]
    t0 = time.perf_counter()
    try:
        # cwd: the agents run ``python -m``, which puts the working folder first on sys.path; a
        # checkout there would shadow the installed version
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout + 60, check=False, cwd=work
        )
        code: int | None = proc.returncode
        err = (proc.stderr.strip().splitlines() or [""])[-1][:300]
    except subprocess.TimeoutExpired:
        code, err = None, "killed after the timeout"
    res: dict[str, Any] = {"command_wall_s": time.perf_counter() - t0, "exit": code}
    if not out.exists():
        return res | {"status": "error", "error": err}
    doc = json.loads(out.read_text())
    m = doc.get("metrics") or {}
    messages, sizes = m.get("messages") or {}, m.get("bytes") or {}
    res |= {
        "status": doc.get("status"),
        "error": doc.get("message") if doc.get("status") != "ok" else None,
        "cost": doc.get("cost"),
        "wall_s": m.get("wall_s"),
        "solve_wall_s": m.get("solve_wall_s"),
        "simulated_s": m.get("simulated_runtime_s"),
        "messages": messages,
        "bytes": sizes,
        "heartbeat_messages": messages.get("heartbeat", 0),
        "heartbeat_bytes": sizes.get("heartbeat", 0),
        "util_messages": messages.get("util", 0),
        "algorithm_messages": sum(messages.get(t, 0) for t in ALGORITHM_TYPES),
        "algorithm_bytes": sum(sizes.get(t, 0) for t in ALGORITHM_TYPES),
        "total_messages": m.get("total_messages"),
        "total_bytes": m.get("total_bytes"),
        "largest_util_entries": m.get("largest_util_entries"),
    }
    return res


def _f(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return str(x)
    return f"{x:.{digits}g}" if abs(x) < 10**digits else f"{x:.0f}"


def markdown(report: dict[str, Any]) -> str:
    versions = report["versions"]
    rows = []
    for r in report["rows"]:
        x = r["result"]
        hb = x.get("heartbeat_messages")
        util = x.get("util_messages")
        rows.append(
            [
                r["instance"],
                f"{r['version']} ({versions[r['version']]['commit']})",
                x.get("status", "-"),
                _f(x.get("cost")),
                _f(x.get("command_wall_s")),
                _f(x.get("wall_s")),
                _f(x.get("solve_wall_s")),
                _f(hb),
                _f(x.get("heartbeat_bytes")),
                _f(util),
                _f(x.get("algorithm_messages")),
                _f(x.get("algorithm_bytes")),
                _f(x.get("total_messages")),
                _f(x.get("total_bytes")),
                _f(hb / util) if hb is not None and util else "-",
            ]
        )
    headers = [
        "instance",
        "version",
        "status",
        "cost",
        "`dcop run` wall s",
        "run wall s",
        "solve s",
        "heartbeats",
        "heartbeat B",
        "UTIL",
        "alg. msgs",
        "alg. B",
        "all msgs",
        "all B",
        "heartbeats / UTIL",
    ]
    by_type = []
    for r in report["rows"]:
        x = r["result"]
        kinds = ", ".join(f"{k} {v}" for k, v in sorted((x.get("messages") or {}).items()))
        by_type.append([r["instance"], r["version"], kinds or "-"])
    lines = [
        "# Liveness traffic: the old runtime against the new one, same DPOP instances",
        "",
        f"- Machine: {report['machine']['cpu']}, {report['machine']['cores']} cores; load average "
        f"(1, 5, 15 min) at the start {report['load_average_start']}, at the end "
        f"{report['load_average_end']}",
        f"- Command: `{report['command']}`",
        f"- Written: {report['date']}",
        f"- old: commit {versions['old']['commit']} (0.5 s heartbeats from every agent to the "
        "coordinator and to every neighbour); new: commit "
        f"{versions['new']['commit']} (1 s heartbeats to the coordinator only; links watched by "
        "ZMTP heartbeats, which are protocol pings below the application and not counted here).",
        f"- Every run: `dcop run FILE --algo dpop --max-message-mib {MAX_MESSAGE_MIB} --timeout "
        f"{report['timeout_s']:g} --json OUT`, timed as a command (wall clock); run wall and "
        "solve are the result document's (launch to last result, and start to last result). "
        "Messages and bytes are counted by each version on its own sockets: each agent's sends "
        "up to its result plus the coordinator's. alg. = degree + DFS token + UTIL + VALUE (the "
        "new runtime builds 8 candidate pseudo-trees, hence more token messages).",
        "",
        markdown_table(headers, rows),
        "",
        "## Summary (old / new, per instance)",
        "",
        markdown_table(
            ["instance", "heartbeats old / new", "all messages", "all bytes", "`dcop run` wall"],
            [
                [
                    s["instance"],
                    f"{_f(s['heartbeats_old'])} / {_f(s['heartbeats_new'])}",
                    _ratio(s["messages_ratio"]),
                    _ratio(s["bytes_ratio"]),
                    _ratio(s["command_wall_ratio"]),
                ]
                for s in report["summary"]
            ],
        ),
        "",
        "## Messages by type",
        "",
        markdown_table(["instance", "version", "messages by type"], by_type),
        "",
    ]
    return "\n".join(lines)


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}x"


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Old / new per instance (means over repeats that answered)."""

    def mean(inst: str, version: str, key: str) -> float | None:
        vals = [
            r["result"][key]
            for r in rows
            if r["instance"] == inst
            and r["version"] == version
            and r["result"].get("status") == "ok"
            and r["result"].get(key) is not None
        ]
        return sum(vals) / len(vals) if vals else None

    def ratio(inst: str, key: str) -> float | None:
        old, new = mean(inst, "old", key), mean(inst, "new", key)
        return old / new if old is not None and new else None

    out = []
    for inst in dict.fromkeys(r["instance"] for r in rows):
        out.append(
            {
                "instance": inst,
                "heartbeats_old": mean(inst, "old", "heartbeat_messages"),
                "heartbeats_new": mean(inst, "new", "heartbeat_messages"),
                "heartbeat_bytes_old": mean(inst, "old", "heartbeat_bytes"),
                "heartbeat_bytes_new": mean(inst, "new", "heartbeat_bytes"),
                "messages_ratio": ratio(inst, "total_messages"),
                "bytes_ratio": ratio(inst, "total_bytes"),
                "command_wall_ratio": ratio(inst, "command_wall_s"),
                "solve_ratio": ratio(inst, "solve_wall_s"),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="the older checkout's dcop executable")
    ap.add_argument("--new", default=NEW_DCOP, help="this checkout's dcop (default: beside python)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per instance and version")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    ap.add_argument("--only", default="", help="instances whose name contains this")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    versions = {
        "old": {"commit": commit_of(args.old)},
        "new": {"commit": commit_of(args.new)},
    }
    load_start = [round(x, 2) for x in os.getloadavg()]
    print(f"load average at the start: {load_start}", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="dcop-liveness-") as tmp:
        work = Path(tmp)
        for name, file in instances(work):
            if args.only not in name:
                continue
            for rep in range(args.repeat):
                for version, exe in (("old", args.old), ("new", args.new)):
                    res = solve(exe, file, args.timeout, work)
                    rows.append(
                        {"instance": name, "version": version, "repeat": rep, "result": res}
                    )
                    print(
                        f"{name} {version}: {res.get('status')} {res['command_wall_s']:.1f} s, "
                        f"heartbeats {res.get('heartbeat_messages')}, UTIL {res.get('util_messages')} "
                        f"{res.get('error') or ''}",
                        file=sys.stderr,
                    )
    argv = [("OLD_DCOP" if a == args.old else a) for a in sys.argv[1:]]
    report = {
        "command": " ".join(["benchmarks/probes/liveness.py", *argv]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine_info(),
        "load_average_start": load_start,
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "timeout_s": args.timeout,
        "versions": versions,
        "summary": summarise(rows),
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "liveness.json").write_text(json.dumps(report, indent=1, allow_nan=False) + "\n")
    (args.out / "liveness.md").write_text(markdown(report))
    print(f"wrote {args.out / 'liveness.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
