"""JSON Schemas of what dcop writes, shipped with the package.

``result.schema.json`` (JSON Schema draft 2020-12) holds the result document of every command
(:mod:`dcop.results`) as ``$defs/result``, which its root points at, and the document of
``dcop batch --json`` as ``$defs/batch``. Validating needs a JSON Schema library
(``jsonschema``, in the ``test`` extra); loading the schemas needs nothing.

Examples
--------
>>> from dcop.schema import result_schema
>>> result_schema()["$defs"]["result"]["properties"]["status"]["enum"][:2]
['ok', 'infeasible']
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

#: File name of the schema inside this package.
RESULT_SCHEMA_FILE = "result.schema.json"


@cache
def _text() -> str:
    return resources.files(__name__).joinpath(RESULT_SCHEMA_FILE).read_text(encoding="utf-8")


def result_schema() -> dict[str, Any]:
    """The JSON Schema of one result document.

    Returns
    -------
    dict
        A fresh copy of ``result.schema.json``: its root refers to ``$defs/result``.
    """
    schema: dict[str, Any] = json.loads(_text())
    return schema


def batch_schema() -> dict[str, Any]:
    """The JSON Schema of the ``dcop batch --json`` document.

    Returns
    -------
    dict
        ``result.schema.json`` with its root referring to ``$defs/batch`` instead (whose
        ``results`` are result documents).
    """
    schema = result_schema()
    schema["$ref"] = "#/$defs/batch"
    schema["title"] = "dcop batch document"
    return schema


__all__ = ["RESULT_SCHEMA_FILE", "batch_schema", "result_schema"]
