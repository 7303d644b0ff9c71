"""CurveZMQ keys: generation, loading, and the per-process settings a secure transport needs (the
ZAP handler that checks each client's key is :mod:`dcop.protocol.zap`).

Key files are pyzmq's certificate format (``zmq.auth.create_certificates``): ``NAME.key`` holds
the public key, ``NAME.key_secret`` both keys, Z85-encoded. Names are ``coordinator`` and
``agent-<id>``. peers.json carries the public keys; each process loads only its own secret.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import zmq

from dcop.errors import InputError
from dcop.protocol.constants import COORDINATOR_ID

COORDINATOR_KEY_NAME = "coordinator"


def key_name(agent_id: int) -> str:
    """File stem of an id's key pair (``coordinator`` or ``agent-<id>``)."""
    return COORDINATOR_KEY_NAME if agent_id == COORDINATOR_ID else f"agent-{agent_id}"


def generate_keypair() -> tuple[str, str]:
    """A fresh CURVE key pair as Z85 strings ``(public, secret)``."""
    public, secret = zmq.curve_keypair()
    return public.decode("ascii"), secret.decode("ascii")


def generate_keys(directory: str | Path, agent_ids: Iterable[int]) -> dict[int, str]:
    """Write key pairs for the coordinator and each agent into ``directory``; return the public
    keys (Z85) by id (``COORDINATOR_ID`` for the coordinator). Secret files are mode 0600."""
    import zmq.auth  # here, not at import: it loads asyncio (20 ms of every plain run's start)

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    publics: dict[int, str] = {}
    for ident in [COORDINATOR_ID, *agent_ids]:
        _public_file, secret_file = zmq.auth.create_certificates(str(directory), key_name(ident))
        os.chmod(secret_file, 0o600)
        publics[ident] = load_public_key(directory, ident)
    return publics


def load_public_key(directory: str | Path, agent_id: int) -> str:
    """The Z85 public key of ``agent_id`` from ``directory``."""
    import zmq.auth

    path = Path(directory) / f"{key_name(agent_id)}.key"
    try:
        public, _ = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read public key: {exc}", str(path)) from None
    return public.decode("ascii")


def load_keypair(directory: str | Path, agent_id: int) -> tuple[bytes, bytes]:
    """``(public, secret)`` Z85 bytes of ``agent_id`` from its ``.key_secret`` file."""
    import zmq.auth

    path = Path(directory) / f"{key_name(agent_id)}.key_secret"
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read secret key: {exc}", str(path)) from None
    if secret is None:
        raise InputError("the file holds no secret key", str(path))
    return public, secret


@dataclass(frozen=True)
class CurveConfig:
    """One process's CURVE settings: its own key pair, the server keys of the peers it connects
    to, and the client keys it accepts, both by id (Z85 bytes). The ZAP handler
    (:mod:`dcop.protocol.zap`) refuses every other client key, and names each accepted client by
    its id: every frame from that client carries the id as its ZAP User-Id, which is how the
    transport knows who sent it."""

    public: bytes
    secret: bytes
    server_keys: Mapping[int, bytes] = field(default_factory=dict)
    client_keys: Mapping[int, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids: dict[bytes, int] = {}
        for ident, key in self.client_keys.items():
            if ids.setdefault(key, ident) != ident:  # one key, two ids: whose frames are they?
                raise InputError(f"agents {ids[key]} and {ident} share a CURVE public key")

    @property
    def allowed_clients(self) -> frozenset[bytes]:
        """The accepted client keys."""
        return frozenset(self.client_keys.values())

    def client_ids(self) -> dict[bytes, int]:
        """Accepted client key (Z85) -> the id it authenticates."""
        return {key: ident for ident, key in self.client_keys.items()}
