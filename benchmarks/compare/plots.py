"""PNG plots from the results JSON files (matplotlib, the ``bench`` extra).

    python benchmarks/run.py plots

reads ``benchmarks/results/*.json`` and writes ``benchmarks/plots/*.png``: dcop vs toulbar2 time
per instance, MBE/ADPOP bound quality vs z, BE/DPOP time vs n per topology, DPOP vs pyDCOP /
FRODO, and the GPU/CPU speedup vs w* per topology. A plot whose results file is missing is
skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PLOTS = Path(__file__).resolve().parents[1] / "plots"


def _load(results: Path, name: str) -> dict[str, Any] | None:
    f = results / f"{name}.json"
    return json.loads(f.read_text()) if f.exists() else None


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) else None


def _save(fig: Any, out: Path, stem: str) -> Path:
    """Lay out, write ``out/<stem>.png`` and free the figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = out / f"{stem}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _machine(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    return f"{m['cpu']}, {m['cores']} cores"


def plot_toulbar2(results: Path, out: Path) -> Path | None:
    """Per instance: dcop BE time and toulbar2 time (log scale), one panel per suite (WCSP,
    further WCSP, UAI); a name ending in * is one toulbar2 did not prove optimal in time."""
    import matplotlib.pyplot as plt

    docs = [(n, _load(results, n)) for n in ("wcsp", "wcsp_extra", "uai")]
    docs = [(n, d) for n, d in docs if d]
    if not docs:
        return None
    fig, axes = plt.subplots(1, len(docs), figsize=(7 * len(docs), 5.5), squeeze=False)
    for ax, (name, doc) in zip(axes[0], docs, strict=True):
        names, be, tb = [], [], []
        for r in doc["rows"]:
            unproved = r["toulbar2"].get("proved_optimal") is False
            names.append(r["instance"].rsplit(".", 1)[0] + ("*" if unproved else ""))
            be.append(
                _num(r["be"].get("read_s", 0) + r["be"].get("solve_s", 0))
                if r["be"].get("status") == "ok"
                else None
            )
            tb.append(
                _num(r["toulbar2"].get("read_s", 0) + r["toulbar2"].get("solve_s", 0))
                if r["toulbar2"].get("status") == "ok"
                else None
            )
        x = range(len(names))
        ax.bar([i - 0.2 for i in x], [v or 0 for v in be], 0.4, label="dcop BE (NumPy)")
        ax.bar([i + 0.2 for i in x], [v or 0 for v in tb], 0.4, label="toulbar2")
        for i, (b, t) in enumerate(zip(be, tb, strict=True)):
            if b is None:
                ax.text(
                    i - 0.2,
                    0.02,  # just above the x axis, whatever the log scale
                    r_status(doc["rows"][i]["be"]),
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="C0",
                    transform=ax.get_xaxis_transform(),
                )
            if t is None:
                ax.text(
                    i + 0.2,
                    0.02,  # just above the x axis, whatever the log scale
                    r_status(doc["rows"][i]["toulbar2"]),
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="C1",
                    transform=ax.get_xaxis_transform(),
                )
        ax.set_yscale("log")
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=75, fontsize=7)
        ax.set_ylabel("read + solve time (s, log)")
        title = {"wcsp": "WCSP", "wcsp_extra": "further WCSP", "uai": "UAI"}[name]
        ax.set_title(f"{title}: dcop BE vs toulbar2\n{_machine(doc)}", fontsize=9)
        ax.legend(fontsize=8)
    return _save(fig, out, "toulbar2_vs_dcop")


def r_status(res: dict[str, Any]) -> str:
    return str(res.get("status", "-"))


