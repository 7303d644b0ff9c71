"""Regression tests for what the fuzzers and the soak found outside crash inputs."""

from __future__ import annotations

import warnings

from dcop.coordinator import free_ports
from dcop.io.expressions import compile_expression


def test_expression_parse_emits_no_syntax_warning() -> None:
    """'1if a else 0' is valid Python but made ast.parse print a SyntaxWarning line."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expr = compile_expression("1if a else 0", "x.yaml", 3)
    assert expr.names == frozenset({"a"})


def test_free_ports_avoid_the_ephemeral_range() -> None:
    """Ports an outgoing connection could take before the agent binds them caused
    'Address already in use' in the soak; they now come from below that range."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            low = int(fh.read().split()[0])
    except OSError:
        low = 32768
    ports = free_ports(40)
    assert len(set(ports)) == 40
    if low > 20000 + 160:
        assert all(p < low for p in ports)
