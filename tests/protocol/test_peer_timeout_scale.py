"""The peer timeout of a run of thousands of agents on one host (issue 49): a derived one grows
with n, a given one is kept; a transport's ZMTP timeout never drops below its frame limit's."""

from __future__ import annotations

from dcop.protocol import RunSpec
from dcop.protocol.constants import PEER_TIMEOUT_PER_AGENT_S, PEER_TIMEOUT_S
from dcop.protocol.runspec import link_timeout, peer_timeout_at_scale, peer_timeout_for


def test_a_derived_peer_timeout_grows_with_the_agents() -> None:
    spec = RunSpec()
    assert peer_timeout_at_scale(spec, 10) is spec  # small runs: unchanged
    assert peer_timeout_at_scale(spec, 1000).peer_timeout == spec.peer_timeout == PEER_TIMEOUT_S
    big = peer_timeout_at_scale(spec, 2000)
    assert big.peer_timeout == 2000 * PEER_TIMEOUT_PER_AGENT_S > spec.peer_timeout
    assert (big.algo, big.max_message_bytes) == (spec.algo, spec.max_message_bytes)


def test_a_given_peer_timeout_is_kept() -> None:
    spec = RunSpec(peer_timeout_s=4.0)
    assert peer_timeout_at_scale(spec, 5000) is spec


def test_a_link_timeout_only_ever_lengthens() -> None:
    limit = RunSpec().max_message_bytes
    assert link_timeout(limit, None) == peer_timeout_for(limit)
    assert link_timeout(limit, 1.0) == peer_timeout_for(limit)  # a short one: the frame's rule
    assert link_timeout(limit, 20.0) == max(20.0, peer_timeout_for(limit))
