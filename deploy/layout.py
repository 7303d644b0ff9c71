"""What every deployment shares: agent ids and service names, peers.json, copying the problem.

Agent ids are the positions of the variables in the Problem (0..n-1, in the file's order), the
same numbering ``dcop run`` uses; neighbours come from the primal graph.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from dcop.deploy.health import CHECK
from dcop.errors import InputError
from dcop.io import read_problem
from dcop.model import Problem
from dcop.protocol.constants import COORDINATOR_ID

#: The coordinator's compose service (and DNS name inside a compose network).
COORDINATOR_SERVICE = "coordinator"
#: Where a container finds peers.json and the problem (read-only), its keys, its results.
CONFIG_DIR = "/config"
KEYS_DIR = "/keys"
RESULTS_DIR = "/results"
#: Name of the result file the coordinator writes into RESULTS_DIR.
RESULT_FILE = "result.json"

_DNS_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_IPV6 = re.compile(r"^[0-9A-Fa-f:.]+$")


def agent_service(agent_id: int) -> str:
    """Compose service (and DNS) name of an agent."""
    return f"agent-{agent_id}"


def check_host(host: str) -> str:
    """A host name or IP address usable in a ``tcp://host:port`` endpoint."""
    if ":" in host:
        if not _IPV6.match(host):
            raise InputError(f"not a host name or address: {host!r}")
        return f"[{host}]"
    if not host or len(host) > 253 or not all(_DNS_LABEL.match(p) for p in host.split(".")):
        raise InputError(f"not a host name or address: {host!r}")
    return host


def check_port(port: int, what: str) -> int:
    """``port`` when it is a TCP port number (1..65535), else an InputError naming ``what``."""
    if not 1 <= port <= 65535:
        raise InputError(f"{what} {port} is out of range 1..65535")
    return port


def read_deployable(path: Path) -> Problem:
    """Read the problem to deploy; refuse one without variables (no agent to run)."""
    problem = read_problem(path)
    if not problem.variables:
        raise InputError("the problem has no variables: there is nothing to deploy", str(path))
    return problem


def copy_problem(source: Path, config_dir: Path) -> str:
    """Copy the problem file (and its ``.evid`` file, if any) into ``config_dir``; return the
    file's name there."""
    config_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, config_dir / source.name)
    evidence = source.with_name(source.name + ".evid")
    if not evidence.exists():
        evidence = source.with_suffix(".evid")
    if evidence.exists() and evidence != source:
        shutil.copyfile(evidence, config_dir / evidence.name)
    return source.name


def default_user() -> str:
    """``uid:gid`` the containers run as: the generating user's, so that they can read the keys
    (mode 0600) and write the results; ``DCOP_USER`` overrides it when the compose runs."""
    return f"{os.getuid()}:{os.getgid()}"


class _ComposeDumper(yaml.SafeDumper):
    """Block style for mappings, one-line lists of scalars (commands, volumes), no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(isinstance(x, (str, int, float)) for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_ComposeDumper.add_representer(list, _represent_list)


def write_yaml(path: Path, data: Mapping[str, Any], header: str) -> None:
    """Write a compose/stack file: a comment header, then block-style YAML in insertion order."""
    body = yaml.dump(
        dict(data), Dumper=_ComposeDumper, sort_keys=False, default_flow_style=False, width=100
    )
    path.write_text(header + body)


def healthcheck(port: int) -> dict[str, Any]:
    """A compose health check that the process listens on ``port`` (no connection is made)."""
    return {
        "test": ["CMD", "python3", "-I", "-S", "-c", CHECK, str(port)],
        "interval": "2s",
        "timeout": "5s",
        "retries": 15,
        "start_period": "5s",
    }


def prepare_dir(out: Path, force: bool) -> None:
    """Create the output directory; refuse to mix a new deployment into an old one."""
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a directory", str(out))
    if out.exists() and any(out.iterdir()) and not force:
        raise InputError("output directory is not empty (use --force to overwrite)", str(out))
    out.mkdir(parents=True, exist_ok=True)


__all__ = [
    "CONFIG_DIR",
    "COORDINATOR_ID",
    "COORDINATOR_SERVICE",
    "KEYS_DIR",
    "RESULTS_DIR",
    "RESULT_FILE",
    "agent_service",
    "check_host",
    "check_port",
    "copy_problem",
    "default_user",
    "healthcheck",
    "prepare_dir",
    "read_deployable",
    "write_yaml",
]
