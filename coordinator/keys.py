"""CurveZMQ key helpers for deployment tooling (``dcop keys generate``, compose files).

The implementation lives in :mod:`dcop.protocol.curve`, which agents use too (agents must not import
the coordinator); this module is the coordinator-side name for it.
"""

from __future__ import annotations

from pathlib import Path

from dcop.errors import InputError
from dcop.protocol import COORDINATOR_ID
from dcop.protocol.curve import (
    COORDINATOR_KEY_NAME,
    CurveConfig,
    generate_keypair,
    generate_keys,
    key_name,
    load_keypair,
    load_public_key,
)
from dcop.protocol.peers import Peers


def coordinator_curve(peers: Peers, keys: str | Path) -> CurveConfig:
    """The coordinator's CURVE settings: its own key pair; every agent's key is allowed."""
    public, secret = load_keypair(keys, COORDINATOR_ID)
    if peers.coordinator_public_key is not None and public.decode() != peers.coordinator_public_key:
        raise InputError(f"the coordinator key in {keys} is not the one in peers.json")
    clients = {a.id: str(a.public_key).encode() for a in peers.agents}
    return CurveConfig(public, secret, {}, clients)


__all__ = [
    "COORDINATOR_KEY_NAME",
    "CurveConfig",
    "coordinator_curve",
    "generate_keypair",
    "generate_keys",
    "key_name",
    "load_keypair",
    "load_public_key",
]
