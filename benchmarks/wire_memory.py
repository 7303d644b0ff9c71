"""Big frames on the wire against an open-mode agent: peak RSS (issue 33, item 3).

An agent transport (open mode, candidate agent 1, the default size limit) listens in a child
process; the attacker opens ``--connections`` connections at once, each sending ``--frames``
frames of ``--size-mib`` MiB, then the child reports its peak RSS. Scenarios:

* ``strangers``: each connection claims an id the agent does not accept (its PLAIN user name
  and routing identity ``<id>/x``): refused at the handshake, no frame is read;
* ``null-clients``: clients that claim nothing (the NULL mechanism): the handshake fails;
* ``forged-neighbour``: each connection claims agent 1, a candidate, under its own nonce: all
  are admitted when they connect at once (the first to speak then keeps the id; the others are
  refused and cut at their first frame, which libzmq has read by then): about one message of the
  size limit per such connection;
* ``one-identity``: every connection uses the same routing identity ``1/x``: each new one takes
  the identity over (ROUTER_HANDOVER) and the one before is dropped with its queue.

``python benchmarks/wire_memory.py`` runs ten connections of one 100 MiB frame (the figure the
issue measured: 524 MB peak for strangers before); the tests run it at a few MiB. Writes
``benchmarks/results/wire_memory.json`` and ``.md`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import zmq

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the checkout's dcop, not an installed one
    sys.path.insert(0, str(ROOT))

from dcop.protocol.zmqlink import claim  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SCENARIOS = ("strangers", "null-clients", "forged-neighbour", "one-identity")

# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so it starts at the parent's RSS
_CHILD = r"""
import sys, time
from dcop.protocol.zmqlink import ZmqAgentTransport
def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
a = ZmqAgentTransport(0, "tcp://127.0.0.1:*", {}, "tcp://127.0.0.1:1", candidates=[1])
a.open()
print(a.endpoint, flush=True)
base = hwm()
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    a.recv(0.1)
print(base, hwm(), a.dropped, a.refused_connections, flush=True)
a.close(0)
"""


def identities(scenario: str, connections: int) -> list[bytes | None]:
    """The routing identity (and PLAIN user name) of each connection; None: a NULL client."""
    if scenario == "strangers":
        return [b"%d/x" % (1000 + k) for k in range(connections)]
    if scenario == "null-clients":
        return [None] * connections
    if scenario == "forged-neighbour":
        return [b"1/forged%d" % k for k in range(connections)]
    if scenario == "one-identity":
        return [b"1/x"] * connections
    raise ValueError(f"unknown scenario {scenario!r}")


def attack(scenario: str, connections: int, frames: int, size_mib: int, hold_s: float) -> dict:
    """One scenario against a fresh agent process; its peak RSS growth and refusals."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(hold_s)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdout is not None
    endpoint = child.stdout.readline().strip()
    ctx: zmq.Context[Any] = zmq.Context()
    big = b"\x81" * (size_mib << 20)
    socks = []  # kept: a collected socket closes its connection
    sent = 0
    try:
        for ident in identities(scenario, connections):
            sock = ctx.socket(zmq.DEALER)
            socks.append(sock)
            if ident is not None:
                claim(sock, ident)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(endpoint)
        for sock in socks:
            for _ in range(frames):
                with contextlib.suppress(zmq.Again):  # refused at the handshake: no link
                    sock.send(big, zmq.NOBLOCK, copy=False)
                    sent += 1
        base_kib, peak_kib, dropped, refused = map(int, child.stdout.readline().split())
        child.wait(30)
    finally:
        ctx.destroy(linger=0)
        if child.poll() is None:
            child.kill()
            child.wait()
    grew = (peak_kib - base_kib) / 1024
    return {
        "scenario": scenario,
        "connections": connections,
        "frames_per_connection": frames,
        "frame_mib": size_mib,
        "frames_queued_by_attacker": sent,
        "base_rss_mib": round(base_kib / 1024, 1),
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "growth_mib": round(grew, 1),
        "growth_in_frames": round(grew / size_mib, 2),
        "refused_frames": dropped,
        "refused_handshakes": refused,
    }


def markdown(doc: dict) -> str:
    lines = [
        "# Big frames against an open-mode agent: peak RSS",
        "",
        f"Command: `{doc['command']}` on {doc['machine']}, {doc['date']}. The machine was "
        "shared with other work (RSS is per process: not disturbed; wall times are).",
        "",
        "An agent transport in open mode (candidate: agent 1) in its own process; the attacker "
        "opens every connection at once, then sends. Growth: peak RSS minus RSS before the "
        "attack; in frames: growth / frame size. See the docstring of "
        "`benchmarks/wire_memory.py`.",
        "",
        "| scenario | connections x frames x MiB | refused handshakes | refused frames | "
        "peak RSS (MiB) | growth (MiB) | growth (frames) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['scenario']} | {r['connections']} x {r['frames_per_connection']} x "
            f"{r['frame_mib']} | {r['refused_handshakes']} | {r['refused_frames']} | "
            f"{r['peak_rss_mib']} | {r['growth_mib']} | {r['growth_in_frames']} |"
        )
    lines += [
        "",
        "Bound in open mode: a connection that claims an id the agent does not accept "
        "(`strangers`) or claims nothing (`null-clients`) is refused at the handshake, before "
        "libzmq reads a frame. Connections that claim an accepted id (a neighbour's or "
        "candidate's, which peers.json names) and connect before that id has spoken can each "
        "make the agent hold about one message of the size limit (`forged-neighbour`); so can "
        "connections that share one identity (`one-identity`; before ROUTER_HANDOVER libzmq "
        "parked each later one unread with up to 64 such messages). Secure mode admits only the "
        "listed keys of neighbours and candidates.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--frames", type=int, default=1, help="frames per connection")
    parser.add_argument("--size-mib", type=int, default=100, help="size of each frame")
    parser.add_argument("--hold-s", type=float, default=8.0, help="how long the agent listens")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--out", type=Path, default=RESULTS / "wire_memory")
    args = parser.parse_args(argv)
    rows = []
    for scenario in args.scenarios.split(","):
        row = attack(scenario, args.connections, args.frames, args.size_mib, args.hold_s)
        print(json.dumps(row), flush=True)
        rows.append(row)
    doc = {
        "command": "python benchmarks/wire_memory.py " + " ".join(argv or sys.argv[1:]),
        "machine": f"{platform.machine()} {platform.system()}, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rows": rows,
    }
    from keep import write_results

    write_results(args.out.parent, args.out.name, doc, markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
