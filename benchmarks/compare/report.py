"""Results files: one JSON (everything measured) and one Markdown table per suite."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from compare.machine import describe


def fmt_time(x: Any) -> str:
    """Seconds with 3 significant digits; status words (oot/oom/error) pass through."""
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_num(x: Any, digits: int = 4) -> str:
    """A cost or bound: integers exactly, others with ``digits`` decimals."""
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.{digits}f}"


def fmt_ratio(x: Any) -> str:
    if x is None or isinstance(x, str):
        return "-" if x is None else x
    return f"{x:.3g}x"


def ratio(slow: Any, fast: Any) -> float | None:
    """slow / fast when both are numbers (a timing ratio), else None."""
    if isinstance(slow, (int, float)) and isinstance(fast, (int, float)) and fast > 0:
        return float(slow) / float(fast)
    return None


def geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if isinstance(v, (int, float)) and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float) and math.isinf(obj):
        return "inf" if obj > 0 else "-inf"
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "item"):
        return obj.item()
    return obj


def write_results(
    out_dir: Path,
    name: str,
    title: str,
    meta: dict[str, Any],
    rows: list[dict[str, Any]],
    markdown_sections: Sequence[str],
    summary: dict[str, Any] | None = None,
) -> tuple[Path, Path]:
    """Write ``NAME.json`` and ``NAME.md``; both carry the machine description and the command,
    and go through :func:`keep.write_results` (the one way into benchmarks/results/)."""
    from keep import write_results as keep_results

    out_dir.mkdir(parents=True, exist_ok=True)
    created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    doc = {
        "suite": name,
        "title": title,
        "created": created,
        **meta,
        "summary": summary or {},
        "rows": rows,
    }
    lines = [
        f"# {title}",
        "",
        f"- Machine: {describe(meta['machine'])}",
        f"- Command: `{meta['command']}`",
        f"- Limits per instance: {meta['limits']}",
        f"- Written: {created}",
        "",
    ]
    lines += [s.rstrip() + "\n" for s in markdown_sections]
    json_path = keep_results(out_dir, name, _jsonable(doc), "\n".join(lines).rstrip() + "\n")
    return json_path, out_dir / f"{name}.md"
