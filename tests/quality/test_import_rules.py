"""The import directions of docs/DESIGN.md: what must never import what.

Checked on the source with ``ast`` (every ``import`` and ``from ... import``, also inside
functions), so a lazy import breaks the rule just as a top-level one does. The rooms themselves
are written in four places (``pyproject.toml``'s packages, ``dcop/__init__.py``'s layout,
docs/DESIGN.md's tables and :data:`PACKAGES` / :data:`RULES` here): the last tests check that
the four agree, so that none of them drifts.
"""

from __future__ import annotations

import ast
import re
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
    "dcop/plan": "dcop.plan",
    "dcop/backends": "dcop.backends",
    "dcop/search": "dcop.search",
    "dcop/planar": "dcop.planar",
    "dcop/io": "dcop.io",
    "dcop/model.py": "dcop.model",
    "dcop/trees": "dcop.trees",
    "dcop/orders": "dcop.orders",
    "dcop/contraction": "dcop.contraction",
    "dcop/results": "dcop.results",
    "dcop/cli": "dcop.cli",
    "dcop/schema": "dcop.schema",
    "deploy": "dcop.deploy",
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
    ("dcop.orders", "dcop.inference", "orders are chosen from scopes and sizes, before solving"),
    ("dcop.orders", "dcop.gpu", "orders touch no device"),
    ("dcop.contraction", "dcop.protocol", "centralized code knows no network"),
    ("dcop.contraction", "dcop.agents", "the agents use the engine; it knows no agent"),
    ("dcop.contraction", "cupy", "the engine reaches the device through its backend"),
    ("dcop.contraction", "dcop.inference", "the engine plans with dcop.plan, below inference"),
    ("dcop.gpu", "dcop.inference", "the backends plan with dcop.plan, below inference"),
    ("dcop.plan", "dcop.inference", "what is decided before a solve knows no solver"),
    ("dcop.search", "dcop.protocol", "centralized code knows no network"),
    ("dcop.search", "dcop.agents", "centralized code knows no network"),
    ("dcop.search", "cupy", "the search reaches the device through its backend"),
    (
        "dcop.search",
        "dcop.inference",
        "the search uses the bucket pass and the plan, below inference",
    ),
    ("dcop.planar", "dcop.inference", "the planar solver sits below inference, which runs it"),
    ("dcop.planar", "dcop.search", "the planar solver needs no search, nor numba"),
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
#: The distributed rooms: below the CLI, nothing imports them (they may import each other).
DISTRIBUTED = ("dcop.coordinator", "dcop.deploy", "dcop.agents")
#: The rooms below the CLI that are not distributed (``dcop``: the modules of ``dcop/`` itself).
CORE = (
    "dcop",
    "dcop.model",
    "dcop.io",
    "dcop.trees",
    "dcop.orders",
    "dcop.plan",
    "dcop.backends",
    "dcop.contraction",
    "dcop.inference",
    "dcop.search",
    "dcop.planar",
    "dcop.results",
    "dcop.schema",
    "dcop.gpu",
    "dcop.protocol",
)
ONLY_THE_CLI = "only the CLI starts distributed runs"
RULES += [
    (room, room_of_runs, ONLY_THE_CLI)
    for room in CORE
    for room_of_runs in DISTRIBUTED
    if not any(a == room and b == room_of_runs for a, b, _ in RULES)
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
    if package == "dcop":  # the core's own modules, not its sub-packages
        return sorted((REPO / "dcop").glob("*.py"))
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


# ---- the rooms, written in four places, agree ---------------------------------------------------
def layout_rooms() -> dict[str, str]:
    """``dcop/__init__.py``'s layout: room -> folder, from its ``* ``room`` (``folder/``)`` lines."""
    doc = ast.get_docstring(ast.parse((REPO / "dcop" / "__init__.py").read_text())) or ""
    found = re.findall(r"^\* ``(dcop[\w.]*)`` \(``([\w/]+?)/?``\)", doc, re.MULTILINE)
    return dict(found)


def pyproject_rooms() -> dict[str, str]:
    """``pyproject.toml``'s packages: room -> folder (its package-dir, else its path)."""
    text = (REPO / "pyproject.toml").read_text()
    block = re.search(r"^packages = \[(.*?)\]", text, re.MULTILINE | re.DOTALL)
    mapped = re.search(r"^package-dir = \{(.*?)\}", text, re.MULTILINE)
    assert block and mapped, "pyproject.toml lists no packages or package-dir"
    dirs = dict(re.findall(r'"([\w.]+)" = "([\w/]+)"', mapped.group(1)))
    names = re.findall(r'"([\w.]+)"', block.group(1))
    return {n: dirs.get(n, n.replace(".", "/")) for n in names}


def design_tables() -> tuple[dict[str, str], set[tuple[str, str]]]:
    """docs/DESIGN.md's rooms table (room -> folder) and its table of rules (importer, never): a
    row may name several importers and several rooms, each pair a rule."""
    text = (REPO / "docs" / "DESIGN.md").read_text()
    rooms = dict(re.findall(r"^\| `(dcop[\w.]*)` \| `([\w/]+?)/` \|", text, re.MULTILINE))
    names = r"`[\w.]+`(?:, `[\w.]+`)*"
    rows = re.findall(rf"^\| ({names}) \| ({names}) \| [^|`]+\|$", text, re.MULTILINE)
    rules = {
        (a, b)
        for importers, forbidden in rows
        for a in re.findall(r"`([\w.]+)`", importers)
        for b in re.findall(r"`([\w.]+)`", forbidden)
    }
    return rooms, rules


def test_the_rooms_agree_in_the_layout_pyproject_and_the_design() -> None:
    layout = layout_rooms()
    assert layout, "no room found in dcop/__init__.py's layout"
    assert layout == pyproject_rooms()
    assert design_tables()[0] == layout


def test_the_import_rules_cover_the_rooms() -> None:
    layout = layout_rooms()
    rooms = {name: folder for folder, name in PACKAGES.items() if not folder.endswith(".py")}
    assert rooms == {r: f for r, f in layout.items() if r != "dcop"}, "PACKAGES and the layout"
    modules = {name for folder, name in PACKAGES.items() if folder.endswith(".py")}
    for importer, forbidden, _ in RULES:
        assert importer in layout or importer in modules, importer
        assert not forbidden.startswith("dcop.") or forbidden in layout, forbidden


def test_the_design_lists_exactly_the_rules_tested_here() -> None:
    assert design_tables()[1] == {(a, b) for a, b, _ in RULES}


def test_every_package_folder_is_installed() -> None:
    """A package folder missing from pyproject's packages works in the editable install of the
    tests and is absent from a wheel or an image (dcop.contraction and dcop.orders once were)."""
    mapped = [
        REPO / "dcop",
        *(REPO / f for f in ("agents", "coordinator", "protocol", "gpu", "deploy")),
    ]
    found = {
        init.parent.relative_to(REPO).as_posix()
        for root in mapped
        for init in root.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found <= set(pyproject_rooms().values())
