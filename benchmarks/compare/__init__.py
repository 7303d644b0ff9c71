"""Helpers of ``benchmarks/run.py``: isolation (time/memory limits), machine description, reports,
and drivers for the external tools compared against (toulbar2, pyDCOP, FRODO).

The external tools are installed outside the repository; only their results are committed.
"""
