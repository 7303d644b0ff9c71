"""``dcop peers``, ``dcop coordinator`` and ``dcop run``: distributed DPOP/ADPOP from the shell."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from dcop.cli.app import app
from dcop.coordinator.report import print_summary
from dcop.errors import InputError

ProblemFile = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="problem file")]
Algo = Annotated[str, typer.Option("--algo", help="dpop (exact) or adpop (mini-bucket bounds)")]
ZOpt = Annotated[int | None, typer.Option("--z", help="ADPOP mini-bucket size (variables)")]
Timeout = Annotated[float, typer.Option("--timeout", help="seconds for the whole run")]
JsonOut = Annotated[Path | None, typer.Option("--json", help="write the result JSON here")]
MaxMessage = Annotated[
    float,
    typer.Option(
        "--max-message-mib",
        help="largest message of the run in MiB (UTIL tables above it fail the run); up to 4095",
    ),
]


def _read(path: Path) -> Any:
    from dcop.io import read_problem

    return read_problem(str(path))


def _frame_bytes(mib: float) -> int:
    """--max-message-mib as bytes: msgpack's bin32 caps one table at 4 GiB."""
    if not 1 <= mib <= 4095:
        raise InputError(f"--max-message-mib must be between 1 and 4095, not {mib:g}")
    return int(mib * 2**20)


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
    peer_timeout: Annotated[
        float | None, typer.Option(help="seconds of silence before an agent counts as dead")
    ] = None,
    max_message_mib: MaxMessage = 256.0,
) -> None:
    """Drive a run of agents started elsewhere (other hosts, containers) from peers.json."""
    from dcop.coordinator.driver import Coordinator
    from dcop.coordinator.launch import coordinator_curve, write_result
    from dcop.protocol.peers import load_peers
    from dcop.protocol.zmqlink import ZmqCoordinatorTransport

    _check_algo(algo, z)
    frame_bytes = _frame_bytes(max_message_mib)
    problem = _read(problem_file)
    table = load_peers(peers_file)
    if secure and keys is None:
        raise InputError("--secure needs --keys DIR")
    curve = coordinator_curve(table, keys) if secure and keys is not None else None
    transport = ZmqCoordinatorTransport(table.coordinator, curve, frame_bytes)
    try:
        from dcop.protocol import peer_timeout_for

        result = Coordinator(
            problem,
            table,
            transport,
            algo=algo,
            z=z,
            timeout=timeout,
            hello_timeout=hello_timeout,
            max_frame_bytes=frame_bytes,
            peer_timeout=peer_timeout_for(frame_bytes) if peer_timeout is None else peer_timeout,
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
    max_message_mib: MaxMessage = 256.0,
) -> None:
    """Solve FILE with one agent process per variable on this machine (DPOP or ADPOP(z))."""
    from dcop.coordinator.launch import run_local, write_result

    _check_algo(algo, z)
    frame_bytes = _frame_bytes(max_message_mib)
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
        max_frame_bytes=frame_bytes,
    )
    result["file"] = str(file)
    if json_out is not None:
        write_result(result, json_out)
    print_summary(result)
