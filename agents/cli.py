"""``dcop-agent``: one agent process. Reads peers.json, opens its sockets, runs :class:`Agent`.

Exit codes: 0 stopped after delivering a result; 1 failed (reported to the coordinator when it
could be reached); 2 bad arguments or input; 3 stopped before finishing (another agent failed).
"""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

from dcop.agents.agent import FAULTS, Agent, AgentConfig
from dcop.choices import LogLevel
from dcop.errors import DcopError, InputError
from dcop.model import CostTable
from dcop.protocol import (
    COORDINATOR_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    PEER_TIMEOUT_S,
    Error,
    encode,
)
from dcop.protocol.constants import MAX_MESSAGE_MIB
from dcop.protocol.curve import CurveConfig, load_keypair
from dcop.protocol.peers import AgentEntry, Peers, load_peers
from dcop.protocol.runspec import MIB, MIN_MESSAGE_BYTES, peer_timeout_for
from dcop.tables import TableBackend

log = logging.getLogger("dcop.agents")


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def curve_config(peers: Peers, entry: AgentEntry, keys: str | None) -> CurveConfig:
    """This agent's CURVE settings: own keys from ``keys``, peers' public keys from peers.json."""
    if keys is None:
        raise InputError("--secure needs --keys DIR")
    if not peers.secure or peers.coordinator_public_key is None:
        raise InputError("--secure needs public keys in peers.json")
    public, secret = load_keypair(keys, entry.id)
    table = peers.by_id()
    if entry.public_key is not None and public.decode() != entry.public_key:
        raise InputError(f"the key in {keys} is not agent {entry.id}'s key in peers.json")
    server_keys = {n: str(table[n].public_key).encode() for n in entry.neighbours}
    server_keys[COORDINATOR_ID] = peers.coordinator_public_key.encode()
    clients = {n: str(table[n].public_key).encode() for n in entry.neighbours}
    return CurveConfig(public, secret, server_keys, clients)


def agent_backend(gpu: int | None) -> TableBackend:
    """NumPy, or CuPy on device ``gpu`` with the backend's own non-blocking stream."""
    from dcop.backend import get_backend

    return get_backend("numpy") if gpu is None else get_backend("cupy", device=gpu)


def local_part(path: str, entry: AgentEntry, peers: Peers) -> tuple[list[CostTable], int]:
    """This agent's tables and domain size from the problem file, checked against peers.json."""
    from dcop.io import read_problem

    problem = read_problem(path)
    var = problem.variables.get(entry.variable)
    if var is None:
        raise InputError(
            f"peers.json gives agent {entry.id} variable {entry.variable!r}, "
            f"which the problem does not have",
            path,
        )
    table = peers.by_id()
    listed = {table[n].variable for n in entry.neighbours}
    actual = problem.neighbours()[entry.variable]
    if listed != actual:
        raise InputError(
            f"agent {entry.id} ({entry.variable}): peers.json neighbours "
            f"{sorted(listed)} differ from the problem's {sorted(actual)}",
            path,
        )
    return problem.tables_of(entry.variable), var.size


@app.command()
def agent(
    ident: Annotated[int, typer.Option("--id", help="This agent's id in peers.json.")],
    peers_file: Annotated[
        Path, typer.Option("--peers", dir_okay=False, help="peers.json (who is where).")
    ],
    problem: Annotated[
        Path | None,
        typer.Option(
            dir_okay=False,
            help="Read this agent's variable and tables from the problem file and check them "
            "against the coordinator's (default: receive them from the coordinator).",
        ),
    ] = None,
    gpu: Annotated[
        int | None,
        typer.Option(
            metavar="DEVICE", help="CuPy backend on this CUDA device, on the agent's own stream."
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 300.0,
    peer_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds of silence before a neighbour or the coordinator counts as dead, until "
            f"the run's own setting arrives (default {PEER_TIMEOUT_S:g}, longer with a larger "
            "--max-message-mib)."
        ),
    ] = None,
    max_message_mib: Annotated[
        float,
        typer.Option(
            help="Largest message this agent accepts, in MiB (a run may ask for less, never "
            f"more; up to {MAX_MESSAGE_MIB})."
        ),
    ] = DEFAULT_MAX_MESSAGE_BYTES / MIB,
    secure: Annotated[bool, typer.Option(help="CurveZMQ on every socket.")] = False,
    keys: Annotated[
        str | None, typer.Option(help="Directory holding agent-<id>.key_secret (with --secure).")
    ] = None,
    log_level: Annotated[LogLevel, typer.Option(help="Log level.")] = LogLevel.WARNING,
    fault: Annotated[str | None, typer.Option(hidden=True)] = None,  # fault-injection tests
) -> None:
    """Run one DPOP/ADPOP agent: the variable peers.json gives this id."""
    logging.basicConfig(
        level=log_level.value,
        stream=sys.stderr,
        format=f"dcop-agent {ident}: %(levelname)s %(message)s",
    )
    try:
        if fault is not None and fault not in FAULTS:
            raise InputError(f"--fault must be one of {', '.join(FAULTS)}")
        max_bytes = int(max_message_mib * MIB)
        if not MIN_MESSAGE_BYTES <= max_bytes <= MAX_MESSAGE_MIB * MIB:
            raise InputError(f"--max-message-mib must be between 1 and {MAX_MESSAGE_MIB}")
        peers = load_peers(peers_file)
        entry = peers.agent(ident)
        curve = curve_config(peers, entry, keys) if secure else None
    except DcopError as exc:
        print(f"dcop-agent: error: {exc}", file=sys.stderr)
        sys.exit(2)
    from dcop.protocol.zmqlink import ZmqAgentTransport

    table = peers.by_id()
    transport = ZmqAgentTransport(
        entry.id,
        entry.endpoint,
        {n: table[n].endpoint for n in entry.neighbours},
        peers.coordinator,
        curve,
        max_bytes,
    )
    code = 1
    try:
        transport.open()
        local, domain = (
            local_part(str(problem), entry, peers) if problem is not None else (None, None)
        )
        config = AgentConfig(
            entry.id,
            entry.variable,
            {n: table[n].variable for n in entry.neighbours},
            timeout_s=timeout,
            peer_timeout_s=peer_timeout_for(max_bytes) if peer_timeout is None else peer_timeout,
            max_message_bytes=max_bytes,
            host=socket.gethostname(),
            fault=fault,
        )
        code = Agent(config, transport, agent_backend(gpu), local, domain).run()
    except DcopError as exc:
        reason = f"agent {entry.id} ({entry.variable}): {exc}"
        log.error("%s", reason)
        transport.send(COORDINATOR_ID, encode(entry.id, COORDINATOR_ID, Error(reason)))
        code = 1
    finally:
        transport.close()
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``dcop-agent``)."""
    app(args=argv, prog_name="dcop-agent")


if __name__ == "__main__":
    main()
