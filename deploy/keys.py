"""``dcop keys generate``: CURVE key pairs on disk, and their public halves in peers.json."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from dcop.errors import InputError
from dcop.protocol.constants import COORDINATOR_ID
from dcop.protocol.curve import generate_keys
from dcop.protocol.peers import load_peers


def generate(directory: str | Path, agents: int) -> dict[int, str]:
    """Key pairs for the coordinator and agents ``0..agents-1``; the public keys by id."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise InputError("exists and is not a directory", str(directory))
    return dict(generate_keys(directory, range(agents)))


def add_public_keys(peers_file: str | Path, public_keys: Mapping[int, str]) -> None:
    """Put every process's public key into ``peers_file`` (rewritten in place)."""
    peers = load_peers(peers_file)
    missing = [a.id for a in peers.agents if a.id not in public_keys]
    if missing or COORDINATOR_ID not in public_keys:
        what = f"agent {missing[0]}" if missing else "the coordinator"
        raise InputError(f"no key generated for {what} (use --agents {len(peers.agents)})")
    agents = tuple(dataclasses.replace(a, public_key=public_keys[a.id]) for a in peers.agents)
    updated = dataclasses.replace(
        peers, agents=agents, coordinator_public_key=public_keys[COORDINATOR_ID]
    )
    updated.write(peers_file)
