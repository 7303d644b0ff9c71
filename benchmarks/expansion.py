"""Small files that expand: peak RSS against ``--max-memory`` (issue 33, item 5).

Three WCSP files of a few bytes to a few KB whose default-only functions expand to GiBs:

* ``one``: one function of arity ``a`` over binary variables, given by its default alone (145
  bytes at a = 27);
* ``many``: 300 functions of arity ``a - 7`` (arity 20 at a = 27), default only;
* ``sixteen``: 16 functions of arity ``a - 3`` (arity 24), a few tuples each.

Each row runs one command (``solve``, ``batch --algo auto``, ``run``, and ``solve --task pr``
on a UAI twin of ``one`` at arity 20 at most) under ``--max-memory`` and records the peak RSS
of any one process of its tree (see :func:`measure`) against the limit: at most 1.1x, or the
command refused the run (too_large) before it grew. ``python benchmarks/expansion.py --arity 27``
runs the issue's sizes (about 1.2 GB each); the tests run it at a = 21.

Writes ``benchmarks/results/expansion.json`` and ``.md`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: The largest peak RSS a row may reach, as a multiple of its --max-memory.
CAP_FACTOR = 1.1


def wcsp_one(arity: int) -> str:
    """One default-only function of ``arity`` binary variables (costs 1: feasible)."""
    scope = " ".join(str(i) for i in range(arity))
    return f"one {arity} 2 1 1000\n{' '.join(['2'] * arity)}\n{arity} {scope} 1 0\n"


def wcsp_many(arity: int, count: int = 300, n: int | None = None) -> str:
    """``count`` default-only functions of ``arity`` over ``n`` binary variables (default
    ``arity + 1``: each misses one variable, the inputs make the peak)."""
    n = n if n is not None else arity + 1
    lines = [f"many {n} 2 {count} 100000", " ".join(["2"] * n)]
    for k in range(count):
        scope = [(k + i) % n for i in range(arity)]
        lines.append(f"{arity} {' '.join(map(str, sorted(scope)))} {k % 3} 0")
    return "\n".join(lines) + "\n"


def wcsp_sixteen(arity: int, count: int = 16) -> str:
    """``count`` functions of ``arity`` over ``arity + 2`` binary variables, a tuple each."""
    n = arity + 2
    lines = [f"sixteen {n} 2 {count} 100000", " ".join(["2"] * n)]
    for k in range(count):
        scope = sorted({(k + i) % n for i in range(arity)})
        lines.append(f"{arity} {' '.join(map(str, scope))} 2 1")
        lines.append(" ".join(["0"] * arity) + " 0")
    return "\n".join(lines) + "\n"


def uai_one(arity: int) -> str:
    """The UAI twin of ``one`` (all potentials 1: Z = 2^arity), for PR/MAR."""
    entries = 1 << arity
    return (
        f"MARKOV\n{arity}\n{' '.join(['2'] * arity)}\n1\n{arity} "
        + " ".join(map(str, range(arity)))
        + f"\n\n{entries}\n"
        + " ".join(["1"] * entries)
        + "\n"
    )


def write_files(folder: Path, arity: int) -> dict[str, Path]:
    """The expansion files for ``arity`` (the issue's sizes at 27), by name."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = {
        "one.wcsp": wcsp_one(arity),
        "many.wcsp": wcsp_many(arity - 7),
        "sixteen.wcsp": wcsp_sixteen(arity - 3),
    }
    texts["one.uai"] = uai_one(min(arity, 20))  # a UAI file lists every entry: kept small
    paths = {}
    for name, text in texts.items():
        path = folder / name
        path.write_text(text)
        paths[name] = path
    return paths


def limit_for(arity: int) -> int:
    """The --max-memory of the rows (bytes): the issue's 1200 MB at arity 27, scaled with the
    tables below it, plus 48 MiB for the interpreter (negligible at full size)."""
    if arity >= 27:
        return int(1200e6)
    return int(1200e6 / (1 << (27 - arity))) + (48 << 20)


