"""CurveZMQ keys: generation, loading, the per-process settings a secure transport needs, and the
ZAP handler that tells a transport whose key each connection authenticated.

Key files are pyzmq's certificate format (``zmq.auth.create_certificates``): ``NAME.key`` holds
the public key, ``NAME.key_secret`` both keys, Z85-encoded. Names are ``coordinator`` and
``agent-<id>``. peers.json carries the public keys; each process loads only its own secret.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq
from zmq.utils import z85

from dcop.errors import InputError
from dcop.protocol.constants import COORDINATOR_ID
from dcop.protocol.ratelog import RateLimitedLog

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
    to, and the client keys it accepts, both by id (Z85 bytes). The ZAP handler refuses every
    other client key, and names each accepted client by its id: every frame from that client
    carries the id as its ZAP User-Id, which is how the transport knows who sent it."""

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


class KeyAuthenticator:
    """ZAP handler: accepts exactly the listed CURVE client keys (Z85 -> id) and names each
    connection by the id of its key: pyzmq's ``curve_user_id`` hook sets the ZAP User-Id, which
    libzmq attaches to every frame of that connection (``frame.get("User-Id")``). Refusals are
    logged with the client's address, rate-limited by ``out``.

    It drives pyzmq's ``ThreadAuthenticator`` by composition, through the authenticator object
    its thread calls (``thread.authenticator``): that object is the ThreadAuthenticator itself
    from pyzmq 25 on and a separate one before (Debian's pyzmq 24 in the container image)."""

    def __init__(
        self, ctx: zmq.Context[Any], clients: Mapping[bytes, int], owner: str, out: RateLimitedLog
    ) -> None:
        self.clients = dict(clients)
        self.owner = owner
        self.out = out
        self._address = "?"
        import zmq.auth.thread

        self._auth = zmq.auth.thread.ThreadAuthenticator(ctx, log=out.logger)

    def start(self) -> None:
        self._auth.start()
        inner: Any = self._auth.thread.authenticator  # (Any: its methods are replaced below)
        handle = inner.handle_zap_message

        def remember(msg: list[bytes]) -> Any:
            # the credentials callback is not told who is asking: keep it for the log line
            self._address = msg[3].decode("utf-8", "replace") if len(msg) > 3 else "?"
            return handle(msg)  # a coroutine from pyzmq 25 on, which the thread awaits

        inner.handle_zap_message = remember
        inner.curve_user_id = self._user_id
        self._auth.configure_curve_callback("*", self)

    def stop(self) -> None:
        self._auth.stop()

    def callback(self, domain: str, key: bytes) -> bool:
        """pyzmq's credentials hook: is this client key (Z85) listed?"""
        if key in self.clients:
            return True
        self.out.warning(
            (self._address, "curve-key"),
            "%s: refused a CURVE client whose key is not in peers.json (from %s)",
            self.owner,
            self._address,
        )
        return False

    def _user_id(self, client_public_key: bytes) -> str:
        return str(self.clients.get(z85.encode(client_public_key), ""))
