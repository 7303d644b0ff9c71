"""Driving a local Docker engine for the deployment tests and benchmarks.

:func:`ensure_daemon` finds a running daemon or starts one (installing Debian's ``docker.io``,
``docker-compose`` and ``debootstrap`` first when run as root without them);
:func:`build_images` runs ``deploy/build-image.sh`` (offline base, cached);
:func:`compose` runs ``docker-compose`` (or ``docker compose``) in a deployment directory;
:func:`exit_codes` reads back how every container of a compose project ended.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from dcop.errors import RunError

#: Debian packages a bare machine needs for the deployment tests.
APT_PACKAGES = ("docker.io", "docker-compose", "debootstrap")
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Docker:
    """A usable Docker engine; ``process`` is set when we started the daemon ourselves."""

    compose_cmd: tuple[str, ...]
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    notes: list[str] = field(default_factory=list)

    def stop(self) -> None:
        """Stop the daemon if we started it (images stay cached on disk)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None


def _run(cmd: list[str], timeout: float, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)  # type: ignore[call-overload, no-any-return]


def daemon_running() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return _run(["docker", "info", "--format", "{{.ServerVersion}}"], 20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _compose_cmd() -> tuple[str, ...] | None:
    if shutil.which("docker-compose"):
        return ("docker-compose",)
    if shutil.which("docker") and _run(["docker", "compose", "version"], 20).returncode == 0:
        return ("docker", "compose")
    return None


def _have(tool: str) -> bool:
    return shutil.which(tool) is not None or any(
        Path(d, tool).exists() for d in ("/usr/sbin", "/usr/bin", "/sbin")
    )


def _install_packages(notes: list[str]) -> None:
    tools = ("dockerd", "docker-compose", "debootstrap")
    missing = [pkg for pkg, tool in zip(APT_PACKAGES, tools, strict=True) if not _have(tool)]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RunError(f"missing {', '.join(missing)} and cannot install them (needs root and apt)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    t0 = time.monotonic()
    for cmd in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
    ):
        done = _run(cmd, 900, env=env)
        if done.returncode != 0:
            raise RunError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    notes.append(f"installed {' '.join(missing)} in {time.monotonic() - t0:.0f} s")


def _start_daemon(extra: list[str], log: Path) -> subprocess.Popen[bytes] | None:
    dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
    # Its own process group: a test run that is interrupted does not take the daemon down
    # half-way through a write; Docker.stop() ends it.
    with log.open("ab") as out:
        process = subprocess.Popen(
            [dockerd, *extra], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return None
        if daemon_running():
            return process
        time.sleep(0.5)
    process.terminate()
    process.wait(timeout=30)
    return None


def ensure_daemon(install: bool = True) -> Docker:
    """A running Docker daemon and a compose command, starting (and installing) what is missing.

    Raises RunError saying why when no daemon can run here (not root, no apt, the daemon dies)."""
    notes: list[str] = []
    if not daemon_running():
        if os.geteuid() != 0:
            raise RunError("no Docker daemon is running and starting one needs root")
        if install:
            _install_packages(notes)
        log = Path(tempfile.gettempdir()) / "dcop-dockerd.log"
        # The default (overlay2, iptables) first; then the most portable storage and no iptables
        # for sandboxes that refuse either.
        for extra in ([], ["--storage-driver=vfs", "--iptables=false"]):
            process = _start_daemon(extra, log)
            if process is not None:
                notes.append(f"started dockerd {' '.join(extra)}".strip())
                compose_cmd = _compose_cmd()
                if compose_cmd is None:
                    raise RunError("no docker-compose (apt-get install docker-compose)")
                return Docker(compose_cmd, process, log, notes)
        tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
        raise RunError(f"dockerd would not start here: {tail.strip()}")
    if install:
        _install_packages(notes)  # debootstrap and compose may still be missing
    compose_cmd = _compose_cmd()
    if compose_cmd is None:
        raise RunError("no docker-compose (apt-get install docker-compose)")
    return Docker(compose_cmd, None, None, notes)


def build_images(tag: str = "dcop:latest", timeout: float = 1500) -> float:
    """Build the offline base (cached) and the dcop image from this checkout; seconds taken."""
    t0 = time.monotonic()
    done = _run([str(REPO / "deploy" / "build-image.sh"), "--tag", tag], timeout)
    if done.returncode != 0:
        raise RunError(f"building {tag} failed: {(done.stdout + done.stderr).strip()[-1500:]}")
    return time.monotonic() - t0


def compose(
    docker: Docker, directory: Path, project: str, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``docker-compose -p PROJECT ARGS`` in ``directory``."""
    cmd = [*docker.compose_cmd, "-p", project, *args]
    return _run(cmd, timeout, cwd=directory)


def exit_codes(project: str) -> dict[str, int]:
    """Container name -> exit code for every container of a compose project."""
    ids = _run(
        ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"], 60
    ).stdout.split()
    if not ids:
        return {}
    info = json.loads(_run(["docker", "inspect", *ids], 60).stdout)
    return {c["Name"].lstrip("/"): int(c["State"]["ExitCode"]) for c in info}


def container_logs(project: str) -> dict[str, str]:
    """Container name -> its output (stdout and stderr) for a compose project."""
    out: dict[str, str] = {}
    ids = _run(
        ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"], 60
    ).stdout.split()
    for ident in ids:
        name = _run(["docker", "inspect", "-f", "{{.Name}}", ident], 60).stdout.strip().lstrip("/")
        done = _run(["docker", "logs", ident], 60)
        out[name] = done.stdout + done.stderr
    return out


def image_size(tag: str) -> int:
    """Size of an image in bytes."""
    done = _run(["docker", "image", "inspect", "-f", "{{.Size}}", tag], 60)
    if done.returncode != 0:
        raise RunError(f"no image {tag}")
    return int(done.stdout.strip())
