"""The documentation runs: the README's Python example as a doctest, docstrings on every public
function and class of dcop, and no path of a particular machine in the docs."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import dcop.schema

ROOT = Path(__file__).resolve().parents[2]


def test_readme_python_example_runs() -> None:
    result = doctest.testfile(
        str(ROOT / "README.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert result.attempted >= 15 and result.failed == 0


def test_module_examples_run() -> None:
    result = doctest.testmod(dcop.schema)
    assert result.attempted >= 1 and result.failed == 0


def _packages() -> list[str]:
    """The import packages pyproject.toml installs (the top-level folders are mapped into dcop)."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages: list[str] = config["tool"]["setuptools"]["packages"]
    return packages


def _public_modules() -> Iterator[ModuleType]:
    for package in _packages():
        yield importlib.import_module(package)
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
            if info.name.startswith("_") or info.ispkg:
                continue  # private modules (__main__ runs on import); subpackages are listed
            yield importlib.import_module(f"{package}.{info.name}")


def _documented(obj: object) -> bool:
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__  # type: ignore[arg-type]
    if not doc:
        return False
    # a dataclass without a docstring gets its signature as one: that documents nothing
    return not (dataclasses.is_dataclass(obj) and doc.startswith(f"{obj.__name__}("))  # type: ignore[attr-defined]


def test_every_public_function_and_class_has_a_docstring() -> None:
    missing = []
    modules = list(_public_modules())
    assert len(modules) >= 40
    for module in modules:
        if not inspect.getdoc(module):
            missing.append(module.__name__)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue  # private, or imported from elsewhere (checked where it is defined)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and not _documented(obj):
                missing.append(f"{module.__name__}.{name}")
    assert not missing, f"public names without a docstring: {missing}"


def test_docs_name_no_path_of_a_machine() -> None:
    """Docs say "a Python 3.7 venv with pyDCOP", not where one machine keeps it."""
    machine = re.compile(r"/work/|/home/\w|/root/")
    docs = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("benchmarks/results/*.md")]
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in docs
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if machine.search(line)
    ]
    assert not found, found
