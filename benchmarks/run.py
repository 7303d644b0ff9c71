#!/usr/bin/env python
"""dcop's evaluation suites: the paper's experiments and side-by-side runs of other tools.

    python benchmarks/run.py SUITE [--seeds N] [--time-limit S] [--mem-limit GB]
                             [--pydcop PATH] [--frodo PATH] [--out DIR] [--quick]

Suites: wcsp, wcsp-extra, uai, dpop-vs-pydcop, dpop-vs-frodo, dpop-maxdiscsp, random, scalefree,
scalefree-m5, grid, mbe, startup (``all`` runs the CPU suites one after the other). Each writes
``benchmarks/results/<suite>.json`` and ``.md`` with the machine description.

The suites that are scripts of their own (:data:`SCRIPT_SUITES`: ``cpu-be``, ``gpu-be``, ``pr``,
``distributed``, ...) run as ``python benchmarks/run.py NAME [THE SCRIPT'S ARGS]``; only so do
they write to ``benchmarks/results/`` (through :func:`keep.write_results`, which stamps the
machine block, the command and the date). Everything else is a probe: its output is not kept. Every instance runs in its own process under the time limit and an
address-space limit and is reported as ``oot`` / ``oom`` when it exceeds them, never a crash.

``--pydcop`` is a pyDCOP installation (a venv whose ``bin/`` has ``dcop_cli.py``); ``--frodo`` a
directory with FRODO 2.18.1 built from source (``frodo2.jar`` or ``classes/``, its ``lib/*.jar``
and ``agents/``). Neither is part of this repository.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare.context import Context, shell_join

RESULTS = Path(__file__).resolve().parent / "results"


# suite name -> (module, function): in compare/, or a script of its own beside this one
SUITES = {
    "wcsp": ("compare.central", "suite_wcsp"),
    "wcsp-extra": ("compare.central", "suite_wcsp_extra"),
    "uai": ("compare.central", "suite_uai"),
    "random": ("compare.topology", "suite_random"),
    "scalefree": ("compare.topology", "suite_scalefree"),
    "scalefree-m5": ("compare.topology", "suite_scalefree_m5"),
    "grid": ("compare.topology", "suite_grid"),
    "mbe": ("compare.topology", "suite_mbe"),
    "dpop-vs-pydcop": ("compare.distributed_cmp", "suite_pydcop"),
    "dpop-vs-frodo": ("compare.distributed_cmp", "suite_frodo"),
    "dpop-maxdiscsp": ("compare.distributed_cmp", "suite_maxdiscsp"),
    "startup": ("startup", "suite_startup"),
}


def suite_function(name: str) -> Callable[[Context], dict[str, Any]]:
    """Import a suite's module only when it runs (the others may need tools not installed)."""
    import importlib

    module, func = SUITES[name]
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


SUITE_NAMES = tuple(SUITES)

