"""``dcop peers``, ``dcop coordinator`` and ``dcop run``: distributed DPOP/ADPOP from the shell.

The run's parameters become one :class:`~dcop.protocol.RunSpec` here, at the edge, and travel
unchanged to every agent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from dcop.cli.app import app
from dcop.cli.common import DistributedAlgo, JsonOption, failure_document, finish_run
from dcop.errors import InputError
from dcop.model import Problem
from dcop.protocol import DEFAULT_MAX_MESSAGE_BYTES, RunSpec
from dcop.protocol.constants import MAX_MESSAGE_MIB
from dcop.protocol.runspec import MIB
from dcop.results import Status

#: Default ports of ``dcop peers``: below the kernel's ephemeral range (32768 and up on Linux),
#: where an outgoing connection never takes them (a socket could otherwise connect to itself).
DEFAULT_BASE_PORT = 7000

ProblemFile = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="problem file")]
Algo = Annotated[DistributedAlgo, typer.Option("--algo", help="dpop (exact) or adpop (bounds)")]
ZOpt = Annotated[int | None, typer.Option("--z", help="ADPOP mini-bucket size (variables)")]
Timeout = Annotated[float, typer.Option("--timeout", help="seconds for the whole run")]
MaxMessage = Annotated[
    float,
    typer.Option(
        "--max-message-mib",
        help="largest message of the run in MiB (UTIL tables above it fail the run); "
        f"up to {MAX_MESSAGE_MIB}",
    ),
]
PeerTimeout = Annotated[
    float | None,
    typer.Option(
        "--peer-timeout",
        help="seconds of silence before an agent counts as dead (default: from the message limit)",
    ),
]


def _read(path: Path) -> Problem:
    from dcop.io import read_problem

    return read_problem(str(path))


def _failure(
    algo: str, z: int | None, file: Path, read: dict[str, Problem]
) -> Callable[[Status, str], dict[str, Any]]:
    """The document of a run that ended without an answer (the problem, if it was read)."""

    def failure(status: Status, message: str) -> dict[str, Any]:
        return failure_document(
            status, message, algo=algo, z=z, file=str(file), problem=read.get("problem")
        )

    return failure


@app.command()
def peers(
    file: ProblemFile,
    hosts: Annotated[str, typer.Option("--hosts", help="comma-separated hosts, round-robin")],
    output: Annotated[Path, typer.Option("-o", "--output", help="peers.json to write")],
    base_port: Annotated[
        int, typer.Option(help="coordinator port; agents use the next ones on each host")
    ] = DEFAULT_BASE_PORT,
    coordinator_host: Annotated[str | None, typer.Option(help="default: the first host")] = None,
    keys: Annotated[
        Path | None, typer.Option(help="key directory: add its public keys (dcop keys generate)")
    ] = None,
) -> None:
    """Assign one agent per variable to hosts and ports and write peers.json."""
    from dcop.coordinator.launch import hosts_list
    from dcop.coordinator.topology import endpoint_of, peers_for, round_robin
    from dcop.protocol import COORDINATOR_ID
    from dcop.protocol.curve import load_public_key

    problem = _read(file)
    names = hosts_list(hosts)
    publics = None
    if keys is not None:
        publics = {i: load_public_key(keys, i) for i in [COORDINATOR_ID, *range(problem.n)]}
    coordinator_at, endpoint = round_robin(names, base_port)
    if coordinator_host is not None:
        coordinator_at = endpoint_of(coordinator_host, base_port)
    result = peers_for(problem, coordinator_at, endpoint, publics, problem_ref=file.name)
    result.write(output)
    Console(stderr=True).print(
        f"wrote {output}: {problem.n} agents on {len(names)} host(s), coordinator at "
        f"{result.coordinator}"
    )


@app.command()
def coordinator(
    peers_file: Annotated[Path, typer.Option("--peers", exists=True, dir_okay=False)],
    problem_file: Annotated[Path, typer.Option("--problem", exists=True, dir_okay=False)],
    algo: Algo = DistributedAlgo.dpop,
    z: ZOpt = None,
    timeout: Timeout = 300.0,
    hello_timeout: Annotated[float, typer.Option(help="seconds to wait for every hello")] = 120.0,
    json_out: JsonOption = None,
    secure: Annotated[bool, typer.Option(help="CurveZMQ (needs --keys)")] = False,
    keys: Annotated[Path | None, typer.Option(help="directory with coordinator.key_secret")] = None,
    peer_timeout: PeerTimeout = None,
    max_message_mib: MaxMessage = DEFAULT_MAX_MESSAGE_BYTES / MIB,
) -> None:
    """Drive a run of agents started elsewhere (other hosts, containers) from peers.json."""
    read: dict[str, Problem] = {}

    def produce() -> tuple[dict[str, Any], Callable[[Console], None]]:
        from dcop.coordinator.driver import Coordinator
        from dcop.coordinator.keys import coordinator_curve
        from dcop.coordinator.report import print_summary
        from dcop.protocol.peers import load_peers
        from dcop.protocol.zmqlink import ZmqCoordinatorTransport

        spec = RunSpec.from_options(algo.value, z, max_message_mib, peer_timeout)
        read["problem"] = problem = _read(problem_file)
        table = load_peers(peers_file)
        if secure and keys is None:
            raise InputError("--secure needs --keys DIR")
        curve = coordinator_curve(table, keys) if secure and keys is not None else None
        transport = ZmqCoordinatorTransport(
            table.coordinator, curve, spec.max_message_bytes, agents=[a.id for a in table.agents]
        )
        try:
            run = Coordinator(
                problem, table, transport, spec, timeout=timeout, hello_timeout=hello_timeout
            ).run()
        finally:
            transport.close()
        doc = run.to_json()
        doc["file"] = str(problem_file)
        return doc, lambda console: print_summary(run, console)

    finish_run(produce, json_out, _failure(algo.value, z, problem_file, read))


@app.command()
def run(
    file: ProblemFile,
    algo: Algo = DistributedAlgo.dpop,
    z: ZOpt = None,
    gpu: Annotated[bool, typer.Option(help="every agent uses CuPy on its own stream")] = False,
    device: Annotated[int, typer.Option(help="CUDA device for --gpu")] = 0,
    timeout: Timeout = 120.0,
    json_out: JsonOption = None,
    secure: Annotated[bool, typer.Option(help="generate keys and use CurveZMQ")] = False,
    agents_read_file: Annotated[
        bool,
        typer.Option(help="agents read the problem file and check it against the coordinator's"),
    ] = False,
    workdir: Annotated[
        Path | None, typer.Option(help="keep peers.json and agent logs here")
    ] = None,
    peer_timeout: PeerTimeout = None,
    max_message_mib: MaxMessage = DEFAULT_MAX_MESSAGE_BYTES / MIB,
) -> None:
    """Solve FILE with one agent process per variable on this machine (DPOP or ADPOP(z))."""
    read: dict[str, Problem] = {}

    def produce() -> tuple[dict[str, Any], Callable[[Console], None]]:
        from dcop.coordinator.launch import run_local
        from dcop.coordinator.report import print_summary

        spec = RunSpec.from_options(algo.value, z, max_message_mib, peer_timeout)
        read["problem"] = problem = _read(file)
        result = run_local(
            problem,
            spec,
            gpu=device if gpu else None,
            timeout=timeout,
            secure=secure,
            problem_file=file if agents_read_file else None,
            workdir=workdir,
        )
        doc = result.to_json()
        doc["file"] = str(file)
        return doc, lambda console: print_summary(result, console)

    finish_run(produce, json_out, _failure(algo.value, z, file, read))
