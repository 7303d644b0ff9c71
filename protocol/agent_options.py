"""What starts one agent: the options of ``dcop-agent`` as data, shared by the launcher and the
agent process (as peers.json is).

``dcop-agent``'s command line parses into an :class:`AgentOptions` (:mod:`dcop.agents.cli`). The
launcher (:mod:`dcop.coordinator.launch`) builds one per agent, writes it as the command line of
a spawned agent (:meth:`AgentOptions.argv`) and hands it as it is to an agent forked from the
template (:mod:`dcop.agents.forked`), which then does not parse what the launcher has just
written: click's parse and the template pages it touches cost a forked agent ~1.7 ms of CPU,
and a 30-agent ``dcop run`` on two cores 0.52 -> 0.50 s (medians of 16 alternating pairs).
"""

from __future__ import annotations

from dataclasses import dataclass

from dcop.protocol import DEFAULT_MAX_MESSAGE_BYTES
from dcop.protocol.runspec import MIB

#: ``--timeout``'s default: seconds an agent waits for its run (serving: per problem).
DEFAULT_TIMEOUT_S = 300.0
#: ``--max-message-mib``'s default.
DEFAULT_MAX_MESSAGE_MIB = DEFAULT_MAX_MESSAGE_BYTES / MIB


@dataclass(frozen=True)
class AgentOptions:
    """One agent's options (``dcop-agent --help`` says what each does)."""

    ident: int
    peers_file: str
    problem: str | None = None
    serve: bool = False
    gpu: str | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    peer_timeout: float | None = None
    max_message_mib: float = DEFAULT_MAX_MESSAGE_MIB
    secure: bool = False
    keys: str | None = None
    #: serve in open mode on an address other than loopback (see ``dcop-agent --insecure``)
    insecure: bool = False
    log_level: str = "WARNING"
    fault: str | None = None
    #: the process that launched this agent and is its coordinator (``dcop run``): once it is
    #: gone the agent leaves, whether or not it had heard from it (None: started by hand)
    launcher_pid: int | None = None

    def argv(self) -> list[str]:
        """The ``dcop-agent`` arguments that give these options (floats written exactly, so that
        a spawned agent and a forked one run with the same values)."""
        out = ["--id", str(self.ident), "--peers", self.peers_file, "--timeout", repr(self.timeout)]
        if self.peer_timeout is not None:
            out += ["--peer-timeout", repr(self.peer_timeout)]
        out += ["--log-level", self.log_level]
        if self.gpu is not None:
            out += ["--gpu", self.gpu]
        if self.secure:
            out.append("--secure")
        if self.keys is not None:
            out += ["--keys", self.keys]
        if self.insecure:
            out.append("--insecure")
        if self.problem is not None:
            out += ["--problem", self.problem]
        if self.max_message_mib != DEFAULT_MAX_MESSAGE_MIB:
            out += ["--max-message-mib", repr(self.max_message_mib)]
        if self.serve:
            out.append("--serve")
        if self.fault is not None:
            out += ["--fault", self.fault]
        if self.launcher_pid is not None:
            out += ["--launcher-pid", str(self.launcher_pid)]
        return out
