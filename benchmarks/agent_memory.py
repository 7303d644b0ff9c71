"""What a forked agent's memory holds: per-agent PSS and private pages during a `dcop run`.

    .venv/bin/python benchmarks/agent_memory.py                   # trees of 250 and 1000 agents
    .venv/bin/python benchmarks/agent_memory.py --sizes 50 --out /tmp/x

Runs ``dcop run FILE --algo dpop`` on ``dcop generate scalefree --links 1`` (d = 10, p2 = 0.5,
seed 1: the scale series' tree) and samples every agent's ``/proc/PID/smaps_rollup`` while it
runs. At the sample where the agents' summed PSS peaked it keeps: the sum, and per agent the
median PSS, private dirty, private clean, shared and anonymous kB. With the breakdown (the
default), it also reads one agent's ``/proc/PID/smaps`` at that moment and sums its private
dirty kB by mapping: the heap, anonymous mappings (Python's object arenas, the ZeroMQ threads'
malloc arenas and stacks), and each file. Writes benchmarks/results/agent_memory.json and .md.
The sampler reads every agent's page tables as fast as it can (it takes a core): memory figures
are what to read here, not the wall times (benchmarks/scale.py times the runs).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scale import DCOP, Sampling, descendants, is_agent, report_top  # noqa: E402

ROLLUP_FIELDS = (
    "Pss",
    "Private_Dirty",
    "Private_Clean",
    "Shared_Clean",
    "Shared_Dirty",
    "Anonymous",
    "Rss",
)


def rollup(pid: int) -> dict[str, int] | None:
    """The kB fields of a process's smaps_rollup (None once it has gone)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    out = {}
    for field in ROLLUP_FIELDS:
        m = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
        out[field] = int(m.group(1)) if m else 0
    return out


def breakdown(pid: int) -> dict[str, int]:
    """Private dirty kB of one process by mapping (anonymous ones by size class)."""
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return {}
    out: dict[str, int] = {}
    name = ""
    for line in text.splitlines():
        head = line.split()
        if "-" in head[0] and not head[0].endswith(":"):
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            size_kb = (hi - lo) // 1024
            path = head[5] if len(head) > 5 else ""
            if path.startswith("/"):
                name = Path(path).name
            elif path:
                name = path
            else:
                name = f"anon {size_kb} kB" if size_kb < 65536 else "anon >= 64 MB"
        elif head[0] == "Private_Dirty:":
            kb = int(head[1])
            if kb:
                out[name] = out.get(name, 0) + kb
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


class Sampler(Sampling):
    """Samples the agents below ``root`` until stopped; keeps the peak sample."""

    def __init__(self, root: int, detail: bool) -> None:
        super().__init__("agent-sampler")
        self.root, self.detail = root, detail
        self.peak: dict[str, Any] = {"sum_pss_kb": 0}

    def _run(self) -> None:
        while not self._stop.is_set():
            agents = [p for p in descendants(self.root) if is_agent(p)]
            rows = [r for p in agents if (r := rollup(p)) is not None]
            total = sum(r["Pss"] for r in rows)
            # the moment most agents were alive (all of them, once launched), then the most PSS
            if rows and (len(rows), total) > (self.peak.get("agents", 0), self.peak["sum_pss_kb"]):
                kept = self.peak.get("one_agent_private_dirty_kb")
                self.peak = {
                    "sum_pss_kb": total,
                    "agents": len(rows),
                    "median_kb": {f: statistics.median(r[f] for r in rows) for f in ROLLUP_FIELDS},
                }
                if self.detail:
                    # from the middle on: an agent may have exited since its rollup was read
                    middle = agents[len(agents) // 2 :] + agents[: len(agents) // 2]
                    one = next((b for pid in middle if (b := breakdown(pid))), kept)
                    if one:
                        self.peak["one_agent_private_dirty_kb"] = one
            self._stop.wait(0.05)


def measure(n: int, detail: bool) -> dict[str, Any]:
    """One ``dcop run`` of the n-agent tree, sampled (see the module docstring)."""
    from dcop.generators import scale_free_network
    from dcop.io import write_problem

    with tempfile.TemporaryDirectory(prefix="dcop-agent-memory-") as tmp:
        file = Path(tmp) / f"tree_n{n}.wcsp"
        write_problem(scale_free_network(n, 10, 0.5, 1, m=1), file)
        out = Path(tmp) / "result.json"
        t0 = time.perf_counter()
        argv = [DCOP, "run", str(file), "--algo", "dpop", "-q", "--json", str(out)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        with Sampler(proc.pid, detail) as sampler:
            proc.wait()
        wall = time.perf_counter() - t0
        doc = json.loads(out.read_text()) if out.exists() else {}
    peak = sampler.peak
    faults = list(((doc.get("processes") or {}).get("agent_page_faults") or {}).values())
    return {
        "n": n,
        "status": doc.get("status"),
        "wall_s": round(wall, 3),
        "sum_pss_mb": round(peak["sum_pss_kb"] / 1024, 1),
        # the kernel's account of each exited agent: minor and major faults (a copied page is one)
        "median_page_faults": statistics.median(faults) if faults else None,
        **{k: v for k, v in peak.items() if k != "sum_pss_kb"},
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        *report_top(
            "What a forked agent's memory holds",
            report,
            "At the sample where the agents' summed PSS peaked (with the most agents alive), "
            "per agent: medians over the agents.",
        ),
        "",
        "| n | status | agents alive | summed PSS MB | PSS MB / agent | private dirty MB / agent "
        "| shared MB / agent | page faults / agent |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        med = r.get("median_kb") or {}
        shared = (med.get("Shared_Clean", 0) + med.get("Shared_Dirty", 0)) / 1024
        lines.append(
            f"| {r['n']} | {r['status']} | {r.get('agents')} | {r['sum_pss_mb']:.0f} | "
            f"{med.get('Pss', 0) / 1024:.2f} | {med.get('Private_Dirty', 0) / 1024:.2f} | "
            f"{shared:.1f} | {r['median_page_faults']} |"
        )
    for r in report["rows"]:
        one = r.get("one_agent_private_dirty_kb")
        if one:
            lines += [
                "",
                f"One agent of the {r['n']}-agent run, private dirty kB by mapping (anonymous "
                "mappings by size: Python's 1 MiB object arenas, merged when adjacent; thread "
                "stacks of 8 MiB; [heap] is malloc's):",
                "",
                "| mapping | kB |",
                "|---|---|",
                *(f"| {name} | {kb} |" for name, kb in list(one.items())[:12]),
            ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="250,1000")
    ap.add_argument("--no-breakdown", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    from scale import report_head, write_report

    sizes = [int(x) for x in args.sizes.split(",")]
    report: dict[str, Any] = {
        **report_head("agent_memory.py"),
        # the breakdown reads one agent's full smaps at every sample: the smallest run only
        "rows": [measure(n, not args.no_breakdown and n == min(sizes)) for n in sizes],
    }
    write_report(args.out, "agent_memory", report, markdown(report))


if __name__ == "__main__":
    main()
