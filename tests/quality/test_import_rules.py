"""The import directions of docs/DESIGN.md: what must never import what.

Checked on the source with ``ast`` (every ``import`` and ``from ... import``, also inside
functions), so a lazy import breaks the rule just as a top-level one does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: folder -> import name
PACKAGES = {
    "agents": "dcop.agents",
    "coordinator": "dcop.coordinator",
    "protocol": "dcop.protocol",
    "gpu": "dcop.gpu",
    "dcop/inference": "dcop.inference",
    "dcop/io": "dcop.io",
    "dcop/model.py": "dcop.model",
    "dcop/trees": "dcop.trees",
    "dcop/results": "dcop.results",
}
#: (importer, forbidden prefix, why)
RULES = [
    ("dcop.inference", "dcop.agents", "centralized code knows no network"),
    ("dcop.inference", "dcop.protocol", "centralized code knows no network"),
    ("dcop.protocol", "dcop.inference", "the protocol solves nothing"),
    ("dcop.protocol", "dcop.agents", "the protocol knows no agent"),
    ("dcop.protocol", "dcop.coordinator", "the protocol knows no coordinator"),
    ("dcop.protocol", "dcop.gpu", "the protocol touches no device"),
    ("dcop.protocol", "cupy", "the protocol touches no device"),
    ("dcop.protocol", "dcop.trees", "the protocol carries trees but builds none"),
    ("dcop.trees", "dcop.protocol", "the pseudo-tree is an algorithm, not a wire format"),
    ("dcop.trees", "dcop.agents", "both sides use the trees; the trees know neither"),
    ("dcop.trees", "dcop.coordinator", "both sides use the trees; the trees know neither"),
    ("dcop.trees", "dcop.gpu", "the trees touch no device"),
    ("dcop.trees", "zmq", "the trees know no transport"),
    ("dcop.coordinator", "dcop.agents", "coordinator and agents talk over the wire only"),
    ("dcop.agents", "dcop.coordinator", "coordinator and agents talk over the wire only"),
    ("dcop.coordinator", "dcop.cli", "presentation sits above the coordinator"),
    ("dcop.coordinator", "dcop.inference", "a distributed run solves nothing centrally"),
    ("dcop.results", "dcop.inference", "results are data: they know no solver"),
    ("dcop.results", "dcop.coordinator", "results are data: they know no solver"),
    ("dcop.results", "dcop.agents", "results are data: they know no solver"),
    ("dcop.results", "dcop.cli", "results are data: presentation sits above them"),
    ("dcop.agents", "dcop.cli", "presentation sits above the agents"),
    ("dcop.model", "dcop.cli", "the model knows no command line"),
    ("dcop.model", "dcop.gpu", "the model knows no device"),
    ("dcop.io", "dcop.inference", "reading a file solves nothing"),
]


def imports_of(path: Path) -> set[str]:
    """Every module a file imports (absolute names; relative imports are not used here)."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def files_of(package: str) -> list[Path]:
    folder = next(f for f, name in PACKAGES.items() if name == package)
    root = REPO / folder
    return [root] if root.is_file() else sorted(root.rglob("*.py"))


@pytest.mark.parametrize(("importer", "forbidden", "why"), RULES)
def test_import_rule(importer: str, forbidden: str, why: str) -> None:
    broken = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in files_of(importer)
        for name in sorted(imports_of(path))
        if name == forbidden or name.startswith(forbidden + ".")
    ]
    assert not broken, f"{importer} must not import {forbidden} ({why}): {broken}"


def test_rule_checker_sees_lazy_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from dcop.agents.dfs import x\n    import cupy\n")
    assert {"dcop.agents.dfs", "dcop.agents.dfs.x", "cupy"} <= imports_of(source)
