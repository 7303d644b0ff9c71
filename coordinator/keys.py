"""CurveZMQ key helpers for deployment tooling (``dcop keys generate``, compose files).

The implementation lives in :mod:`dcop.protocol.curve`, which agents use too (agents must not import
the coordinator); this module is the coordinator-side name for it.
"""

from dcop.coordinator.launch import coordinator_curve
from dcop.protocol.curve import (
    COORDINATOR_KEY_NAME,
    CurveConfig,
    generate_keypair,
    generate_keys,
    key_name,
    load_keypair,
    load_public_key,
)

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
