"""The generated deployment files, read back and checked without Docker."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml
import zmq.auth
from typer.testing import CliRunner

from dcop.cli.entry import load_app
from dcop.coordinator.topology import layout_for
from dcop.deploy import ComposeOptions, HostsOptions, assign_hosts, write_compose, write_hosts
from dcop.deploy.health import listening_ports
from dcop.deploy.health import main as health_main
from dcop.deploy.keys import add_public_keys, generate
from dcop.deploy.layout import healthcheck
from dcop.errors import InputError
from dcop.io import read_problem, write_problem
from dcop.protocol import RunSpec
from dcop.protocol.peers import load_peers

app = load_app([], {})  # every command registered


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_compose_layout_matches_problem(problem_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "dep"
    peers = write_compose(problem_file, out, ComposeOptions(image="dcop:test"))
    problem = read_problem(problem_file)
    compose = _yaml(out / "docker-compose.yml")
    services = compose["services"]
    assert list(services) == ["coordinator"] + [f"agent-{i}" for i in range(problem.n)]
    # peers.json on disk is what the function returned, and it validates.
    on_disk = load_peers(out / "config" / "peers.json")
    assert on_disk == peers
    assert on_disk.coordinator == "tcp://coordinator:4999"
    # serving agents: peers.json names no variable; the coordinator gives the i-th to agent i
    assert not on_disk.problem_specific
    layout = layout_for(problem, on_disk)
    names = list(problem.variables)
    adjacency = problem.neighbours()
    for entry in on_disk.agents:
        assert entry.variable is None and entry.neighbours == ()
        assert layout.variable[entry.id] == names[entry.id]
        assert {names[n] for n in layout.neighbours[entry.id]} == adjacency[names[entry.id]]
        assert entry.endpoint == f"tcp://agent-{entry.id}:5000"
        service = services[f"agent-{entry.id}"]
        assert service["image"] == "dcop:test"
        assert service["restart"] == "no"
        assert service["hostname"] == f"agent-{entry.id}"
        cmd = service["command"]
        assert cmd[:3] == ["dcop-agent", "--id", str(entry.id)]
        assert cmd[cmd.index("--peers") + 1] == "/config/peers.json"
        assert "--serve" in cmd  # up for problem after problem
        assert "--problem" not in cmd  # the coordinator sends each agent its part
        assert "--secure" not in cmd and "--gpu" not in cmd
        assert service["volumes"] == ["./config:/config:ro"]
        assert service["healthcheck"]["test"][-1] == "5000"
        assert "deploy" not in service
    coordinator = services["coordinator"]
    cmd = coordinator["command"]
    assert cmd[:2] == ["dcop", "coordinator"]
    assert cmd[cmd.index("--problem") + 1] == f"/config/{problem_file.name}"
    assert cmd[cmd.index("--json") + 1] == "/results/result.json"
    assert "./results:/results" in coordinator["volumes"]
    assert "./config:/config:ro" in coordinator["volumes"]
    # The problem file is copied unchanged next to peers.json; results/ exists for the mount.
    assert (out / "config" / problem_file.name).read_bytes() == problem_file.read_bytes()
    assert (out / "results").is_dir()
    assert json.loads((out / "deployment.json").read_text())["agents"] == problem.n


def test_compose_gpu_reservations_round_robin(problem_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "dep"
    write_compose(problem_file, out, ComposeOptions(gpu=True, gpus=3))
    services = _yaml(out / "docker-compose.yml")["services"]
    assert "deploy" not in services["coordinator"]
    for i in range(8):
        service = services[f"agent-{i}"]
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert devices == [
            {"driver": "nvidia", "device_ids": [str(i % 3)], "capabilities": ["gpu"]}
        ]
        cmd = service["command"]
        assert cmd[cmd.index("--gpu") + 1] == "0"  # the one device the container sees
        # compiled kernels outlive the container: a bind mount of the deployment's folder
        assert "./kernel-cache:/cache/kernels" in service["volumes"]
        assert service["environment"]["DCOP_KERNEL_CACHE"] == "/cache/kernels"
    assert (out / "kernel-cache").is_dir()
    assert "DCOP_KERNEL_CACHE" not in services["coordinator"]["environment"]


def test_compose_secure_mounts_only_own_secret(problem_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "dep"
    peers = write_compose(problem_file, out, ComposeOptions(secure=True))
    assert peers.secure and all(a.public_key for a in peers.agents)
    services = _yaml(out / "docker-compose.yml")["services"]
    for name, service in services.items():
        secrets = [v for v in service["volumes"] if ".key_secret" in v]
        assert secrets == [f"./keys/{name}.key_secret:/keys/{name}.key_secret:ro"]
        cmd = service["command"]
        assert cmd[cmd.index("--keys") + 1] == "/keys" and "--secure" in cmd
        # The key file holds the public key that peers.json gives this process.
        public, secret = zmq.auth.load_certificate(str(out / "keys" / f"{name}.key_secret"))
        assert secret is not None
        expected = (
            peers.coordinator_public_key
            if name == "coordinator"
            else peers.agent(int(name.split("-")[1])).public_key
        )
        assert public.decode() == expected
        mode = stat.S_IMODE(os.stat(out / "keys" / f"{name}.key_secret").st_mode)
        assert mode == 0o600


def test_stack_file_uses_overlay_configs_and_secrets(problem_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "dep"
    write_compose(problem_file, out, ComposeOptions(secure=True))
    stack = _yaml(out / "stack.yml")
    assert stack["networks"]["dcop"] == {"driver": "overlay", "attachable": True}
    assert set(stack["configs"]) == {"peers", "problem"}
    assert stack["configs"]["peers"]["file"] == "./config/peers.json"
    services = stack["services"]
    assert services["coordinator"]["deploy"]["placement"]["constraints"] == ["node.role == manager"]
    for name, service in services.items():
        assert service["deploy"]["restart_policy"] == {"condition": "none"}
        assert [s["source"] for s in service["secrets"]] == [name]
        assert stack["secrets"][name]["file"] == f"./keys/{name}.key_secret"
        cmd = service["command"]
        assert cmd[cmd.index("--keys") + 1] == "/run/secrets"


def test_assign_hosts_balanced_contiguous() -> None:
    assert assign_hosts(8, 3) == [0, 0, 0, 1, 1, 1, 2, 2]
    assert assign_hosts(2, 3) == [0, 1]
    for n in range(1, 40):
        for h in range(1, 6):
            placement = assign_hosts(n, h)
            counts = [placement.count(k) for k in range(h)]
            assert placement == sorted(placement)
            assert max(counts) - min(c for c in counts if c) <= 1


def test_hosts_layout_and_key_split(problem_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "multi"
    hosts = ("10.0.0.1", "node-b.example", "10.0.0.3")
    peers = write_hosts(problem_file, out, HostsOptions(hosts=hosts, coordinator_host="10.0.0.3"))
    assert peers.secure
    shared = load_peers(out / "peers.json")
    assert shared == peers
    assert shared.coordinator == "tcp://10.0.0.3:7000"
    placement = assign_hosts(8, 3)
    for entry in shared.agents:
        assert entry.endpoint == f"tcp://{hosts[placement[entry.id]]}:{7001 + entry.id}"
    for h, host in enumerate(hosts):
        directory = out / host
        assert load_peers(directory / "config" / "peers.json") == shared
        services = _yaml(directory / "docker-compose.yml")["services"]
        mine = [i for i in range(8) if placement[i] == h]
        assert list(services) == [f"agent-{i}" for i in mine]
        for i in mine:
            service = services[f"agent-{i}"]
            assert service["network_mode"] == "host"
            assert "networks" not in service and "ports" not in service
            assert service["healthcheck"]["test"][-1] == str(7001 + i)
            assert "--secure" in service["command"]
        # Each host holds the secret keys of its own agents, and nothing else secret.
        secrets = sorted(p.name for p in (directory / "keys").iterdir())
        assert secrets == sorted(f"agent-{i}.key_secret" for i in mine)
    coordinator_dir = out / "coordinator"
    assert sorted(p.name for p in (coordinator_dir / "keys").iterdir()) == [
        "coordinator.key_secret"
    ]
    service = _yaml(coordinator_dir / "docker-compose.yml")["services"]["coordinator"]
    assert service["network_mode"] == "host"
    assert "--secure" in service["command"]
    # Public keys only in public-keys/, and they match peers.json.
    for entry in shared.agents:
        public, secret = zmq.auth.load_certificate(
            str(out / "public-keys" / f"agent-{entry.id}.key")
        )
        assert secret is None and public.decode() == entry.public_key


def test_hosts_gpu_reservations_per_host(problem_file: Path, tmp_path: Path) -> None:
    write_hosts(problem_file, tmp_path / "g", HostsOptions(hosts=("a", "b"), gpu=True, gpus=2))
    for host, mine in (("a", [0, 1, 2, 3]), ("b", [4, 5, 6, 7])):
        services = _yaml(tmp_path / "g" / host / "docker-compose.yml")["services"]
        for k, i in enumerate(mine):
            service = services[f"agent-{i}"]
            devices = service["deploy"]["resources"]["reservations"]["devices"]
            assert devices[0]["device_ids"] == [str(k % 2)]
            assert service["command"][service["command"].index("--gpu") + 1] == "0"
            assert "./kernel-cache:/cache/kernels" in service["volumes"]
        assert (tmp_path / "g" / host / "kernel-cache").is_dir()


def test_hosts_insecure_and_bad_input(problem_file: Path, tmp_path: Path) -> None:
    peers = write_hosts(
        problem_file, tmp_path / "open", HostsOptions(hosts=("a", "b"), secure=False)
    )
    assert not peers.secure and all(a.public_key is None for a in peers.agents)
    assert not (tmp_path / "open" / "a" / "keys").exists()
    bad = [
        HostsOptions(hosts=()),
        HostsOptions(hosts=("a", "a")),
        HostsOptions(hosts=("bad host",)),
        HostsOptions(hosts=("coordinator",)),
        HostsOptions(hosts=("a",), base_port=65530),  # 8 agents do not fit below 65536
    ]
    for k, options in enumerate(bad):
        with pytest.raises(InputError):
            write_hosts(problem_file, tmp_path / f"bad{k}", options)
    with pytest.raises(InputError, match="mini-bucket size"):
        RunSpec("adpop")  # no z: refused where the spec is made, before any deployment


def test_refuses_a_problem_without_variables(tmp_path: Path) -> None:
    from dcop.model import Problem

    empty = tmp_path / "empty.wcsp"
    write_problem(Problem.build([], [], name="empty"), empty)
    with pytest.raises(InputError, match="no variables"):
        write_compose(empty, tmp_path / "dep", ComposeOptions())


def test_refuses_non_empty_output_without_force(problem_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "dep"
    out.mkdir()
    (out / "other").write_text("x")
    with pytest.raises(InputError, match="not empty"):
        write_compose(problem_file, out, ComposeOptions())
    write_compose(problem_file, out, ComposeOptions(), force=True)
    assert (out / "docker-compose.yml").exists()


def test_keys_generate_and_add_to_peers(problem_file: Path, tmp_path: Path) -> None:
    write_compose(problem_file, tmp_path / "dep", ComposeOptions())
    peers_file = tmp_path / "dep" / "config" / "peers.json"
    publics = generate(tmp_path / "keys", 8)
    add_public_keys(peers_file, publics)
    peers = load_peers(peers_file)
    assert peers.secure
    for entry in peers.agents:
        public, _ = zmq.auth.load_certificate(str(tmp_path / "keys" / f"agent-{entry.id}.key"))
        assert public.decode() == entry.public_key
    with pytest.raises(InputError, match="no key generated for agent"):
        add_public_keys(peers_file, generate(tmp_path / "few", 3))


def test_cli_deploy_and_keys(problem_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "cli"
    result = runner.invoke(
        app,
        ["deploy", "compose", str(problem_file), "-o", str(out), "--image", "x:y", "--gpu", "0"],
    )
    assert result.exit_code == 0, result.output
    assert _yaml(out / "docker-compose.yml")["services"]["agent-0"]["image"] == "x:y"
    result = runner.invoke(
        app, ["deploy", "hosts", str(problem_file), "--hosts", "h1,h2", "-o", str(tmp_path / "h")]
    )
    assert result.exit_code == 0, result.output
    assert load_peers(tmp_path / "h" / "peers.json").secure
    result = runner.invoke(
        app,
        ["keys", "generate", str(tmp_path / "k"), "--agents", "8", "--peers",
         str(out / "config" / "peers.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert load_peers(out / "config" / "peers.json").secure
    result = runner.invoke(
        app, ["deploy", "compose", str(problem_file), "-o", str(out), "--algo", "nope", "--force"]
    )
    assert result.exit_code == 2 and "nope" in result.output  # not one of the listed choices
    result = runner.invoke(
        app,
        ["deploy", "compose", str(problem_file), "-o", str(out), "--force",
         "--algo", "adpop", "--z", "2", "--max-message-mib", "512"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    services = _yaml(out / "docker-compose.yml")["services"]
    # the run spec reaches the coordinator and the limit every agent
    coordinator = services["coordinator"]["command"]
    assert coordinator[coordinator.index("--z") + 1] == "2"
    agent = services["agent-0"]["command"]
    assert agent[agent.index("--max-message-mib") + 1] == "512"


def test_health_check_sees_a_listening_port() -> None:
    import socket
    import subprocess
    import sys

    def compose_check(port: int) -> int:
        # Exactly what the compose files run (with this interpreter standing in for python3).
        test = healthcheck(port)["test"]
        assert test[:2] == ["CMD", "python3"] and test[-1] == str(port)
        return subprocess.run([sys.executable, *test[2:]], check=False, timeout=30).returncode

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port in listening_ports()
        assert health_main([str(port)]) == 0
        assert compose_check(port) == 0
    assert health_main([str(port)]) == 1
    assert compose_check(port) == 1
    assert health_main(["x"]) == 2
