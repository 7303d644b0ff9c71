"""Device probe for MB-DPOP's GPU agents: where each agent's simulated time goes, CPU beside GPU,
and how the number of chunks a cut is pipelined in changes it.

For bench rows (``random:N:D:WIDTH``, the ``benchmarks/mbdpop.py`` instances, limit 1 MiB) it runs
``dcop run --algo mbdpop`` with CPU agents and with GPU agents (a first GPU run warms CuPy's and
dcop's kernel caches and is left out), for each ``--pipeline K``: the cut's least number of chunks
(:data:`dcop.trees.cutset.PIPELINE_CHUNKS`, set in every process of the run, agents' templates
included, by a ``sitecustomize`` put first on ``PYTHONPATH``). Prints the simulated times and, with
``--agents``, each agent's compute seconds and clock on both sides. Writes
``OUT/mbdpop_agents.json``.

    cd /tmp && python3 REPO/benchmarks/probes/mbdpop_agents.py --rows random:18:10:5 --out DIR
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

from dcop.generators import random_network
from dcop.io import write_problem

PATCH = """import os
if os.environ.get("PROBE_PIPELINE_CHUNKS"):
    import dcop.trees.cutset as _cutset
    _cutset.PIPELINE_CHUNKS = int(os.environ["PROBE_PIPELINE_CHUNKS"])
"""


def run(file: Path, gpu: str | None, width: int, out: Path, env: dict[str, str]) -> dict[str, Any]:
    argv = [sys.executable, "-m", "dcop", "run", str(file), "--algo", "mbdpop", "--trees", "1"]
    argv += ["-q", "--json", str(out), "--max-message-mib", "1", "--timeout", "120"]
    argv += ["--width", str(width)]
    if gpu is not None:
        argv += ["--gpu", gpu]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    wall = time.perf_counter() - t0
    doc = json.loads(out.read_text()) if out.exists() else {}
    out.unlink(missing_ok=True)
    m = doc.get("metrics") or {}
    cuts = (doc.get("pseudo_tree") or {}).get("cuts")
    agents = {
        a: {k: v[k] for k in ("parent", "separator", "compute_s", "clock_s")}
        for a, v in (doc.get("agents") or {}).items()
    }
    return {
        "wall_s": wall,
        "rc": proc.returncode,
        "stderr": proc.stderr[-1000:] if proc.returncode else "",
        "status": doc.get("status"),
        "cost": doc.get("cost"),
        "simulated_s": m.get("simulated_runtime_s"),
        "messages": m.get("total_messages"),
        "cuts": cuts,
        "agents": agents,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="random:18:10:5")
    ap.add_argument("--pipeline", default="8")
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--agents", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    report: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(PATCH)
        for row in args.rows.split(","):
            family, n, d, width = row.split(":")
            assert family == "random"
            file = Path(tmp) / f"{n}_{d}.xml"
            write_problem(random_network(int(n), int(d), 0.3, 0.0, seed=1), file)
            base = dict(os.environ)
            base["PYTHONPATH"] = tmp + os.pathsep + base.get("PYTHONPATH", "")
            run(file, args.gpu, int(width), Path(tmp) / "warm.json", base)
            for k in args.pipeline.split(","):
                env = base | {"PROBE_PIPELINE_CHUNKS": k}
                got = {}
                for side, gpu in (("cpu", None), ("gpu", args.gpu)):
                    got[side] = run(file, gpu, int(width), Path(tmp) / f"{side}.json", env)
                c, g = got["cpu"], got["gpu"]
                ratio = (c["simulated_s"] or 0) / (g["simulated_s"] or float("inf"))
                print(
                    f"{row} K={k} cut={json.dumps(c['cuts'])} cpu sim {c['simulated_s']} "
                    f"gpu sim {g['simulated_s']} ratio {ratio:.2f} cost {c['cost']} {g['cost']} "
                    f"wall {c['wall_s']:.1f} {g['wall_s']:.1f} {c['stderr']}{g['stderr']}"
                )
                if args.agents:
                    ca, ga = c["agents"], g["agents"]
                    for a in sorted(ca, key=lambda x: -ca[x]["clock_s"]):
                        print(
                            f"  {a:>5} sep {len(ca[a]['separator'])} compute "
                            f"{ca[a]['compute_s']:.4f} {ga.get(a, {}).get('compute_s', 0):.4f} "
                            f"clock {ca[a]['clock_s']:.4f} {ga.get(a, {}).get('clock_s', 0):.4f}"
                        )
                report.append({"row": row, "pipeline": int(k), **got})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mbdpop_agents.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
