"""``dcop-agent``: one agent process. Reads peers.json, opens its sockets, runs :class:`Agent`.

Exit codes: 0 stopped after delivering a result; 1 failed (reported to the coordinator when it
could be reached); 2 bad arguments or input; 3 stopped before finishing (another agent failed).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from typing import Any

import numpy as np

from dcop.agents.agent import FAULTS, Agent, AgentConfig
from dcop.errors import BackendUnavailable, DcopError, InputError
from dcop.protocol import (
    COORDINATOR_ID,
    MAX_FRAME_BYTES,
    PEER_TIMEOUT_S,
    Error,
    encode,
    peer_timeout_for,
)
from dcop.protocol.curve import CurveConfig, load_keypair
from dcop.protocol.peers import AgentEntry, Peers, load_peers

log = logging.getLogger("dcop.agents")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dcop-agent", description="Run one DPOP/ADPOP agent.")
    p.add_argument("--id", type=int, required=True, help="this agent's id in peers.json")
    p.add_argument("--peers", required=True, help="peers.json")
    p.add_argument(
        "--problem",
        help="read this agent's variable and tables from the problem file "
        "(default: receive them from the coordinator)",
    )
    p.add_argument(
        "--gpu",
        type=int,
        metavar="DEVICE",
        help="CuPy backend on this CUDA device, on the agent's own non-blocking stream",
    )
    p.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    p.add_argument(
        "--peer-timeout",
        type=float,
        default=None,
        help="seconds of silence before a neighbour or the coordinator counts as dead "
        f"(default {PEER_TIMEOUT_S:g}, longer with a --max-frame-bytes above 256 MiB)",
    )
    p.add_argument(
        "--max-frame-bytes",
        type=int,
        default=MAX_FRAME_BYTES,
        help="largest message this agent sends or accepts, in bytes (default 256 MiB; "
        "every agent of a run needs the same value)",
    )
    p.add_argument("--secure", action="store_true", help="CurveZMQ on every socket")
    p.add_argument("--keys", help="directory holding agent-<id>.key_secret (with --secure)")
    p.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--fault", choices=FAULTS, help=argparse.SUPPRESS)  # fault-injection tests
    return p


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
    allowed = frozenset(str(table[n].public_key).encode() for n in entry.neighbours)
    return CurveConfig(public, secret, server_keys, allowed)


def _backend(gpu: int | None) -> Any:
    from dcop.backend import get_backend

    if gpu is None:
        return get_backend("numpy")
    try:
        import cupy  # only with --gpu; dcop.gpu needs it anyway
    except ImportError as exc:
        raise BackendUnavailable(f"--gpu needs CuPy: pip install 'dcop[gpu]' ({exc})") from None
    try:
        with cupy.cuda.Device(gpu):
            # the agent's own non-blocking stream: its joins never wait on other work
            stream = cupy.cuda.Stream(non_blocking=True)
    except Exception as exc:  # CUDA raises its own error types for a missing device or driver
        raise BackendUnavailable(f"--gpu {gpu}: no usable CUDA device ({exc})") from None
    return get_backend("cupy", device=gpu, stream=stream)


def _local_part(path: str, entry: AgentEntry, peers: Peers) -> tuple[list[Any], int, Any]:
    """This agent's tables, domain size and table dtype from the problem file, checked against
    peers.json. The dtype is chosen from the whole problem, as the coordinator does."""
    from dcop.io import read_problem
    from dcop.tables import choose_dtype

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
    tables = [t for t in problem.tables if entry.variable in t.scope]
    return tables, var.size, choose_dtype(problem)


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format=f"dcop-agent {args.id}: %(levelname)s %(message)s",
    )
    try:
        peers = load_peers(args.peers)
        entry = peers.agent(args.id)
        curve = curve_config(peers, entry, args.keys) if args.secure else None
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
        args.max_frame_bytes,
    )
    code = 1
    try:
        transport.open()
        local, domain, dtype = (
            _local_part(args.problem, entry, peers) if args.problem else (None, None, np.float64)
        )
        config = AgentConfig(
            entry.id,
            entry.variable,
            {n: table[n].variable for n in entry.neighbours},
            timeout_s=args.timeout,
            peer_timeout_s=(
                peer_timeout_for(args.max_frame_bytes)
                if args.peer_timeout is None
                else args.peer_timeout
            ),
            max_frame_bytes=args.max_frame_bytes,
            host=socket.gethostname(),
            fault=args.fault,
        )
        agent = Agent(config, transport, _backend(args.gpu), local, domain, local_dtype=dtype)
        code = agent.run()
    except DcopError as exc:
        reason = f"agent {entry.id} ({entry.variable}): {exc}"
        log.error("%s", reason)
        transport.send(COORDINATOR_ID, encode(entry.id, COORDINATOR_ID, Error(reason)))
        code = 1
    finally:
        transport.close()
    sys.exit(code)


if __name__ == "__main__":
    main()
