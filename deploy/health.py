"""Container health check: is a TCP port of this network namespace listening?

It reads ``/proc/net/tcp{,6}`` instead of connecting, so the check never opens a connection to
the agent's ZMQ socket (a CURVE socket would see a stranger, and a plain one a garbage frame).
Compose files run :data:`CHECK` with ``python3 -I -S -c``: no imports beyond ``sys``, so the check
costs milliseconds even when many containers share two cores (importing dcop would take seconds).
``python -m dcop.deploy.health PORT`` is the same check from a shell.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: The kernel's state code for LISTEN in /proc/net/tcp.
_LISTEN = "0A"

#: The check as a one-line program: ``python3 -I -S -c CHECK PORT`` exits 0 when PORT listens.
CHECK = (
    "import sys\n"
    "p = ':%04X' % int(sys.argv[1])\n"
    "def rows(f):\n"
    "    try:\n"
    "        return open(f).read().splitlines()[1:]\n"
    "    except OSError:\n"
    "        return []\n"
    "sys.exit(0 if any(r.split()[1].endswith(p) and r.split()[3] == '0A'\n"
    "                  for f in ('/proc/net/tcp', '/proc/net/tcp6') for r in rows(f)) else 1)\n"
)


def listening_ports(tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> set[int]:
    """The TCP ports with a socket in LISTEN state."""
    ports: set[int] = set()
    for table in tables:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:  # no IPv6 in this namespace
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == _LISTEN:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def main(argv: list[str] | None = None) -> int:
    """``python -m dcop.deploy.health PORT``: the container health check; returns the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m dcop.deploy.health PORT", file=sys.stderr)
        return 2
    return 0 if int(args[0]) in listening_ports() else 1


if __name__ == "__main__":
    sys.exit(main())
