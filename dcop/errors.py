"""The one exception hierarchy of dcop.

    DcopError                 root: the CLI prints it as one line on stderr and exits 2
    ├── InputError            a file or argument is malformed (file, line, reason)
    ├── ModelError            a Problem is inconsistent (unknown variable, bad table shape, ...)
    ├── TableTooLarge         a table would exceed the memory limit (names bucket and size)
    ├── BackendUnavailable    a backend was asked for but cannot be used (no CuPy, no GPU)
    ├── ProtocolError         a message on the wire is malformed, oversized, unknown or from a stranger
    └── RunError              a distributed run failed (agent died, mismatched peers, ...)
        ├── PeerTimeout       an agent or the coordinator did not answer within its deadline
        ├── RunTimeout        the run as a whole ran out of its time (``--timeout``)
        └── ProblemMismatch   an agent's problem file differs from the coordinator's copy

Anything that is not a DcopError is a bug and may show a traceback.
"""

from __future__ import annotations


class DcopError(Exception):
    """Root of every error dcop reports to a user."""


class InputError(DcopError):
    """Malformed input, reported as ``file:line: reason``."""

    def __init__(self, reason: str, file: str | None = None, line: int | None = None) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        super().__init__(f"{where}{reason}")


class ModelError(DcopError):
    """A Problem that contradicts itself."""


class TableTooLarge(DcopError):
    """A bucket table would not fit in the memory limit."""


class BackendUnavailable(DcopError):
    """The requested array backend cannot be used here."""


class ProtocolError(DcopError):
    """A message that must be rejected (malformed, oversized, unknown type, wrong version or sender)."""


class RunError(DcopError):
    """A distributed run that could not finish correctly."""


class PeerTimeout(RunError):
    """A peer did not answer before its deadline."""


class RunTimeout(RunError):
    """The run did not finish within its time limit."""


class ProblemMismatch(RunError):
    """An agent's problem file differs from the coordinator's copy of its part."""
