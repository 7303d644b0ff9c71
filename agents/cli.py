"""``dcop-agent``'s command line: parsed into :class:`AgentOptions` and run by
:func:`dcop.agents.run.run_agent` (exit codes there)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.main

from dcop.agents.run import run_agent
from dcop.choices import LogLevel
from dcop.protocol import PEER_TIMEOUT_S
from dcop.protocol.agent_options import DEFAULT_MAX_MESSAGE_MIB, DEFAULT_TIMEOUT_S, AgentOptions
from dcop.protocol.constants import MAX_MESSAGE_MIB

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def agent(
    ident: Annotated[int, typer.Option("--id", help="This agent's id in peers.json.")],
    peers_file: Annotated[
        Path, typer.Option("--peers", dir_okay=False, help="peers.json (who is where).")
    ],
    problem: Annotated[
        Path | None,
        typer.Option(
            dir_okay=False,
            help="Read this agent's variable and tables from the problem file and check them "
            "against the coordinator's (default: receive them from the coordinator).",
        ),
    ] = None,
    serve: Annotated[
        bool,
        typer.Option(
            help="Stay up after a problem and serve the next one (until a coordinator says "
            "shutdown)."
        ),
    ] = False,
    gpu: Annotated[
        str | None,
        typer.Option(
            metavar="DEVICES",
            help="Run large tables with CuPy on these CUDA devices: a number (0), a list (0,1) "
            "or all, the agent taking the one its id picks round robin; D/LIST: device D, the "
            "largest buckets split over LIST. On the agent's own stream.",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Give up after this many seconds (serving: per problem).")
    ] = DEFAULT_TIMEOUT_S,
    peer_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds of silence before a neighbour or the coordinator counts as dead, until "
            f"the run's own setting arrives (default {PEER_TIMEOUT_S:g}, longer with a larger "
            "--max-message-mib)."
        ),
    ] = None,
    max_message_mib: Annotated[
        float,
        typer.Option(
            help="Largest message this agent accepts, in MiB (a run may ask for less, never "
            f"more; up to {MAX_MESSAGE_MIB})."
        ),
    ] = DEFAULT_MAX_MESSAGE_MIB,
    secure: Annotated[bool, typer.Option(help="CurveZMQ on every socket.")] = False,
    keys: Annotated[
        str | None, typer.Option(help="Directory holding agent-<id>.key_secret (with --secure).")
    ] = None,
    insecure: Annotated[
        bool,
        typer.Option(
            help="Allow --serve without --secure on an address other than loopback: anyone who "
            "can reach this agent's or the coordinator's port can then submit problems to it "
            "or shut it down."
        ),
    ] = False,
    log_level: Annotated[
        LogLevel, typer.Option(help="Log level.", case_sensitive=False)
    ] = LogLevel.WARNING,
    fault: Annotated[str | None, typer.Option(hidden=True)] = None,  # fault-injection tests
    # set by dcop run, which launches its agents: they leave as soon as it is gone
    launcher_pid: Annotated[int | None, typer.Option(hidden=True, min=1)] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Run one DPOP/ADPOP agent: the variable peers.json (or, serving, the coordinator) gives it."""
    run_agent(
        AgentOptions(
            ident,
            str(peers_file),
            problem=str(problem) if problem is not None else None,
            serve=serve,
            gpu=gpu,
            timeout=timeout,
            peer_timeout=peer_timeout,
            max_message_mib=max_message_mib,
            secure=secure,
            keys=keys,
            insecure=insecure,
            log_level=log_level.value,
            fault=fault,
            launcher_pid=launcher_pid,
        )
    )


def _version(value: bool) -> None:
    if value:
        from dcop import __version__

        print(f"dcop-agent {__version__}")
        raise typer.Exit()


@functools.cache
def command() -> Any:
    """The click command behind ``app`` (built once per process). A forked agent never builds
    it: it runs from its launcher's options (:mod:`dcop.agents.forked`)."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``dcop-agent``); a usage error is one line, exit 2."""
    from dcop.usage import run_program

    code = run_program(
        lambda: command().main(args=argv, prog_name="dcop-agent", standalone_mode=False),
        "dcop-agent",
    )
    if code:
        sys.exit(code)


if __name__ == "__main__":
    main()
