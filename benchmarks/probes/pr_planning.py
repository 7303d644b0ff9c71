"""Probe: where a PR's path search spends its time, against what its budget counts for it.

    python benchmarks/probes/pr_planning.py [--size 28] [--backend cupy] [--rate 1.2e11] [--calls 2]

Plans the contraction of a ±J spin glass ``size`` x ``size`` as ``dcop solve --task pr`` would on
``--backend`` (the search's yardstick is that backend's ``FLOP_RATE``; nothing is contracted, so
no device is needed; ``--rate`` sets that backend's yardstick for the run, e.g. a device's
measured flops/s), and prints per call: each candidate tree's measured seconds (its order,
path and analysis; the ordering engine's call with its budget and the portfolio rounds it ran)
and its predicted contraction seconds; then the whole search's seconds, the chosen tree, its
predicted contraction at the yardstick, and the planning share that contraction would leave.
Run it on the host of a device beside ``benchmarks/startup.py --gpu`` (whose flops/s column is
the device's measured rate) to see which candidates a fast backend cannot afford. Results are
not committed; what was learnt is kept in ``CONCLUSION`` below.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from dcop import generators
from dcop.contraction import engine
from dcop.orders import treedec
from dcop.plan.memory import Limit

#: Measured on the 2-core VM (load 4-7, other sessions' work beside it), 28x28 at CuPy's
#: yardstick (5e10): min-fill's tree 0.05 s, opt_einsum's greedy 0.1 s, the file's orders and
#: min-degree 0.04-0.05 s each, then the ordering engine 0.36-0.54 s for ONE portfolio round
#: (its tree, 1.4e11 cost, is 36x below min-fill's); in all 0.67-1.2 s. On the H200 that tree
#: contracted in about 0.47 s (startup_gpu: 1.1 s calls, 0.64-1.0 s of path search).
#: Then (issue 46's last target) the band order (dcop.orders.greedy.level_order: breadth-first
#: levels from a far variable) gave the engine's very tree (flops 5.64e10) in one pass of 1 ms
#: plus its path and analysis; second, before greedy, with a candidate made only where its
#: predicted cost fits in the share left, at --rate 1.3e11: min-fill's, the band order's and
#: the file order's trees, no greedy, no engine. VM (load 4.4-6.8): 0.107-0.115 s of CPU a
#: search (0.22-0.23 s wall), from 0.50-0.54 s of CPU (0.88-1.06 s wall). H200 host (load 0):
#: 0.215-0.272 s wall, from 0.68-0.85 s; a first PR call there 1.02 s with 0.21 s planning
#: (20 %), from 1.53 s with 0.81 s (53 %); warm calls 0.46-0.52 s both (the same flops).
CONCLUSION = (
    "a 28x28 spin glass's PR on an H200 holds 25 % on its first call without goatd: the band "
    "order's one pass finds the tree the engine's portfolio round found; goatd (it releases "
    "the GIL) stays the candidate for graphs a band order does not fit; later calls take the "
    "kept plan (dcop.plan.reuse)"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--backend", default="cupy", choices=sorted(engine.FLOP_RATE))
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--rate", type=float, help="flops/s of the backend (default: FLOP_RATE)")
    args = parser.parse_args()
    if args.rate:
        engine.FLOP_RATE[args.backend] = args.rate
    rate = engine.FLOP_RATE[args.backend]
    problem = generators.spin_glass(args.size, 1)
    tables = [t for t in problem.tables if t.scope]
    scopes, _ = engine.absorb(
        [tuple(t.scope) for t in tables], [-np.asarray(t.costs, np.float64) for t in tables]
    )
    names = list(problem.variables)
    adjacency = engine._adjacency(scopes, names)
    steps: list[tuple[str, float, Any]] = []

    def timed(module: Any, name: str) -> None:
        inner = getattr(module, name)

        def call(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            out = inner(*a, **k)
            steps.append((name, time.perf_counter() - t0, None))
            return out

        setattr(module, name, call)

    for name in ("optimizer_path", "order_path", "analyse", "elimination_order", "level_order"):
        timed(engine, name)
    rounds = treedec.Decomposer.run

    def run(self: Any, method: str, seed: int = 0, sample: bool = False) -> Any:
        t0 = time.perf_counter()
        out = rounds(self, method, seed, sample)
        steps.append((f"goatd {method} seed {seed}", time.perf_counter() - t0, None))
        return out

    treedec.Decomposer.run = run  # type: ignore[method-assign]
    print(f"{args.size}x{args.size} spin glass, {args.backend} yardstick {rate:.2g} flops/s")
    print(f"search cost model: {engine.search_cost(scopes)}")
    for call in range(args.calls):
        steps.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        plan = engine.plan_contraction(
            scopes, problem.domain_sizes(), adjacency, names, "pr", Limit(1e15, "-"), 4, rate=rate
        )
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        # the CPU seconds too: on a shared machine the wall clock counts other processes' turns
        print(f"call {call}: search {seconds:.3f} s ({cpu:.3f} s of CPU)")
        for name, step_s, _ in steps:
            print(f"    {name:28s} {step_s:.4f} s")
        for name, cand in plan.candidates.items():
            print(
                f"    tree {name:23s} predicted {cand['cost'] / rate:.3f} s "
                f"(flops {cand['flops']:.3g}, cost {cand['cost']:.3g})"
            )
        # the yardstick counts flops and the writes (TreeStats.cost); a device's measured rate
        # is of flops alone, so the flops predict its contraction
        predicted = plan.stats.flops / rate
        share = seconds / (seconds + predicted)
        print(
            f"    chosen {plan.source}: flops {plan.stats.flops:.3g} ({predicted:.3f} s at the "
            f"rate), planning share {share:.0%}"
        )


if __name__ == "__main__":
    main()
