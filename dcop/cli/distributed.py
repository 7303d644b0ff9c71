"""``dcop peers``, ``dcop coordinator`` and ``dcop run``: distributed DPOP/ADPOP from the shell.

The run's parameters become one :class:`~dcop.protocol.RunSpec` here, at the edge, and travel
unchanged to every agent.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dcop.choices import TaskName, TreeName, run_task
from dcop.cli.app import app
from dcop.cli.common import (
    DistributedAlgo,
    LogLevel,
    check_ordering,
    check_outputs,
    failure_document,
    finish_run,
    parse_memory,
    summary_stream,
    write_answer_file,
)
from dcop.cli.live import live_status
from dcop.cli.options import (
    BasePortOption,
    DistributedAlgoOption,
    DocumentInputFile,
    EvidenceOption,
    GpuOption,
    JsonOption,
    LogOption,
    MaxMessageOption,
    OrderTimeOption,
    PeerTimeoutOption,
    QuietOption,
    SolutionOption,
    TaskOption,
    WidthOption,
    ZOption,
    check_z,
    parse_gpu,
    seconds,
)
from dcop.clock import process_started
from dcop.errors import DcopError, InputError
from dcop.model import Problem
from dcop.placement import check_placement
from dcop.protocol import DEFAULT_MAX_MESSAGE_BYTES, RunSpec
from dcop.protocol.constants import DEFAULT_COORDINATOR_PORT
from dcop.protocol.runspec import DEFAULT_TREES, MIB
from dcop.results import Status, after_answer

if TYPE_CHECKING:
    from rich.console import Console

    from dcop.results.run import RunResult

#: Seconds a coordinator whose peers.json does not fit the problem stops agents that say hello.
MISMATCH_STOP_S = 5.0

Algo = DistributedAlgoOption
ZOpt = ZOption
Width = WidthOption
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        callback=seconds,
        help="seconds for the whole run, from the command's start (launch included)",
    ),
]
MaxMessage = MaxMessageOption
PeerTimeout = PeerTimeoutOption
Trees = Annotated[
    int,
    typer.Option(
        "--trees",
        help="candidate pseudo-trees the agents build (the smallest largest UTIL wins); 0: auto, "
        "one where the first tree's UTILs are at most 65536 entries, else 8",
    ),
]
TreeOpt = Annotated[
    TreeName,
    typer.Option(
        "--tree",
        help="auto: the coordinator also offers the elimination tree of its ordering engine's "
        "order where it is narrower than the first DFS tree, and the smallest predicted UTILs "
        "win (where --trees auto builds one DFS tree, one no wider runs alone, with no DFS "
        "walk); dfs: the agents' DFS trees only (agents link to their neighbours only); "
        "elimination: run the elimination tree",
    ),
]
MaxMemory = Annotated[
    str | None,
    typer.Option(
        "--max-memory",
        help="memory each agent may use, e.g. 2G: its own tables and their copy, the UTIL it "
        "builds and its children's it holds meanwhile (a setup over it is refused before any "
        "table is sent; auto picks the largest z that fits)",
    ),
]
Quiet = QuietOption
TaskOpt = TaskOption
Evidence = EvidenceOption


def _tell(text: str) -> None:
    """One line for the user on stderr (rich markup; rich loads only here)."""
    from dcop.cli.common import console_for

    console_for(sys.stderr).print(text)


def _read(path: Path, evidence: Path | None = None, timeout: float | None = None) -> Problem:
    """The problem of ``path``, read within the command's ``timeout`` (from its start) and the
    memory this process may take (``--max-memory`` bounds each agent, not the reader)."""
    from dcop.cli.common import read_limits
    from dcop.io import read_problem

    return read_problem(str(path), evidence=evidence, limits=read_limits(timeout, None))


def _task(file: Path, task: TaskName | None) -> str:
    """The RunSpec task for ``--task`` on ``file`` (mpe is DPOP's minimisation); one-line
    InputError for a task the file's format does not have."""
    from dcop.cli.partition import task_for

    return run_task(task_for(file, None, task and task.value))


def _write_answer(path: Path | None, run: Any) -> None:
    """``--solution`` for a distributed run."""
    if path is None:
        return
    partition = run.partition
    write_answer_file(
        path,
        run.problem,
        run.ran.task,
        answered=run.status in ("ok", "no_solution"),  # no_solution: marked infeasible
        assignment=run.assignment,
        ln_z=partition.ln_partition if partition is not None else None,
        marginals=partition.marginals if partition is not None else None,
        cost=run.internal_cost if partition is None else None,
    )


def _spec(
    algo: DistributedAlgo,
    z: int | None,
    max_message_mib: float,
    peer_timeout: float | None,
    trees: int,
    max_memory: str | None,
    task: str = "min",
    width: int | None = None,
) -> RunSpec:
    memory = parse_memory(max_memory)
    return RunSpec.from_options(
        algo.value,
        check_z(algo.value, z),
        max_message_mib,
        peer_timeout,
        trees,
        None if memory is None else int(memory),
        task=task,
        width=width,
    )


def _failure(
    algo: str,
    z: int | None,
    file: Path | None,
    read: dict[str, Any],
    task: TaskName | None = None,
) -> Callable[[Status, str], dict[str, Any]]:
    """The document of a run that ended without an answer (the problem, if it was read), or,
    where the run had its answer (``read["answer"]``, a RunResult) before a signal or a failure
    while its agents exit, that answer's assignment and bounds under the failure's status."""

    def failure(status: Status, message: str) -> dict[str, Any]:
        answer = read.get("answer")
        if answer is not None:
            return after_answer(replace(answer, file=str(file)).to_json(), status, message)
        return failure_document(
            status,
            message,
            algo=algo,
            z=z,
            file=str(file) if file is not None else None,
            problem=read.get("problem"),
            task="min" if task is None or task is TaskName.mpe else task.value,
            # a failed run's time counts from the command's start too (as --timeout does)
            times={"total": time.monotonic() - process_started()},
        )

    return failure


def _logging(level: LogLevel) -> None:
    logging.basicConfig(
        level=level.value, stream=sys.stderr, format="dcop: %(levelname)s %(name)s: %(message)s"
    )


@app.command()
def peers(
    output: Annotated[Path, typer.Option("-o", "--output", help="peers.json to write")],
    file: Annotated[
        Path | None,
        typer.Argument(
            exists=True,
            dir_okay=False,
            help="problem file: one agent per variable (leave out with --agents N for serving "
            "agents that take any problem)",
        ),
    ] = None,
    hosts: Annotated[
        str,
        typer.Option(
            "--hosts", help="comma-separated hosts; agents in contiguous blocks of ids, in order"
        ),
    ] = "127.0.0.1",
    agents: Annotated[
        int | None,
        typer.Option("--agents", help="a problem-independent file with this many agents"),
    ] = None,
    base_port: BasePortOption = DEFAULT_COORDINATOR_PORT,
    coordinator_host: Annotated[str | None, typer.Option(help="default: the first host")] = None,
    keys: Annotated[
        Path | None, typer.Option(help="key directory: add its public keys (dcop keys generate)")
    ] = None,
    insecure: Annotated[
        bool,
        typer.Option(help="allow agents on several hosts without CurveZMQ keys (plain TCP)"),
    ] = False,
) -> None:
    """Write peers.json: who listens where. With FILE one agent per variable (problem-specific);
    with --agents N a file that serving agents (dcop-agent --serve) use for any problem."""
    from dcop.coordinator.launch import hosts_list
    from dcop.coordinator.topology import block_placement, endpoint_of, peers_for
    from dcop.protocol import COORDINATOR_ID
    from dcop.protocol.curve import load_public_key
    from dcop.protocol.peers import AgentEntry, Peers

    names = hosts_list(hosts)
    if len(set(names)) > 1 and keys is None and not insecure:
        raise InputError(
            "agents on several hosts talk over the network: give --keys DIR (dcop keys "
            "generate) for CurveZMQ, or --insecure to run in the open"
        )
    if (file is None) == (agents is None):
        raise InputError("give either a problem FILE or --agents N")
    check_outputs({"--output": output})
    count = agents if agents is not None else _read(file).n  # type: ignore[arg-type]
    if count < 1:
        raise InputError(f"--agents must be at least 1, not {count}")
    publics = None
    if keys is not None:
        publics = {i: load_public_key(keys, i) for i in [COORDINATOR_ID, *range(count)]}
    _, endpoint = block_placement(names, base_port, count)
    coordinator_at = endpoint_of(coordinator_host or names[0], base_port)
    if file is not None:
        result = peers_for(_read(file), coordinator_at, endpoint, publics, problem_ref=file.name)
    else:
        keyed = publics or {}
        result = Peers(
            "",
            coordinator_at,
            tuple(AgentEntry(i, None, endpoint(i, ""), (), keyed.get(i)) for i in range(count)),
            keyed.get(COORDINATOR_ID),
        )
    result.write(output)
    _tell(
        f"wrote {output}: {count} agents on {len(names)} host(s), coordinator at "
        f"{result.coordinator}"
    )


@app.command()
def coordinator(
    # checked as it is read: a missing file still gets its --json document
    peers_file: Annotated[Path, typer.Option("--peers", help="peers.json (dcop peers)")],
    problem_file: Annotated[
        Path | None,
        # checked as it is read: a missing file still gets its --json document
        typer.Option("--problem", help="the problem to solve"),
    ] = None,
    shutdown: Annotated[
        bool, typer.Option(help="stop every (serving) agent of peers.json, solve nothing")
    ] = False,
    algo: Algo = DistributedAlgo.dpop,
    z: ZOpt = None,
    width: Width = None,
    task: TaskOpt = None,
    evidence: Evidence = None,
    trees: Trees = DEFAULT_TREES,
    tree: TreeOpt = TreeName.auto,
    order_time: OrderTimeOption = None,
    timeout: Timeout = 300.0,
    hello_timeout: Annotated[float, typer.Option(help="seconds to wait for every hello")] = 120.0,
    json_out: JsonOption = None,
    secure: Annotated[bool, typer.Option(help="CurveZMQ (needs --keys)")] = False,
    keys: Annotated[Path | None, typer.Option(help="directory with coordinator.key_secret")] = None,
    peer_timeout: PeerTimeout = None,
    max_message_mib: MaxMessage = DEFAULT_MAX_MESSAGE_BYTES / MIB,
    max_memory: MaxMemory = None,
    solution: SolutionOption = None,
    log_level: LogOption = LogLevel.WARNING,
    quiet: Quiet = False,
) -> None:
    """Drive agents started elsewhere (other hosts, containers; one-shot or serving) from
    peers.json: solve --problem, or --shutdown the serving agents."""
    from dcop.coordinator.keys import coordinator_curve
    from dcop.protocol.peers import load_peers

    _logging(log_level)
    if secure and keys is None:
        raise InputError("--secure needs --keys DIR")
    if shutdown:
        from dcop.coordinator.cluster import shutdown_agents

        table = load_peers(peers_file)
        curve = coordinator_curve(table, keys) if secure and keys is not None else None
        stopped = shutdown_agents(table, curve, hello_timeout)
        _tell(f"stopped {len(stopped)} of {len(table.agents)} agents")
        return
    if problem_file is None:
        raise InputError("give --problem FILE to solve, or --shutdown")
    read: dict[str, Any] = {}  # the problem once read, the answer once had

    def produce() -> tuple[dict[str, Any], Callable[[Console], None] | None]:
        from dcop.cli.report import print_summary, write_summary
        from dcop.coordinator.cluster import stop_agents
        from dcop.coordinator.driver import Coordinator
        from dcop.protocol.zmqlink import ZmqCoordinatorTransport

        check_ordering("auto", order_time)
        spec = _spec(
            algo,
            z,
            max_message_mib,
            peer_timeout,
            trees,
            max_memory,
            _task(problem_file, task),
            width,
        )
        read["problem"] = problem = _read(problem_file, evidence, timeout)
        table = load_peers(peers_file)  # here: a missing peers.json still gets its document
        curve = coordinator_curve(table, keys) if secure and keys is not None else None
        # only the agents of peers.json connect (open mode too: a stranger's connection is
        # refused at the handshake, before any of its frames is read)
        transport = ZmqCoordinatorTransport(
            table.coordinator,
            curve,
            spec.max_message_bytes,
            agents={a.id for a in table.agents},
        )
        try:
            try:
                coordinator = Coordinator(
                    problem,
                    table,
                    transport,
                    spec,
                    timeout=timeout,
                    hello_timeout=hello_timeout,
                    origin=process_started(),
                    tree=tree.value,
                    order_time=order_time,
                )
            except DcopError as exc:
                # peers.json does not fit the problem (or the problem has no such task): the
                # agents started for it still get a stop; serving agents stay up for the next
                ids = {a.id for a in table.agents}
                wait_s = min(hello_timeout, MISMATCH_STOP_S)
                stop_agents(transport, ids, wait_s, f"aborted: {exc}", spare_serving=True)
                raise
            with live_status(not quiet) as on_status:
                coordinator.on_status = on_status
                try:
                    run = read["answer"] = coordinator.run()
                except DcopError as exc:
                    # the run is over: one-shot agents that had not said hello yet (started
                    # late, or slow to start) get the same stop instead of waiting for their
                    # own --timeout and holding their ports against the next try
                    late = {a.id for a in table.agents} - set(coordinator.hellos)
                    if late:
                        wait_s = min(hello_timeout, MISMATCH_STOP_S)
                        stop_agents(transport, late, wait_s, f"aborted: {exc}", spare_serving=True)
                    raise
        finally:
            transport.close()
        run = replace(run, file=str(problem_file))
        _write_answer(solution, run)
        stream = summary_stream(json_out)
        if not stream.isatty():  # as `dcop run`: plain lines off a terminal, rich on one
            if not quiet:
                with contextlib.suppress(OSError):  # a closed stdout must not lose the run
                    write_summary(run, stream)
            return run.to_json(), None
        return run.to_json(), lambda console: print_summary(run, console)

    finish_run(
        produce,
        json_out,
        _failure(algo.value, z, problem_file, read, task),
        quiet,
        {"--solution": solution},
    )


def _clean(value: bool) -> None:
    if value:
        from dcop.coordinator.launch import runs_folder, sweep_leftovers

        runs = runs_folder()
        removed = sweep_leftovers(runs)
        with contextlib.suppress(OSError):
            runs.rmdir()  # empty: nothing of dcop is left
        print(f"removed {removed} leftover run folder(s) from {runs}", file=sys.stderr)
        raise typer.Exit(0)


@app.command()
def run(
    file: DocumentInputFile,
    algo: Algo = DistributedAlgo.dpop,
    z: ZOpt = None,
    width: Width = None,
    task: TaskOpt = None,
    evidence: Evidence = None,
    trees: Trees = DEFAULT_TREES,
    tree: TreeOpt = TreeName.auto,
    order_time: OrderTimeOption = None,
    gpu: GpuOption = None,
    gpu_placement: Annotated[
        str,
        typer.Option(
            help="agents over several devices: round-robin (agent k on device k mod count), "
            "balanced (whole subtrees per device, the heaviest on different devices) or split "
            "(round robin, and each agent's largest buckets split over every device)"
        ),
    ] = "round-robin",
    timeout: Timeout = 120.0,
    json_out: JsonOption = None,
    secure: Annotated[bool, typer.Option(help="generate keys and use CurveZMQ")] = False,
    agents_read_file: Annotated[
        bool,
        typer.Option(help="agents read the problem file and check it against the coordinator's"),
    ] = False,
    workdir: Annotated[
        Path | None, typer.Option(help="keep peers.json and the agents' logs here")
    ] = None,
    peer_timeout: PeerTimeout = None,
    max_message_mib: MaxMessage = DEFAULT_MAX_MESSAGE_BYTES / MIB,
    max_memory: MaxMemory = None,
    solution: SolutionOption = None,
    log_level: LogOption = LogLevel.WARNING,
    quiet: Quiet = False,
    clean: Annotated[
        bool,
        typer.Option(
            "--clean",
            is_eager=True,
            callback=_clean,
            help="Remove what killed runs left in the system's temporary folder (their "
            "dcop-runs/run-* folders: peers.json, keys, agent logs), then exit. Every run "
            "does this first.",
        ),
    ] = False,
) -> None:
    """Solve FILE with one agent process per variable on this machine (DPOP, ADPOP(z), MB-DPOP
    or auto; on a UAI model also --task pr or mar)."""
    _logging(log_level)
    read: dict[str, Any] = {}  # the problem once read, the answer once had

    def produce() -> tuple[dict[str, Any], Callable[[Console], None] | None]:
        from dcop.cli.report import print_summary, write_summary
        from dcop.coordinator.launch import run_local

        check_ordering("auto", order_time)
        spec = _spec(
            algo, z, max_message_mib, peer_timeout, trees, max_memory, _task(file, task), width
        )
        check_placement(gpu_placement)
        if evidence is not None and agents_read_file:
            raise InputError(
                "--agents-read-file with --evidence: the agents would read the model without "
                "the evidence; leave one out"
            )
        read["problem"] = problem = _read(file, evidence, timeout)
        shown: list[bool] = []

        def show_answer(answer: RunResult) -> None:
            read["answer"] = answer  # a signal while the agents exit keeps it (_failure)
            # off a terminal the summary is plain text, written while the agents exit (rich's
            # import and rendering after they had were 25 ms of every run on the 2-core VM); on
            # a terminal rich draws it once the live display is gone
            stream = summary_stream(json_out)
            if not quiet and not stream.isatty():
                with contextlib.suppress(OSError):  # a closed stdout must not lose the run
                    write_summary(replace(answer, file=str(file)), stream)
                shown.append(True)

        with live_status(not quiet) as on_status:
            result = run_local(
                problem,
                spec,
                gpu=parse_gpu(gpu),
                gpu_placement=gpu_placement,
                timeout=timeout,
                secure=secure,
                problem_file=file if agents_read_file else None,
                workdir=workdir,
                log_level=log_level.value,
                on_status=on_status,
                on_answer=show_answer,
                started=process_started(),
                tree=tree.value,
                order_time=order_time,
            )
        result = replace(result, file=str(file))
        _write_answer(solution, result)
        return result.to_json(), (None if shown else lambda console: print_summary(result, console))

    finish_run(
        produce,
        json_out,
        _failure(algo.value, z, file, read, task),
        quiet,
        {"--solution": solution},
    )
