"""The typed results of every command and the one result document they write.

* ``document``   the document itself: statuses, exit codes, ``result_document`` (JSON Schema:
  ``dcop/schema/result.schema.json``)
* ``solve``      ``SolveResult``: a centralized BE/MBE/MPE solve
* ``partition``  ``PartitionResult``: ``ln Z`` (or bounds on it) and MAR's marginals
* ``run``        ``RunResult`` and ``TreeChoice``: a distributed DPOP/ADPOP run, with its wire
  metrics and the pseudo-tree kept

The document's names are re-exported here; import the typed results from their modules (a
centralized command then never loads the distributed run's).
"""

from dcop.results.document import (
    EXIT_BAD_INPUT,
    EXIT_CODES,
    SCHEMA,
    STATUSES,
    Status,
    after_answer,
    file_value,
    json_number,
    objective,
    plain_label,
    result_document,
    status_of,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CODES",
    "SCHEMA",
    "STATUSES",
    "Status",
    "after_answer",
    "file_value",
    "json_number",
    "objective",
    "plain_label",
    "result_document",
    "status_of",
]
