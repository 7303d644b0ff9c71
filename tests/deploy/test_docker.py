"""Real Docker runs: the offline images, a compose deployment, and a secure multi-host layout.

Marked ``docker``. The module starts a Docker daemon when none runs (installing Debian's
docker.io, docker-compose and debootstrap first when root and missing) and skips, saying why,
only where no daemon can run at all. The base image is cached in the local engine, so only the
first run pays for debootstrap.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from dcop.deploy import ComposeOptions, HostsOptions, write_compose, write_hosts
from dcop.deploy.health import listening_ports
from dcop.errors import RunError
from dcop.inference import solve_be
from dcop.io import write_problem
from dcop.protocol import Heartbeat, encode
from dcop.protocol.peers import Peers
from dcop.protocol.zmqlink import claim
from tests.conftest import brute_force
from tests.deploy import docker_driver as dk
from tests.deploy.conftest import small_problem

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

IMAGE = "dcop:pytest"
#: The three "hosts" of the multi-host test: loopback addresses, each its own bind address.
HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
ROGUE_ID = 999


@pytest.fixture(scope="module")
def docker() -> Iterator[dk.Docker]:
    try:
        engine = dk.ensure_daemon()
    except RunError as exc:
        pytest.skip(f"no Docker daemon can run here: {exc}")
    try:
        dk.build_images(IMAGE)
        yield engine
    finally:
        engine.stop()


@pytest.fixture
def instance(tmp_path: Path) -> tuple[Path, float]:
    """An 8-variable generated instance and its optimum (BE, checked by brute force)."""
    problem = small_problem(8, seed=5)
    path = tmp_path / "random8.wcsp"
    write_problem(problem, path)
    optimum = solve_be(problem).upper_bound
    assert optimum == brute_force(problem) and optimum < float("inf")
    return path, optimum


def _up(docker: dk.Docker, directory: Path, project: str, *args: str) -> None:
    done = dk.compose(docker, directory, project, "up", *args, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def _down(docker: dk.Docker, directory: Path, project: str) -> None:
    dk.compose(docker, directory, project, "down", "--remove-orphans", timeout=120)


def _free_base_port(n: int) -> int:
    """A coordinator port with the next n ports free on every test host."""
    for base in range(30000, 60000, 97):
        try:
            for host in HOSTS:
                for port in range(base, base + n + 1):
                    with socket.socket() as s:
                        s.bind((host, port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port range")


def test_compose_run_equals_be(docker: dk.Docker, instance: tuple[Path, float], tmp_path: Path):
    path, optimum = instance
    out = tmp_path / "compose"
    write_compose(path, out, ComposeOptions(image=IMAGE, timeout_s=240))
    project = f"dcop{uuid.uuid4().hex[:8]}"
    try:
        _up(docker, out, project, "--abort-on-container-exit")
        codes = dk.exit_codes(project)
        result = json.loads((out / "results" / "result.json").read_text())
    finally:
        _down(docker, out, project)
    assert len(codes) == 9, codes  # coordinator + 8 agents
    assert all(code == 0 for code in codes.values()), codes
    assert result["status"] == "ok" and result["exact"]
    assert result["cost"] == optimum
    problem = small_problem(8, seed=5)
    assert problem.evaluate(result["assignment"]) == optimum
    assert result["metrics"]["checks"]["util_messages_match"]


def test_compose_agents_serve_problem_after_problem(
    docker: dk.Docker, instance: tuple[Path, float], tmp_path: Path
) -> None:
    """deploy/README's "problem after problem": agents up, one coordinator run per problem (a
    smaller second problem too), then --shutdown; every agent exits 0."""
    path, optimum = instance
    out = tmp_path / "serve"
    write_compose(path, out, ComposeOptions(image=IMAGE, timeout_s=240))
    second = small_problem(7, seed=9)
    write_problem(second, out / "config" / "second.wcsp")
    project = f"dcop{uuid.uuid4().hex[:8]}"
    agents = [f"agent-{i}" for i in range(8)]

    def coordinator(*args: str) -> None:
        done = dk.compose(
            docker, out, project, "run", "--rm", "--use-aliases", "coordinator",
            "dcop", "coordinator", "--peers", "/config/peers.json", "--hello-timeout", "120",
            *args, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

    try:
        _up(docker, out, project, "-d", "--no-deps", *agents)
        for name in (path.name, "second.wcsp"):
            coordinator("--problem", f"/config/{name}", "--json", f"/results/{name}.json", "-q")
        coordinator("--shutdown")
        dk.compose(docker, out, project, "stop", "-t", "60", timeout=120)
        codes = dk.exit_codes(project)
        first = json.loads((out / "results" / f"{path.name}.json").read_text())
        again = json.loads((out / "results" / "second.wcsp.json").read_text())
    finally:
        _down(docker, out, project)
    assert first["status"] == "ok" and first["cost"] == optimum
    assert again["status"] == "ok" and again["cost"] == solve_be(second).upper_bound
    assert {a: c for a, c in codes.items() if "agent" in a} and all(
        c == 0 for a, c in codes.items() if "agent" in a
    ), codes


def _rogue(peers: Peers, target: int, curve: bool) -> None:
    """Knock on ``target``'s door as a stranger: a plain client, and with ``curve`` also a CURVE
    client with its own (unlisted) key pair; each sends a garbage frame and a well-formed one."""
    entry = peers.agent(target)
    ctx = zmq.Context()
    sockets: list[zmq.Socket] = []
    try:
        for use_curve in (False, True) if curve else (False,):
            sock = ctx.socket(zmq.DEALER)
            claim(sock, str(ROGUE_ID).encode())  # open mode: its PLAIN user name too
            sock.setsockopt(zmq.LINGER, 0)
            sockets.append(sock)
            if use_curve:
                public, secret = zmq.curve_keypair()
                sock.curve_publickey = public
                sock.curve_secretkey = secret
                sock.curve_serverkey = str(entry.public_key).encode()
            sock.connect(entry.endpoint)
            with contextlib.suppress(zmq.Again):  # refused at the handshake: no link
                sock.send(b"\x93not a dcop frame", zmq.NOBLOCK)
                sock.send_multipart(encode(ROGUE_ID, target, Heartbeat()), zmq.NOBLOCK)
        time.sleep(2.0)  # handshakes (and ZAP refusals) happen in the background
    finally:
        # linger 0 everywhere: a refused handshake must never keep the context from closing
        ctx.destroy(linger=0)


def _hosts_run(
    docker: dk.Docker, path: Path, out: Path, secure: bool, target: int
) -> tuple[dict[str, Any], dict[str, int], dict[str, str]]:
    """Run a multi-host deployment on the three loopback 'hosts'; a rogue client knocks on agent
    ``target`` before the coordinator starts. Returns result, exit codes, logs."""
    base = _free_base_port(8)
    options = HostsOptions(
        hosts=HOSTS,
        base_port=base,
        secure=secure,
        image=IMAGE,
        timeout_s=240,
        log_level="INFO",
    )
    peers = write_hosts(path, out, options)
    tag = uuid.uuid4().hex[:6]
    projects = [(out / host, f"h{k}{tag}") for k, host in enumerate(HOSTS)]
    projects.append((out / "coordinator", f"hc{tag}"))
    codes: dict[str, int] = {}
    logs: dict[str, str] = {}
    try:
        for directory, project in projects[:-1]:
            _up(docker, directory, project, "-d")
        ports = {options.base_port + 1 + i for i in range(8)}
        deadline = time.monotonic() + 120
        while not ports <= listening_ports():
            assert time.monotonic() < deadline, "agents did not start listening"
            time.sleep(0.5)
        _rogue(peers, target, curve=secure)
        directory, project = projects[-1]
        _up(docker, directory, project, "--abort-on-container-exit")
        for directory, project in projects[:-1]:
            dk.compose(docker, directory, project, "stop", "-t", "60", timeout=120)
        for _, project in projects:
            codes.update(dk.exit_codes(project))
            logs.update(dk.container_logs(project))
        result = json.loads((out / "coordinator" / "results" / "result.json").read_text())
    finally:
        for directory, project in projects:
            _down(docker, directory, project)
    return result, codes, logs


def test_hosts_secure_refuses_rogue_and_equals_open_run(
    docker: dk.Docker, instance: tuple[Path, float], tmp_path: Path
):
    path, optimum = instance
    target = 4
    variable = small_problem(8, seed=5).variables
    name = list(variable)[target]

    secure, codes, logs = _hosts_run(docker, path, tmp_path / "secure", True, target)
    assert len(codes) == 9 and all(c == 0 for c in codes.values()), codes
    assert secure["cost"] == optimum
    target_log = next(text for cname, text in logs.items() if f"agent-{target}" in cname)
    # The stranger was refused at the handshake: the agent logged it, and nothing it sent
    # reached the agent's decoder (no dropped frame, no message from the rogue id).
    assert "refused a CURVE client" in target_log, target_log[-2000:]
    assert "dropped a frame" not in target_log and "refused a frame" not in target_log
    assert secure["agents"][name]["dropped_frames"] == 0

    # The same run without CURVE: the same answer, and the same stranger, claiming its id at the
    # handshake, is refused there too (not a neighbour) - the probe above would have seen a
    # delivery.
    open_run, codes, logs = _hosts_run(docker, path, tmp_path / "open", False, target)
    assert len(codes) == 9 and all(c == 0 for c in codes.values()), codes
    assert open_run["cost"] == secure["cost"] == optimum
    assert open_run["assignment"] == secure["assignment"]
    target_log = next(text for cname, text in logs.items() if f"agent-{target}" in cname)
    assert f"agent {ROGUE_ID} is not a neighbour" in target_log, target_log[-2000:]
