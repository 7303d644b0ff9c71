"""Deployment: Docker Compose directories for one machine, per-host directories for several, a
Docker Swarm stack file, CurveZMQ key provisioning, and the containers' health check.

The image itself is built by ``deploy/Dockerfile`` (``deploy/build-image.sh`` offline); this
package only writes files. Nothing here talks to a Docker daemon.
"""

from __future__ import annotations

from dcop.deploy.compose import ComposeOptions, write_compose
from dcop.deploy.hosts import HostsOptions, assign_hosts, write_hosts
from dcop.deploy.layout import agent_service

__all__ = [
    "ComposeOptions",
    "HostsOptions",
    "agent_service",
    "assign_hosts",
    "write_compose",
    "write_hosts",
]
