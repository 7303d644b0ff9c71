"""``dcop peers``, ``dcop coordinator`` and ``dcop run``: distributed DPOP/ADPOP from the shell."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table as RichTable

from dcop.cli.app import app
from dcop.errors import InputError

ProblemFile = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="problem file")]
Algo = Annotated[str, typer.Option("--algo", help="dpop (exact) or adpop (mini-bucket bounds)")]
ZOpt = Annotated[int | None, typer.Option("--z", help="ADPOP mini-bucket size (variables)")]
Timeout = Annotated[float, typer.Option("--timeout", help="seconds for the whole run")]
JsonOut = Annotated[Path | None, typer.Option("--json", help="write the result JSON here")]


def _read(path: Path) -> Any:
    from dcop.io import read_problem

    return read_problem(str(path))


def _check_algo(algo: str, z: int | None) -> None:
    if algo not in ("dpop", "adpop"):
        raise InputError(f"--algo must be dpop or adpop, not {algo!r}")
    if algo == "adpop" and (z is None or z < 1):
        raise InputError("--algo adpop needs --z N (N >= 1)")


@app.command()
def peers(
    file: ProblemFile,
    hosts: Annotated[str, typer.Option("--hosts", help="comma-separated hosts, round-robin")],
    output: Annotated[Path, typer.Option("-o", "--output", help="peers.json to write")],
    base_port: Annotated[int, typer.Option(help="coordinator port; agents use the next ones")] = (
        47000
    ),
    coordinator_host: Annotated[str | None, typer.Option(help="default: the first host")] = None,
    keys: Annotated[
        Path | None, typer.Option(help="key directory: add its public keys (dcop keys generate)")
    ] = None,
) -> None:
    """Assign one agent per variable to hosts and ports and write peers.json."""
    from dcop.coordinator.launch import hosts_list, make_peers
    from dcop.protocol import COORDINATOR_ID
    from dcop.protocol.curve import load_public_key

    problem = _read(file)
    publics = None
    if keys is not None:
        publics = {i: load_public_key(keys, i) for i in [COORDINATOR_ID, *range(problem.n)]}
    result = make_peers(
        problem,
        hosts_list(hosts),
        base_port=base_port,
        coordinator_host=coordinator_host,
        public_keys=publics,
        problem_ref=file.name,
    )
    result.write(output)
    Console(stderr=True).print(
        f"wrote {output}: {problem.n} agents on {len(hosts_list(hosts))} "
        f"host(s), coordinator at {result.coordinator}"
    )


@app.command()
def coordinator(
    peers_file: Annotated[Path, typer.Option("--peers", exists=True, dir_okay=False)],
    problem_file: Annotated[Path, typer.Option("--problem", exists=True, dir_okay=False)],
    algo: Algo = "dpop",
    z: ZOpt = None,
    timeout: Timeout = 300.0,
    hello_timeout: Annotated[float, typer.Option(help="seconds to wait for every hello")] = 120.0,
    json_out: JsonOut = None,
    secure: Annotated[bool, typer.Option(help="CurveZMQ (needs --keys)")] = False,
    keys: Annotated[Path | None, typer.Option(help="directory with coordinator.key_secret")] = None,
) -> None:
    """Drive a run of agents started elsewhere (other hosts, containers) from peers.json."""
    from dcop.coordinator.driver import Coordinator
    from dcop.coordinator.launch import coordinator_curve, write_result
    from dcop.protocol.peers import load_peers
    from dcop.protocol.zmqlink import ZmqCoordinatorTransport

    _check_algo(algo, z)
    problem = _read(problem_file)
    table = load_peers(peers_file)
    if secure and keys is None:
        raise InputError("--secure needs --keys DIR")
    curve = coordinator_curve(table, keys) if secure and keys is not None else None
    transport = ZmqCoordinatorTransport(table.coordinator, curve)
    try:
        result = Coordinator(
            problem, table, transport, algo=algo, z=z, timeout=timeout, hello_timeout=hello_timeout
        ).run()
    finally:
        transport.close()
    if json_out is not None:
        write_result(result, json_out)
    print_summary(result)


@app.command()
def run(
    file: ProblemFile,
    algo: Algo = "dpop",
    z: ZOpt = None,
    gpu: Annotated[bool, typer.Option(help="every agent uses CuPy on its own stream")] = False,
    device: Annotated[int, typer.Option(help="CUDA device for --gpu")] = 0,
    timeout: Timeout = 120.0,
    json_out: JsonOut = None,
    secure: Annotated[bool, typer.Option(help="generate keys and use CurveZMQ")] = False,
    agents_read_file: Annotated[
        bool, typer.Option(help="agents read the problem file instead of receiving their part")
    ] = False,
    workdir: Annotated[Path | None, typer.Option(help="keep peers.json and agent logs here")] = (
        None
    ),
) -> None:
    """Solve FILE with one agent process per variable on this machine (DPOP or ADPOP(z))."""
    from dcop.coordinator.launch import run_local, write_result

    _check_algo(algo, z)
    problem = _read(file)
    result = run_local(
        problem,
        algo,
        z,
        device if gpu else None,
        timeout,
        secure=secure,
        problem_file=file if agents_read_file else None,
        workdir=workdir,
    )
    result["file"] = str(file)
    if json_out is not None:
        write_result(result, json_out)
    print_summary(result)


def _num(x: Any) -> str:
    if x is None:
        return "inf"
    return f"{x:g}" if isinstance(x, float) else str(x)


def print_summary(result: dict[str, Any], console: Console | None = None) -> None:
    """A readable summary: answer, bounds, times and the wire metrics beside the theory."""
    console = console or Console()
    m = result["metrics"]
    th = m["theory"]
    name = result["algo"].upper() + (f"({result['z']})" if result.get("z") else "")
    console.print(
        f"[bold]{name}[/bold] on {result['problem']}: {result['n']} agents, "
        f"{th['trees']} tree(s), roots {', '.join(result['roots'][:5])}"
    )
    if result["exact"]:
        console.print(
            f"cost (recomputed) {_num(result['reported_cost'])}; root's optimum "
            f"{'matches' if result['bound_matches_cost'] else 'DIFFERS'}"
        )
    else:
        console.print(
            f"lower bound {_num(result['lower_bound'])}, upper bound (recomputed cost "
            f"of the assignment) {_num(result['upper_bound'])}"
        )
    console.print(
        f"wall {m['wall_s']:.3f} s (solve {m['solve_wall_s']:.3f} s), simulated "
        f"runtime {m['simulated_runtime_s']:.4f} s, compute total "
        f"{m['compute_s_total']:.4f} s, max per agent {m['compute_s_max']:.4f} s"
    )
    table = RichTable("type", "messages", "bytes", "theory", title="messages on the wire")
    expected = {
        "util": th["util_messages"],
        "value": th["value_messages"],
        "token": th["token_messages"],
        "degree": th["degree_messages"],
    }
    for kind, count in m["messages"].items():
        table.add_row(kind, str(count), str(m["bytes"].get(kind, 0)), str(expected.get(kind, "")))
    table.add_row("total", str(m["total_messages"]), str(m["total_bytes"]), "")
    console.print(table)
    console.print(
        f"largest UTIL message {m['largest_util_bytes']} bytes, "
        f"{m['largest_util_entries']} entries (theory d^|sep|: "
        f"{th['largest_util_entries']}); max separator {th['max_separator']}"
    )
    assignment = result["labels"]
    shown = ", ".join(f"{k}={v}" for k, v in list(assignment.items())[:12])
    console.print(f"assignment: {shown}{' ...' if len(assignment) > 12 else ''}")
