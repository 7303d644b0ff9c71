"""Multi-host: agents in three Linux network namespaces joined by veth pairs and a bridge, real
TCP between distinct IPs; the coordinator in the test's own namespace. Needs root."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dcop.coordinator import AgentProcesses, Coordinator, agent_command, peers_for, round_robin
from dcop.coordinator.topology import endpoint_of
from dcop.generators import scale_free_network
from dcop.inference import solve_be
from dcop.protocol import RunSpec
from dcop.protocol.zmqlink import ZmqCoordinatorTransport

pytestmark = [pytest.mark.netns, pytest.mark.slow]

SUBNET = "10.213.{}.{}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def _ensure_ip() -> None:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        if shutil.which("apt-get") is None:
            pytest.skip("no `ip` command and no apt-get to install iproute2")
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "iproute2"], capture_output=True, timeout=300
        )
        if shutil.which("ip") is None:
            pytest.skip("could not install iproute2")


@pytest.fixture
def namespaces() -> Iterator[tuple[list[str], list[str], str]]:
    """Three namespaces ns1..ns3 with IPs .11-.13 on a bridge whose host side is .1."""
    _ensure_ip()
    tag = f"{os.getpid() % 100000}"
    net = os.getpid() % 200 + 20
    bridge = f"dcbr{tag}"
    names = [f"dcns{tag}_{k}" for k in range(1, 4)]
    ips = [SUBNET.format(net, 10 + k) for k in range(1, 4)]
    host_ip = SUBNET.format(net, 1)
    made_links: list[str] = []
    made_ns: list[str] = []
    fw_rules: list[list[str]] = []
    try:
        probe = _ip("link", "add", bridge, "type", "bridge", check=False)
        if probe.returncode != 0:
            pytest.skip(f"cannot create a bridge here: {probe.stderr.strip()}")
        made_links.append(bridge)
        # bridged frames must not go through the host's iptables (a FORWARD policy of DROP, as
        # Docker sets it, would cut the agents off from each other); per bridge, nothing global
        _ip("link", "set", bridge, "type", "bridge", "nf_call_iptables", "0", check=False)
        _ip("link", "set", bridge, "type", "bridge", "nf_call_ip6tables", "0", check=False)
        if shutil.which("iptables"):  # the global br_netfilter switch may still be on
            rule = ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
            if subprocess.run(["iptables", "-I", *rule], capture_output=True).returncode == 0:
                fw_rules.append(rule)
        _ip("addr", "add", f"{host_ip}/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for k, (ns, ip) in enumerate(zip(names, ips, strict=True), start=1):
            res = _ip("netns", "add", ns, check=False)
            if res.returncode != 0:
                pytest.skip(f"cannot create network namespaces: {res.stderr.strip()}")
            made_ns.append(ns)
            outside, inside = f"dcv{tag}_{k}", f"dcp{tag}_{k}"
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            made_links.append(outside)
            _ip("link", "set", outside, "master", bridge, "up")
            _ip("link", "set", inside, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", inside)
            _ip("-n", ns, "link", "set", inside, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield names, ips, host_ip
    finally:
        for rule in fw_rules:
            subprocess.run(["iptables", "-D", *rule], capture_output=True)
        for ns in made_ns:
            _ip("netns", "del", ns, check=False)
        for link in made_links:
            _ip("link", "del", link, check=False)


def test_dpop_across_three_namespaces(namespaces, tmp_path: Path) -> None:
    names, ips, host_ip = namespaces
    problem = scale_free_network(9, 3, 0.3, seed=8)
    _, endpoint = round_robin(ips, 16100)
    peers = peers_for(problem, endpoint_of(host_ip, 16100), endpoint)
    peers_file = tmp_path / "peers.json"
    peers.write(peers_file)
    hosts = {a.endpoint.split("//")[1].rsplit(":", 1)[0] for a in peers.agents}
    assert hosts == set(ips)
    transport = ZmqCoordinatorTransport(peers.coordinator)
    procs = AgentProcesses()
    try:
        for k, a in enumerate(peers.agents):
            ns = names[k % len(names)]
            command = agent_command(a.id, peers_file, timeout=60, spec=RunSpec())
            argv = ["ip", "netns", "exec", ns, *command]
            procs.start(a.id, argv, tmp_path / f"agent-{a.id}.log")
        result = Coordinator(
            problem, peers, transport, timeout=40, hello_timeout=30, monitor=procs.dead
        ).run()
    finally:
        procs.stop()
        transport.close()
    assert result.internal_cost == solve_be(problem).upper_bound
    assert result.metrics["checks"]["util_messages_match"]
    assert all(p.poll() == 0 for p in procs.procs.values())
