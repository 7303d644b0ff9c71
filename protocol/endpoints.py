"""Endpoints: what to bind, the kernel's ephemeral port range, and "is that me?".

An outgoing TCP connection takes its local port from the kernel's ephemeral range. A process that
listens on a port in that range can find the port taken before it binds; worse, a ZeroMQ socket
that keeps reconnecting to such a port while nobody listens there can be given that very port as
its own local port, and the kernel then connects the socket to itself (TCP simultaneous open): the
port stays taken and the socket talks to itself. Default ports therefore lie below the range
(:data:`~dcop.protocol.constants.DEFAULT_COORDINATOR_PORT`), a wildcard port (``tcp://host:*``)
is bound before anyone connects to it, and the transports refuse to connect to their own endpoint
and drop a connection that the kernel made to itself.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from functools import lru_cache
from pathlib import Path

from dcop.errors import InputError

#: The range the kernel uses when it cannot tell (Linux's default; the IANA range elsewhere).
LINUX_EPHEMERAL = (32768, 60999)
IANA_EPHEMERAL = (49152, 65535)
_LOCAL_HOSTS = {"*", "0.0.0.0", "::", "localhost", "127.0.0.1", "::1"}


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range ``(first, last)``, both included.

    Read from ``/proc/sys/net/ipv4/ip_local_port_range`` on Linux; elsewhere (or when that file
    cannot be read) the usual default of the platform.
    """
    if sys.platform.startswith("linux"):
        try:
            low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[:2]
            return int(low), int(high)
        except (OSError, ValueError):
            return LINUX_EPHEMERAL
    return IANA_EPHEMERAL


def split_endpoint(endpoint: str) -> tuple[str, str] | None:
    """``(host, port)`` of a ``tcp://`` endpoint (port may be ``*``; an IPv6 host loses its
    brackets), or None for another transport. Of ``tcp://source;destination`` (ZeroMQ's syntax
    for a chosen source address) the destination is returned."""
    if not endpoint.startswith("tcp://"):
        return None
    address = endpoint[len("tcp://") :].rpartition(";")[2]
    host, _, port = address.rpartition(":")
    return host.strip("[]"), port


def is_loopback(endpoint: str) -> bool:
    """Whether ``endpoint`` (``tcp://host:port``, ``ipc://``, ``inproc://``) can be reached from
    this host only: a loopback address, or a name that resolves to one. A wildcard (``*``) or a
    name that does not resolve is not."""
    if endpoint.startswith(("ipc://", "inproc://")):
        return True
    parts = split_endpoint(endpoint)
    if parts is None:
        return False
    host = parts[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def endpoint_port(endpoint: str) -> int | None:
    """The TCP port of an endpoint, or None (wildcard port, not TCP)."""
    parts = split_endpoint(endpoint)
    if parts is None or not parts[1].isdigit():
        return None
    return int(parts[1])


def in_ephemeral_range(port: int | None) -> bool:
    """Whether ``port`` lies in the kernel's ephemeral range (None: no fixed port, False)."""
    if port is None:
        return False
    low, high = ephemeral_range()
    return low <= port <= high


def require_outside_ephemeral(port: int, what: str) -> None:
    """Raise InputError when a fixed listening ``port`` lies in the ephemeral range.

    For tools that choose ports (``dcop peers --base-port``): they should pick ports below it.
    """
    if in_ephemeral_range(port):
        low, high = ephemeral_range()
        raise InputError(
            f"{what} {port} lies in the kernel's ephemeral port range {low}-{high}, where "
            f"outgoing connections can take it; pick a port below {low}"
        )


def bind_endpoint(endpoint: str) -> str:
    """The address to bind for an endpoint: its own IP when it names one, else all interfaces
    (a host or service name such as ``agent3`` cannot be bound, only connected to)."""
    parts = split_endpoint(endpoint)
    if parts is None:
        return endpoint
    host, port = parts
    if host == "*":
        return endpoint
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return f"tcp://*:{port}"
    return endpoint


def with_port(endpoint: str, bound: str) -> str:
    """``endpoint`` with the port that ZeroMQ actually bound (``bound`` is the socket's
    ``last_endpoint``): for ``tcp://agent3:*`` bound as ``tcp://0.0.0.0:41234`` this is
    ``tcp://agent3:41234``, an address the peers can connect to."""
    parts, actual = split_endpoint(endpoint), split_endpoint(bound)
    if parts is None or actual is None:
        return bound
    host = parts[0]
    return f"tcp://[{host}]:{actual[1]}" if ":" in host else f"tcp://{host}:{actual[1]}"


@lru_cache(maxsize=1)
def _own_names() -> frozenset[str]:
    names = set(_LOCAL_HOSTS)
    try:
        names.add(socket.gethostname())
        names.add(socket.getfqdn())
    except OSError:
        pass
    return frozenset(names)


def same_endpoint(a: str, b: str) -> bool:
    """Whether connecting to ``b`` would reach the socket bound at ``a`` (or the reverse) on this
    host: the same port, and the same host or two names of this host (``*``, loopback, the host
    name). Other addresses of this host are not resolved: this catches configuration mistakes,
    and the transport drops a TCP self-connection whatever its cause."""
    if a == b:
        return True
    pa, pb = split_endpoint(a), split_endpoint(b)
    if pa is None or pb is None or pa[1] != pb[1] or not pa[1].isdigit():
        return False
    if pa[0] == pb[0]:
        return True
    own = _own_names()
    return (pa[0] in own or pa[0].startswith("127.")) and (pb[0] in own or pb[0].startswith("127."))