def plot_mbe(results: Path, out: Path) -> Path | None:
    """Lower bound / optimum and upper bound / optimum vs z for MBE and ADPOP."""
    import matplotlib.pyplot as plt

    doc = _load(results, "mbe")
    if not doc:
        return None
    series: dict[str, dict[int, list[float]]] = {}
    times: dict[str, dict[int, list[float]]] = {}
    for r in doc["rows"]:
        opt = _num(r.get("optimum"))
        if not opt:
            continue
        for tool in ("mbe", "adpop"):
            res = r[tool]
            if res.get("status") != "ok":
                continue
            lb, ub = _num(res.get("lower_bound")), _num(res.get("recomputed"))
            if lb is not None:
                series.setdefault(f"{tool.upper()} lower / opt", {}).setdefault(r["z"], []).append(
                    lb / opt
                )
            if ub is not None:
                series.setdefault(f"{tool.upper()} upper / opt", {}).setdefault(r["z"], []).append(
                    ub / opt
                )
            t = _num(res.get("solve_s") if tool == "mbe" else res.get("simulated_s"))
            if t is not None:
                times.setdefault(tool, {}).setdefault(r["z"], []).append(t)
    if not series:
        return None
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, by_z in series.items():
        zs = sorted(by_z)
        ax.plot(
            zs,
            [sum(by_z[z]) / len(by_z[z]) for z in zs],
            marker="o",
            label=label,
            linestyle="-" if "lower" in label else "--",
        )
    ax.axhline(1.0, color="k", linewidth=0.8)
    ax.set_xlabel("mini-bucket size z")
    ax.set_ylabel("bound / exact optimum (mean over seeds)")
    ax.set_title("MBE(z) / ADPOP(z) bounds, random n=20 d=25 p1=0.3", fontsize=9)
    ax.legend(fontsize=8)
    for tool, by_z in times.items():
        zs = sorted(by_z)
        ax2.plot(
            zs,
            [sum(by_z[z]) / len(by_z[z]) for z in zs],
            marker="o",
            label=f"{tool.upper()} ({'solve' if tool == 'mbe' else 'simulated'} s)",
        )
    ax2.set_yscale("log")
    ax2.set_xlabel("mini-bucket size z")
    ax2.set_ylabel("time (s, log)")
    ax2.set_title(f"time vs z ({_machine(doc)})", fontsize=9)
    ax2.legend(fontsize=8)
    return _save(fig, out, "mbe_bounds_vs_z")


def plot_topology(results: Path, out: Path) -> Path | None:
    """Time vs n (series `n` of each topology): BE and DPOP here, and the paper's CPU columns."""
    import matplotlib.pyplot as plt

    docs = [(t, _load(results, t)) for t in ("random", "scalefree", "scalefree-m5", "grid")]
    docs = [(t, d) for t, d in docs if d]
    if not docs:
        return None
    fig, axes = plt.subplots(1, len(docs), figsize=(6 * len(docs), 4.5), squeeze=False)
    for ax, (topo, doc) in zip(axes[0], docs, strict=True):
        rows = [r for r in doc["rows"] if r["series"] == "n"]
        xs = [r["paper"][0] for r in rows]
        lines: dict[str, list[float | None]] = {
            "BE ours (solve)": [],
            "DPOP ours (simulated)": [],
            "BE paper CPU": [],
            "DPOP paper CPU": [],
            "BE GPU ours (H100, device machine)": [],
            "DPOP GPU ours (H100, simulated)": [],
        }
        for r in rows:
            be = [x["solve_s"] for x in r["be"] if x.get("status") == "ok"]
            dp = [
                x["simulated_s"]
                for x in r["dpop"]
                if x.get("status") == "ok" and isinstance(x.get("simulated_s"), (int, float))
            ]
            lines["BE ours (solve)"].append(sum(be) / len(be) if len(be) == len(r["be"]) else None)
            lines["DPOP ours (simulated)"].append(
                sum(dp) / len(dp) if dp and len(dp) == len(r["dpop"]) else None
            )
            lines["BE paper CPU"].append(_num(r["paper"][4]))
            lines["DPOP paper CPU"].append(_num(r["paper"][6]))
            lines["BE GPU ours (H100, device machine)"].append(_cell_seconds(r.get("gpu")))
            lines["DPOP GPU ours (H100, simulated)"].append(_cell_seconds(r.get("dpop_gpu")))
        for label, ys in lines.items():
            pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None and y > 0]
            if pts:
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    marker="o",
                    label=label,
                    linestyle="--" if "paper" in label else (":" if "GPU" in label else "-"),
                    color=f"C{list(lines).index(label)}",  # the same colour in every panel
                )
        ax.set_yscale("log")
        ax.set_xlabel("sqrt(n)" if topo == "grid" else "n")
        ax.set_ylabel("time (s, log)")
        ax.set_title(f"{topo}: d=10 ({_machine(doc)})", fontsize=9)
        ax.set_xlabel(("sqrt(n)" if topo == "grid" else "n") + "   (GPU points: all seeds only)")
        ax.legend(fontsize=8)
    return _save(fig, out, "time_vs_n")


def _cell_seconds(cell: Any) -> float | None:
    """A table cell's time in seconds; None for a status word or a row where not every seed
    finished (``0.61 (4/5)``)."""
    if not isinstance(cell, str):
        return _num(cell)
    try:
        return float(cell)  # "0.61 (4/5)" and status words fail here
    except ValueError:
        return None


#: The device machine's BE runs in the CPU suites' order (``gpu_be.py --ordering paper``).
GPU_TABLE_FILES = ("gpu_be_tables", "gpu_be_tables60", "gpu_be_tables2", "gpu_be_grid60")