def commands(paths: dict[str, Path], limit: int, folder: Path) -> list[tuple[str, list[str]]]:
    """(label, dcop arguments) of every row."""
    mem = f"{limit // (1 << 20)}M"
    rows: list[tuple[str, list[str]]] = []
    for name in ("one.wcsp", "many.wcsp", "sixteen.wcsp"):
        path = str(paths[name])
        rows.append((f"solve {name}", ["solve", path, "--max-memory", mem, "-q"]))
        rows.append(
            (f"batch auto {name}", ["batch", path, "--algo", "auto", "--max-memory", mem, "-q"])
        )
    rows.append(
        (
            "run one.wcsp",
            ["run", str(paths["one.wcsp"]), "--max-memory", mem, "--max-message-mib", "4095",
             "-q", "--timeout", "120"],
        )
    )  # fmt: skip
    for task in ("pr", "mar"):
        if "one.uai" in paths:
            rows.append(
                (
                    f"solve --task {task} one.uai",
                    ["solve", str(paths["one.uai"]), "--task", task, "--max-memory", mem, "-q"],
                )
            )
    return rows


#: Runs ``argv[2:]`` as its child and writes the child's ``ru_maxrss`` (KiB) to ``argv[1]``. A
#: process's ``ru_maxrss`` starts at the peak of the process it was forked from (the kernel
#: keeps the old memory's high-water mark across exec), so a command forked straight from a
#: large caller (a pytest worker that peaked at 270 MiB) was charged that peak; forked from this
#: small runner it is charged its own.
RUNNER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def measure(args: list[str], json_out: Path) -> dict[str, Any]:
    """Run ``dcop ARGS --json json_out``; its exit code, status and the largest RSS any one
    process of its tree reached: the kernel's ``ru_maxrss`` of the command's process (and of
    the processes it waited for), forked from a small runner (see :data:`RUNNER`), and every
    10 ms a look at the whole tree (``batch`` solves in processes forked from a server, which
    ``ru_maxrss`` does not see)."""
    import psutil

    rss_file = json_out.with_name(json_out.name + ".maxrss")
    argv = [sys.executable, "-S", "-c", RUNNER, str(rss_file), sys.executable, "-m", "dcop", *args]
    argv += ["--json", str(json_out)]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampled = 0
    try:
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            for p in tree[1:]:  # the runner itself is not the command
                with contextlib.suppress(psutil.Error):
                    sampled = max(sampled, p.memory_info().rss)
            time.sleep(0.01)
    finally:
        _, err = proc.communicate(timeout=600)
    try:
        waited = int(rss_file.read_text()) * 1024
    except (OSError, ValueError):
        waited = 0
    peak = max(sampled, waited)
    row: dict[str, Any] = {"code": proc.returncode, "peak": peak, "err": err[-400:]}
    row["wall_s"] = round(time.monotonic() - t0, 2)
    try:
        doc = json.loads(json_out.read_text())
    except (OSError, ValueError):
        doc = {}
    rows = doc.get("rows")
    row["status"] = rows[0]["status"] if rows else doc.get("status")
    return row


def run_rows(folder: Path, arity: int) -> list[dict[str, Any]]:
    paths = write_files(folder, arity)
    limit = limit_for(arity)
    out = []
    for label, args in commands(paths, limit, folder):
        row = measure(args, folder / "doc.json")
        row.update(label=label, limit=limit, ratio=round(row["peak"] / limit, 3))
        row["held"] = row["ratio"] <= CAP_FACTOR
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arity", type=int, default=27)
    parser.add_argument("--work", type=Path, default=Path("/tmp/dcop-expansion"))
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    opts = parser.parse_args()
    rows = run_rows(opts.work, opts.arity)
    from benchmarks.compare.machine import machine_info

    doc = {"arity": opts.arity, "cap_factor": CAP_FACTOR, "machine": machine_info(), "rows": rows}
    lines = [
        f"# Expansion files against --max-memory (arity {opts.arity})",
        "",
        "| command | limit | peak RSS | ratio | status | held |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['limit'] / 2**20:.0f} MiB | {r['peak'] / 2**20:.0f} MiB | "
            f"{r['ratio']} | {r['status']} | {'yes' if r['held'] else 'NO'} |"
        )
    from benchmarks.keep import write_results

    write_results(opts.out, "expansion", doc, "\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(0 if all(r["held"] for r in rows) else 1)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
