"""Drivers for the DCOP tools compared against: pyDCOP (Python 3.7 venv) and FRODO 2.18.1 (Java).

Both are installed outside the repository (paths given on the command line); here they are only
started as processes under the suite's limits and their printed metrics parsed.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from compare.context import Context

# --------------------------------------------------------------------------------------- pyDCOP

#: Extra wall-clock seconds pyDCOP's process mode gets for starting and stopping its agents.
PYDCOP_PROCESS_STARTUP_S = 120.0


def pydcop_command(pydcop: Path, yaml_file: Path, out_json: Path, mode: str) -> list[str]:
    """``pydcop solve --algo dpop -m MODE`` with its result JSON written to ``out_json``.

    ``-m process`` runs one OS process per agent (pyDCOP's HTTP transport): the setting closest to
    dcop's one process per agent over ZeroMQ. ``-m thread`` runs all agents as threads of one
    process.
    """
    python = pydcop / "bin" / "python"
    cli = pydcop / "bin" / "dcop_cli.py"
    return [
        str(python),
        str(cli),
        "--output",
        str(out_json),
        "solve",
        "--algo",
        "dpop",
        "-m",
        mode,
        str(yaml_file),
    ]


def parse_pydcop(doc: dict[str, Any]) -> dict[str, Any]:
    """pyDCOP's result JSON: its status, cost, solve time, and algorithm (non-discovery) messages.

    ``msg_count``/``msg_size`` include its discovery messages; the per-agent ``count_ext_msg`` /
    ``size_ext_msg`` keyed by computation let us keep the DPOP messages only. pyDCOP's message
    size is its own unit (for DPOP roughly the number of table entries), not bytes.
    """
    count = size = 0
    for agent in (doc.get("agt_metrics") or {}).values():
        for comp, c in (agent.get("count_ext_msg") or {}).items():
            if not comp.startswith("_"):
                count += int(c)
        for comp, s in (agent.get("size_ext_msg") or {}).items():
            if not comp.startswith("_"):
                size += int(s)
    return {
        "pydcop_status": doc.get("status"),
        "cost": doc.get("cost"),
        "violation": doc.get("violation"),
        "solve_s": doc.get("time"),
        "assignment": doc.get("assignment") or {},
        "msg_count_all": doc.get("msg_count"),
        "msg_size_all": doc.get("msg_size"),
        "dpop_messages": count,
        "dpop_size_units": size,
    }


def run_pydcop(ctx: Context, yaml_file: Path, mode: str = "process") -> dict[str, Any]:
    """Solve with pyDCOP's DPOP under the limits; ``status`` ok/oot/oom/error."""
    if ctx.pydcop is None:
        return {"status": "not run", "error": "no --pydcop given"}
    out_json = ctx.work_dir / f"pydcop-{yaml_file.stem}-{mode}.json"
    out_json.unlink(missing_ok=True)
    # Process mode starts an HTTP agent per variable and tears them down afterwards, which
    # takes tens of seconds on this 2-core machine whatever the instance: it gets a fixed
    # start-up allowance on top of the time limit (its own solve time is reported apart).
    allowance = PYDCOP_PROCESS_STARTUP_S if mode == "process" else 0.0
    outcome = ctx.run_command(
        pydcop_command(ctx.pydcop, yaml_file, out_json, mode),
        timeout=ctx.time_limit + allowance,
        cwd=ctx.work_dir,
    )
    res: dict[str, Any] = {
        "status": outcome.status,
        "wall_s": outcome.wall_s,
        "max_rss_mb": outcome.max_rss_mb,
    }
    if outcome.ok and out_json.exists():
        res.update(parse_pydcop(json.loads(out_json.read_text())))
        if res["pydcop_status"] != "FINISHED":
            res["status"] = "error"
            res["error"] = f"pyDCOP status {res['pydcop_status']}"
    elif outcome.ok:
        res["status"] = "error"
        res["error"] = "no result file: " + outcome.reason()
    elif outcome.status == "error":
        res["error"] = outcome.reason()
    return res


# ---------------------------------------------------------------------------------------- FRODO

_FRODO_MAIN = "frodo2.algorithms.AgentFactory"


def frodo_classpath(frodo: Path) -> str:
    """FRODO's classes (``frodo2.jar`` or ``classes/``) and the jars in ``lib/``."""
    parts = []
    if (frodo / "frodo2.jar").exists():
        parts.append(str(frodo / "frodo2.jar"))
    elif (frodo / "classes").is_dir():
        parts.append(str(frodo / "classes"))
    parts += sorted(str(p) for p in (frodo / "lib").glob("*.jar"))
    return ":".join(parts)


#: FRODO's agent-file switches that count messages, bytes and constraint checks (off by default:
#: counting costs FRODO about a third more wall time, so the timed run leaves them off)
_FRODO_STATS = (
    ('measureMsgs = "false"', 'measureMsgs = "true"'),
    ('countNCCCs = "false"', 'countNCCCs = "true"'),
)


def frodo_agent_config(frodo: Path, work_dir: Path, stats: bool = False) -> Path:
    """FRODO's own DPOP agent (``agents/DPOP/DPOPagent.xml``, simulated time on), graph printing
    off; with ``stats`` also message, byte and NCCC counting."""
    src = frodo / "agents" / "DPOP" / "DPOPagent.xml"
    dst = work_dir / ("DPOPagent-stats.xml" if stats else "DPOPagent.xml")
    if not dst.exists():
        text = src.read_text().replace('displayGraph = "true"', 'displayGraph = "false"')
        for off, on in _FRODO_STATS:
            text = text.replace(on, off)
            if stats:
                if off not in text:
                    raise ValueError(f"{src}: no `{off}` to switch on")
                text = text.replace(off, on)
        dst.write_text(text)
    return dst


def frodo_command(
    frodo: Path, xml_file: Path, agent: Path, timeout_s: float, mem_gb: float
) -> list[str]:
    java = shutil.which("java") or "java"
    return [
        java,
        f"-Xmx{max(1, int(mem_gb))}g",
        "-cp",
        frodo_classpath(frodo),
        _FRODO_MAIN,
        "-timeout",
        str(int(timeout_s * 1000)),
        str(xml_file),
        str(agent),
    ]


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _block(out: str, header: str) -> list[str]:
    """The indented lines under a statistics header (up to the next unindented line)."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header):
            block = []
            for nxt in lines[i + 1 :]:
                if not nxt.startswith(("\t", " ")):
                    break
                block.append(nxt.strip())
            return block
    return []


def _section_total(out: str, header: str) -> int | None:
    """The ``- Total:`` (or ``- Overall maximum:``) value under a statistics header."""
    for line in _block(out, header):
        m = re.match(r"- (?:Total|Overall maximum):\s*([\d,]+)", line)
        if m:
            return _int(m.group(1))
    return None


def _section_entry(out: str, header: str, key: str) -> int | None:
    """The value of the line naming ``key`` (e.g. ``UTILpropagation, UTIL``) under a header."""
    for line in _block(out, header):
        m = re.match(r"\[.*" + re.escape(key) + r"\]:\s*([\d,]+)", line)
        if m:
            return _int(m.group(1))
    return None


def parse_frodo(out: str) -> dict[str, Any]:
    """FRODO's console statistics: cost, simulated time, NCCCs, messages, bytes, largest message."""
    res: dict[str, Any] = {}
    m = re.search(r"Total cost of reported solution:\s*(\S+)", out)
    res["cost"] = (
        float(m.group(1).replace(",", ""))
        if m and m.group(1) != "infinity"
        else (float("inf") if m else None)
    )
    m = re.search(r"Algorithm finished in ([\d,]+) ms \(simulated time\)", out)
    res["simulated_s"] = _int(m.group(1)) / 1000 if m else None
    m = re.search(r"Number of NCCCs = ([\d,]+)", out)
    res["ncccs"] = _int(m.group(1)) if m else None
    res["messages"] = _section_total(out, "Number of messages sent (by type)")
    res["bytes"] = _section_total(out, "Amount of information sent (by type, in bytes)")
    res["largest_msg_bytes"] = _section_total(out, "Size of the largest message sent (by type")
    res["util_messages"] = _section_entry(
        out, "Number of messages sent (by type)", "UTILpropagation, UTIL"
    )
    res["util_bytes"] = _section_entry(
        out, "Amount of information sent (by type, in bytes)", "UTILpropagation, UTIL"
    )
    res["largest_util_bytes"] = _section_entry(
        out, "Size of the largest message sent (by type", "UTILpropagation, UTIL"
    )
    res["labels"] = {v: int(x) for v, x in re.findall(r"var `([^']+)' = (-?\d+)", out)}
    res["timed_out"] = "Timed out after" in out
    return res


#: What the counting run adds to the timed one.
FRODO_STATS_KEYS = (
    "messages",
    "bytes",
    "largest_msg_bytes",
    "util_messages",
    "util_bytes",
    "largest_util_bytes",
    "ncccs",
)


def run_frodo_twice(ctx: Context, xml_file: Path) -> dict[str, Any]:
    """FRODO's DPOP timed with its counters off; when it finished, once more with message, byte
    and NCCC counting on for those figures (``stats_run``: that run's status and times)."""
    res = run_frodo(ctx, xml_file)
    if res.get("status") != "ok":
        return res
    stats = run_frodo(ctx, xml_file, stats=True)
    res["stats_run"] = {
        k: stats.get(k) for k in ("status", "wall_s", "simulated_s", "cost", "error")
    }
    if stats.get("status") == "ok":
        res.update({k: stats.get(k) for k in FRODO_STATS_KEYS})
    return res


def run_frodo(ctx: Context, xml_file: Path, stats: bool = False) -> dict[str, Any]:
    """Solve with FRODO's DPOP (simulated time, -timeout = the suite's limit, -Xmx = memory);
    ``stats``: count messages, bytes and NCCCs too (slower)."""
    if ctx.frodo is None:
        return {"status": "not run", "error": "no --frodo given"}
    agent = frodo_agent_config(ctx.frodo, ctx.work_dir, stats)
    cmd = frodo_command(ctx.frodo, xml_file, agent, ctx.time_limit, ctx.mem_gb)
    # FRODO's own -timeout is on simulated time; the wall-clock kill comes a little later.
    outcome = ctx.run_command(cmd, timeout=ctx.time_limit + 30, address_space_limit=False)
    res: dict[str, Any] = {
        "status": outcome.status,
        "wall_s": outcome.wall_s,
        "max_rss_mb": outcome.max_rss_mb,
    }
    text = outcome.stdout + "\n" + outcome.stderr
    if "OutOfMemoryError" in text or "Out of Memory" in text:
        res["status"] = "oom"
        return res
    if outcome.status != "ok":
        if outcome.status == "error":
            res["error"] = outcome.reason()
        return res
    parsed = parse_frodo(text)
    res.update(parsed)
    if parsed["timed_out"]:
        # FRODO exits normally when its -timeout (simulated time) passes: no (complete) solution
        res["status"] = "oot"
    elif parsed["cost"] is None:
        res["status"] = "error"
        res["error"] = outcome.reason()
    return res