#: The suites that are scripts of their own: name -> (script in benchmarks/, the files it keeps in
#: benchmarks/results/). ``python benchmarks/run.py NAME [ARGS]`` runs the script with ARGS; it
#: writes through :func:`keep.write_results`, which stamps every file.
SCRIPT_SUITES: dict[str, tuple[str, tuple[str, ...]]] = {
    "agent-cpu": ("agent_cpu.py", ("agent_cpu.json", "agent_cpu.md")),
    "agent-dirty": ("agent_dirty.py", ("agent_dirty.json", "agent_dirty.md")),
    "agent-floor": (
        "agent_floor.py",
        ("agent_floor.json", "agent_floor.md", "agent_floor_scale.json", "agent_floor_scale.md"),
    ),
    "agent-memory": ("agent_memory.py", ("agent_memory.json", "agent_memory.md")),
    "agent-phases": ("agent_phases.py", ("agent_phases.json", "agent_phases.md")),
    "cpu-be": ("cpu_be.py", ("cpu_be.json", "cpu_be.md")),
    "deadline": (
        "deadline.py",
        ("deadline.json", "deadline.md", "deadline_cupy.json", "deadline_cupy.md"),
    ),
    "deploy": ("deploy_bench.py", ("deploy.json", "deploy.md")),
    "distributed": (
        "distributed.py",
        (
            "distributed.json",
            "distributed.md",
            "distributed_vs_n.png",
            "distributed_util_size.png",
            "distributed_gpu.json",
            "distributed_gpu.md",
            "distributed_gpu_vs_n.png",
            "distributed_gpu_util_size.png",
        ),
    ),
    "expansion": ("expansion.py", ("expansion.json", "expansion.md")),
    "gpu-be": (
        "gpu_be.py",
        tuple(
            f"{stem}.{ext}"
            for stem in (
                "gpu_be",
                "gpu_be_grid60",
                "gpu_be_tables",
                "gpu_be_tables2",
                "gpu_be_tables60",
                "gpu_be_warmcache",
                "gpu_dpop_large",
            )
            for ext in ("json", "md")
        ),
    ),
    "gpu-dpop": (
        "gpu_dpop.py",
        tuple(
            f"{stem}.{ext}"
            for stem in ("gpu_dpop", "gpu_dpop_small_n", "gpu_ipc_smoke")
            for ext in ("json", "md")
        ),
    ),
    "gpu-kernels": ("gpu_kernels.py", ("gpu_kernels.json", "gpu_kernels.md")),
    "gpu-multi": (
        "gpu_multi.py",
        tuple(
            f"{stem}.{ext}"
            for stem in (
                "gpu_multi",
                "gpu_multi_be",
                "gpu_multi_big",
                "gpu_multi_dpop",
                "gpu_multi_dpop_heavy",
                "gpu_multi_dpop_heavy_x4",
            )
            for ext in ("json", "md")
        ),
    ),
    "mbdpop": (
        "mbdpop.py",
        (
            "mbdpop.json",
            "mbdpop.md",
            "mbdpop_gpu.json",
            "mbdpop_gpu.md",
            "mbdpop_more.json",
            "mbdpop_more.md",
            "mbdpop_r22.json",
            "mbdpop_r22.md",
            "mbdpop_gpu_r22.json",
            "mbdpop_gpu_r22.md",
        ),
    ),
    "orders": ("orders.py", ("orders.json", "orders.md", "orders_width_vs_n.png")),
    "pr": (
        "pr.py",
        tuple(f"{s}.{e}" for s in ("pr", "pr_gpu", "pr_gpu_x4host") for e in ("json", "md")),
    ),
    "pr-distributed": ("pr_distributed.py", ("pr_distributed.json", "pr_distributed.md")),
    "pseudotree": ("pseudotree.py", ("pseudotree.json", "pseudotree.md")),
    "scale": (
        "scale.py",
        (
            "scale.json",
            "scale.md",
            "scale.png",
            "scale_quiet.json",
            "scale_quiet.md",
            "scale_quiet.png",
            "scale_tree.json",
            "scale_tree.md",
            "scale_tree.png",
            "scale_fold.json",
            "scale_fold.md",
            "scale_fold.png",
            "scale_n2000.json",
            "scale_n2000.md",
            "scale_n2000.png",
        ),
    ),
    "search": (
        "search.py",
        (
            "search.json",
            "search.md",
            "search.png",
            "search_gpu.json",
            "search_gpu.md",
            "search_gpu.png",
            "search_gpu_reach.json",
            "search_gpu_reach.md",
            "search_gpu_reach.png",
            "search_anytime.json",
            "search_anytime.md",
            "search_anytime_promedas.json",
            "search_anytime_promedas.md",
        ),
    ),
    "serving": ("serving.py", ("serving.json", "serving.md")),
    "toulbar2-settings": (
        "toulbar2_settings.py",
        (
            "toulbar2_settings.json",
            "toulbar2_settings.md",
            "toulbar2_settings_generated.json",
            "toulbar2_settings_generated.md",
        ),
    ),
    "wire-memory": ("wire_memory.py", ("wire_memory.json", "wire_memory.md")),
    "work-rate": ("work_rate.py", ("work_rate.json", "work_rate.md")),
    "search-rate": ("search_rate.py", ("search_rate.json", "search_rate.md")),
}


def kept_files() -> dict[str, str]:
    """Every file a registered suite keeps in benchmarks/results/ -> the suite."""
    files = {f: name for name, (_, kept) in SCRIPT_SUITES.items() for f in kept}
    for name in SUITE_NAMES:
        stem = name if name == "scalefree-m5" else name.replace("-", "_")
        files.update({f"{stem}.json": name, f"{stem}.md": name})
    # the random suite at five seeds beside its default (--seeds 5 --out elsewhere, kept by hand)
    files.update({"random_5seeds.json": "random", "random_5seeds.md": "random"})
    # run on the device machine (startup.py --gpu, gpu_kernels.py --name gpu_kernels_h200)
    files.update({"startup_gpu.json": "startup", "startup_gpu.md": "startup"})
    files.update({"gpu_kernels_h200.json": "gpu-kernels", "gpu_kernels_h200.md": "gpu-kernels"})
    return files