def plot_speedup_vs_w(results: Path, out: Path) -> Path | None:
    """GPU (CuPy) over CPU (NumPy) BE speedup per instance against its induced width, one marker
    per topology, both measured on the device machine."""
    import matplotlib.pyplot as plt

    points: dict[str, dict[tuple[str, int, int, float, int], tuple[float, float]]] = {}
    gpu_name = ""
    for name in GPU_TABLE_FILES:
        doc = _load(results, name)
        if not doc:
            continue
        gpu_name = doc["meta"]["gpu"]
        for s in doc["series"]:
            label = s["topology"] + (f" (m={s['links']})" if s["topology"] == "scalefree" else "")
            for k, r in enumerate(s["runs"]):
                if "speedup" in r and "w" in r:  # the same instance in two files counts once
                    key = (s["series"], s["n"], s["d"], s["p1"], k)
                    points.setdefault(label, {})[key] = (r["w"], r["speedup"])
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, pts) in enumerate(sorted(points.items())):
        ws, sp = zip(*pts.values(), strict=True)
        ax.scatter(ws, sp, marker="os^vD"[i % 5], label=f"{label} ({len(ws)})", alpha=0.7)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("induced width w* (DFS pseudo-tree order; min-fill on grids)")
    ax.set_ylabel("CPU time / GPU time (log)")
    ax.set_title(f"BE end to end, NumPy vs CuPy, {gpu_name}", fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, out, "speedup_vs_w")


def plot_dcop_tools(results: Path, out: Path) -> Path | None:
    """DPOP wall/solve time vs n: dcop, pyDCOP (process, thread); FRODO per instance."""
    import matplotlib.pyplot as plt

    pyd = _load(results, "dpop_vs_pydcop")
    fro = _load(results, "dpop_vs_frodo")
    if not pyd and not fro:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    if pyd:
        ax = axes[0]
        for tool, key, label in (
            ("dcop", "wall_s", "dcop DPOP wall"),
            ("dcop", "solve_wall_s", "dcop DPOP solve"),
            ("pydcop_process", "wall_s", "pyDCOP process wall"),
            ("pydcop_process", "solve_s", "pyDCOP process solve"),
            ("pydcop_thread", "wall_s", "pyDCOP thread wall"),
        ):
            by_n: dict[int, list[float]] = {}
            for r in pyd["rows"]:
                if r[tool].get("status") == "ok" and _num(r[tool].get(key)) is not None:
                    by_n.setdefault(r["n"], []).append(r[tool][key])
            ns = sorted(by_n)
            if ns:
                ax.plot(
                    ns,
                    [sum(by_n[n]) / len(by_n[n]) for n in ns],
                    marker="o",
                    label=label,
                    linestyle="-" if tool == "dcop" else "--",
                )
        ax.set_yscale("log")
        ax.set_xlabel("n (random, d=10, p1=0.3)")
        ax.set_ylabel("time (s, log; mean of finished seeds)")
        ax.set_title(f"DPOP: dcop vs pyDCOP ({_machine(pyd)})", fontsize=9)
        ax.legend(fontsize=8)
    if fro:
        ax = axes[1]
        names = [r["instance"].rsplit(".", 1)[0].replace("_t0.5", "") for r in fro["rows"]]
        x = range(len(names))
        for off, tool, label in (
            (-0.2, "dcop", "dcop simulated"),
            (0.2, "frodo", "FRODO simulated"),
        ):
            ys = [
                _num(r[tool].get("simulated_s")) if r[tool].get("status") == "ok" else None
                for r in fro["rows"]
            ]
            ax.bar([i + off for i in x], [y or 0 for y in ys], 0.4, label=label)
            for i, y in enumerate(ys):
                if y is None:
                    ax.text(
                        i + off,
                        1e-3,
                        r_status(fro["rows"][i][tool]),
                        rotation=90,
                        ha="center",
                        va="bottom",
                        fontsize=7,
                    )
        ax.set_yscale("log")
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=75, fontsize=6)
        ax.set_ylabel("simulated time (s, log)")
        ax.set_title(f"DPOP: dcop vs FRODO 2.18.1 ({_machine(fro)})", fontsize=9)
        ax.legend(fontsize=8)
    return _save(fig, out, "dpop_vs_tools")


def make_plots(results: Path, out: Path = PLOTS) -> list[Path]:
    """Every plot whose results exist."""
    out.mkdir(parents=True, exist_ok=True)
    made = []
    for fn in (plot_toulbar2, plot_mbe, plot_topology, plot_dcop_tools, plot_speedup_vs_w):
        path = fn(results, out)
        if path is not None:
            made.append(path)
    return made
