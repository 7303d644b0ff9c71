"""``dcop deploy compose|hosts`` and ``dcop keys generate``: write deployments, provision keys."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dcop.cli.app import app
from dcop.cli.common import (
    DistributedAlgo,
    LogLevel,
    check_output_dir,
    check_outputs,
)
from dcop.cli.options import (
    BasePortOption,
    DistributedAlgoOption,
    GpuOption,
    InputFile,
    LogOption,
    MaxMessageOption,
    PeerTimeoutOption,
    ZOption,
    check_z,
    parse_gpu,
)
from dcop.errors import InputError
from dcop.protocol import DEFAULT_MAX_MESSAGE_BYTES, RunSpec
from dcop.protocol.runspec import MIB

deploy_app = typer.Typer(help="Write Docker deployments (one machine, several hosts, Swarm).")
app.add_typer(deploy_app, name="deploy")
keys_app = typer.Typer(help="CurveZMQ key pairs for secure runs.")
app.add_typer(keys_app, name="keys")

OutDir = Annotated[Path, typer.Option("--output", "-o", help="Directory to write.")]
ImageOption = Annotated[str, typer.Option("--image", help="Docker image of dcop.")]
AlgoOption = DistributedAlgoOption
TimeoutOption = Annotated[
    float, typer.Option("--timeout", help="Seconds allowed for the whole run.")
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Write into a non-empty output directory.")
]


def container_gpus(gpu: str | None, count: int) -> int:
    """How many GPUs the agents go round robin over, from ``--gpu`` (read as everywhere by
    :func:`dcop.cli.options.parse_gpu`). Containers number the devices they are given from 0,
    so a list must be 0,1,...,k-1; ``all`` takes ``--gpus`` as the host's count."""
    devices = parse_gpu(gpu)
    if devices is None:
        return 1
    if devices == "all":
        return count
    listed = [int(d) for d in devices.split(",")]
    if listed != list(range(len(listed))):
        raise InputError(
            f"--gpu {gpu}: deployments number each host's GPUs from 0; give 0,1,...,k-1 or all "
            "with --gpus K"
        )
    return len(listed)


def _placement_warnings(path: Path) -> None:
    """What the file's agents section wants that one agent per variable cannot honour."""
    from dcop.io import read_problem
    from dcop.io.placement import agent_placement

    _, warnings = agent_placement(read_problem(path))
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)


@deploy_app.command("compose")
def compose_command(
    problem: InputFile,
    output: OutDir,
    gpu: GpuOption = None,
    gpus: Annotated[
        int, typer.Option("--gpus", help="With --gpu all: how many GPUs the host has.")
    ] = 1,
    image: ImageOption = "dcop:latest",
    secure: Annotated[
        bool, typer.Option("--secure", help="CurveZMQ on every socket (keys in DIR/keys).")
    ] = False,
    algo: AlgoOption = DistributedAlgo.dpop,
    z: ZOption = None,
    timeout: TimeoutOption = 300.0,
    peer_timeout: PeerTimeoutOption = 30.0,
    max_message_mib: MaxMessageOption = DEFAULT_MAX_MESSAGE_BYTES / MIB,
    log_level: LogOption = LogLevel.WARNING,
    force: ForceOption = False,
) -> None:
    """One machine: docker-compose.yml with a coordinator and one container per agent."""
    from dcop.deploy.compose import ComposeOptions, write_compose

    options = ComposeOptions(
        image=image,
        gpu=gpu is not None,
        gpus=container_gpus(gpu, gpus),
        secure=secure,
        spec=RunSpec.from_options(
            algo.value, check_z(algo.value, z), max_message_mib, peer_timeout
        ),
        timeout_s=timeout,
        log_level=log_level.value,
    )
    check_output_dir(output, "--output")
    peers = write_compose(problem, output, options, force=force)
    _placement_warnings(problem)
    typer.echo(
        f"wrote {output}/docker-compose.yml ({len(peers.agents)} agents + coordinator"
        f"{', CURVE' if secure else ''}{', GPU' if gpu else ''}) and {output}/stack.yml\n"
        f"run: cd {output} && docker-compose up --abort-on-container-exit"
        f"  (result: {output}/results/result.json)"
    )


@deploy_app.command("hosts")
def hosts_command(
    problem: InputFile,
    hosts: Annotated[str, typer.Option("--hosts", help="Comma-separated host names or addresses.")],
    output: OutDir,
    coordinator_host: Annotated[
        str | None,
        typer.Option("--coordinator-host", help="Host of the coordinator (default: the first)."),
    ] = None,
    base_port: BasePortOption = 7000,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="No CurveZMQ (plain TCP between hosts).")
    ] = False,
    image: ImageOption = "dcop:latest",
    gpu: GpuOption = None,
    gpus: Annotated[
        int, typer.Option("--gpus", help="With --gpu all: how many GPUs each host has.")
    ] = 1,
    algo: AlgoOption = DistributedAlgo.dpop,
    z: ZOption = None,
    timeout: TimeoutOption = 600.0,
    peer_timeout: PeerTimeoutOption = 30.0,
    max_message_mib: MaxMessageOption = DEFAULT_MAX_MESSAGE_BYTES / MIB,
    log_level: LogOption = LogLevel.WARNING,
    force: ForceOption = False,
) -> None:
    """Several hosts: one compose directory per host plus the coordinator's, CURVE by default."""
    from dcop.deploy.hosts import HostsOptions, write_hosts

    names = tuple(h.strip() for h in hosts.split(",") if h.strip())
    options = HostsOptions(
        hosts=names,
        coordinator_host=coordinator_host,
        base_port=base_port,
        secure=not insecure,
        image=image,
        gpu=gpu is not None,
        gpus=container_gpus(gpu, gpus),
        spec=RunSpec.from_options(
            algo.value, check_z(algo.value, z), max_message_mib, peer_timeout
        ),
        timeout_s=timeout,
        log_level=log_level.value,
    )
    check_output_dir(output, "--output")
    peers = write_hosts(problem, output, options, force=force)
    _placement_warnings(problem)
    typer.echo(
        f"wrote {output}: {len(peers.agents)} agents on {len(names)} hosts"
        f"{' (CURVE)' if not insecure else ' (no encryption)'}; copy {output}/<host> to each "
        f"host and run docker-compose up there, then {output}/coordinator on "
        f"{coordinator_host or names[0]}"
    )


#: Most agents ``keys generate`` makes key pairs for: one port each after the coordinator's.
MAX_KEY_AGENTS = 65534


@keys_app.command("generate")
def keys_generate_command(
    directory: Annotated[Path, typer.Argument(help="Directory for the key files.")],
    agents: Annotated[int, typer.Option("--agents", help="Number of agents (ids 0..N-1).")],
    peers: Annotated[
        Path | None,
        typer.Option("--peers", dir_okay=False, help="Write the public keys into this peers.json."),
    ] = None,
) -> None:
    """Key pairs for the coordinator and agents 0..N-1 (pyzmq certificate files)."""
    from dcop.deploy.keys import add_public_keys, generate

    if not 1 <= agents <= MAX_KEY_AGENTS:
        raise InputError(
            f"--agents must be 1..{MAX_KEY_AGENTS} (a host has that many ports for agents), "
            f"not {agents}"
        )
    check_output_dir(directory, "DIRECTORY")
    check_outputs({"--peers": peers})
    publics = generate(directory, agents)
    typer.echo(f"wrote {agents + 1} key pairs to {directory} (secret files are mode 0600)")
    if peers is not None:
        add_public_keys(peers, publics)
        typer.echo(f"added the public keys to {peers}")