def run_script(name: str, args: list[str]) -> int:
    """Run the registered script suite ``name`` with ``args``, its results stamped."""
    import os
    import runpy

    from keep import SUITE_ENV

    script = Path(__file__).resolve().parent / SCRIPT_SUITES[name][0]
    os.environ[SUITE_ENV] = json.dumps([name, *args])
    sys.argv = [str(script), *args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        os.environ.pop(SUITE_ENV, None)
    return 0


def worker(task_path: str, result_path: str) -> int:
    """Run one task of ``compare.tasks`` and write its result (called in an isolated process)."""
    from compare.tasks import TASKS

    task = json.loads(Path(task_path).read_text())
    try:
        result = TASKS[task["kind"]](task)
        code = 0
    except MemoryError as exc:
        result, code = {"status": "oom", "error": f"MemoryError: {exc}"[:300]}, 3
    except Exception as exc:  # reported in the results, never a crash of the suite
        name = type(exc).__name__
        status = "oom" if name == "TableTooLarge" else "error"
        result = {"status": status, "error": f"{name}: {exc}"[:300]}
        code = 3 if status == "oom" else 4
        if status == "error":
            traceback.print_exc()
    Path(result_path).write_text(json.dumps(result))
    return code


# suites whose report can be rebuilt from their JSON rows (same machine, command and limits)
REPORTS = {
    "wcsp": ("central", "_wcsp_report", "wcsp"),
    "wcsp-extra": ("central", "wcsp_extra_report", "wcsp_extra"),
    "dpop-vs-frodo": ("distributed_cmp", "_frodo_report", "dpop_vs_frodo"),
    "dpop-vs-pydcop": ("distributed_cmp", "_pydcop_report", "dpop_vs_pydcop"),
    "dpop-maxdiscsp": ("distributed_cmp", "_maxdiscsp_report", "dpop_maxdiscsp"),
}

#: options whose value is a folder of this machine: results name a placeholder instead
PLACEHOLDERS = {"--frodo": "FRODO_DIR", "--pydcop": "PYDCOP_VENV"}


def public_command(argv: list[str]) -> str:
    """The command line for the results, with outside folders replaced by placeholders."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        option, eq, _ = arg.partition("=")
        if eq and option in PLACEHOLDERS:
            out.append(f"{option}={PLACEHOLDERS[option]}")
        elif i > 0 and argv[i - 1] in PLACEHOLDERS:
            out.append(PLACEHOLDERS[argv[i - 1]])
        else:
            out.append(arg)
    return shell_join(["python", "benchmarks/run.py", *out])


def rerender(suite: str, out: Path) -> int:
    """Rewrite ``out/<suite>.md`` (and the JSON summary) from the rows already measured."""
    import importlib

    module, func, stem = REPORTS[suite]
    doc = json.loads((out / f"{stem}.json").read_text())
    ctx = Context(
        out_dir=out,
        seeds=doc.get("seeds", 3),
        time_limit=doc["time_limit_s"],
        mem_gb=doc["mem_limit_gib"],
        command=doc["command"],
        _machine=doc["machine"],
    )
    getattr(importlib.import_module(f"compare.{module}"), func)(ctx, doc["rows"])
    print(f"rewrote {out / stem}.md")
    return 0


def main(argv: list[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0] in SCRIPT_SUITES:
        return run_script(given[0], given[1:])
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=f"suites that are scripts of their own (NAME [ARGS]): {', '.join(SCRIPT_SUITES)}",
    )
    parser.add_argument("suite", nargs="?", choices=(*SUITE_NAMES, "all", "plots"))
    parser.add_argument("--seeds", type=int, default=5, help="instances per generated row")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per instance")
    parser.add_argument("--mem-limit", type=float, default=8.0, help="GiB per instance")
    parser.add_argument("--pydcop", type=Path, default=None, help="pyDCOP venv (outside repo)")
    parser.add_argument("--frodo", type=Path, default=None, help="FRODO build dir (outside repo)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--quick", action="store_true", help="fewer rows (smoke run)")
    parser.add_argument(
        "--rerender",
        action="store_true",
        help="rewrite a distributed suite's Markdown from its JSON",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.result)
    if args.suite is None:
        parser.error("a suite is required")
    import os

    from keep import SUITE_ENV

    # the comparison suites keep results too, their outside folders named by placeholders
    os.environ[SUITE_ENV] = json.dumps(shlex.split(public_command(given))[2:])
    if args.rerender:
        if args.suite not in REPORTS:
            parser.error(f"--rerender works for {', '.join(REPORTS)}, not {args.suite}")
        return rerender(args.suite, args.out)
    if args.suite == "plots":
        from compare.plots import make_plots

        for path in make_plots(args.out):
            print(f"wrote {path}")
        return 0
    if args.seeds < 1 or args.time_limit <= 0 or args.mem_limit <= 0:
        parser.error("--seeds, --time-limit and --mem-limit must be positive")
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    names = (
        [n for n in SUITE_NAMES if n not in ("dpop-vs-frodo", "dpop-vs-pydcop", "dpop-maxdiscsp")]
        if (args.suite == "all")
        else [args.suite]
    )
    command = public_command(argv if argv is not None else sys.argv[1:])
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    ) as progress:
        for name in names:
            ctx = Context(
                out_dir=args.out,
                seeds=args.seeds,
                time_limit=args.time_limit,
                mem_gb=args.mem_limit,
                pydcop=args.pydcop,
                frodo=args.frodo,
                quick=args.quick,
                command=command,
                progress=progress,
            )
            try:
                summary = suite_function(name)(ctx)
            finally:
                # generated instances and tool outputs live only for the suite's run
                shutil.rmtree(ctx.work_dir, ignore_errors=True)
            progress.console.log(f"{name}: {json.dumps(summary, default=str)[:400]}")
            progress.console.log(f"wrote {args.out / (name.replace('-', '_') + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
