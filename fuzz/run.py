"""Coverage-guided fuzzing of the instance readers and the wire decoder with atheris.

    python fuzz/run.py seeds [INSTANCES_DIR]       fill fuzz/corpus/<target>/ with seeds
    python fuzz/run.py TARGET [libFuzzer flags...] fuzz one target (wcsp uai yaml xml protocol)

``make fuzz`` runs every target for ``FUZZ_SECONDS`` each. New interesting inputs go to the
first corpus folder libFuzzer is given (``make fuzz`` passes a scratch folder outside the repo,
then the committed seeds); crashes are written where ``-artifact_prefix`` says. A crash is any
exception other than the target's own error, a failed consistency check (see targets.py), a
per-input timeout (``-timeout``) or memory above ``-rss_limit_mb``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _seeds(argv: list[str]) -> int:
    import targets

    instances = Path(argv[0]) if argv else HERE.parent.parent / "shared" / "instances"
    extra = sorted((HERE.parent / "tests" / "io" / "data").glob("*"))
    counts = targets.write_seed_corpus(instances, extra)
    for name, count in counts.items():
        print(f"{name}: {count} seed files in {targets.CORPUS / name}")
    return 0


def _fuzz(target: str, flags: list[str]) -> int:
    import atheris

    # Instrument only our own code: the readers, the model and the protocol are what we test.
    with atheris.instrument_imports(include=["dcop"]):
        import targets

        import dcop.errors
        import dcop.io
        import dcop.protocol

    if target not in targets.TARGETS:
        print(f"unknown target {target!r}; use one of {', '.join(targets.TARGETS)}")
        return 2
    del dcop  # imported above only so that it is instrumented
    workdir = Path(tempfile.mkdtemp(prefix=f"dcop-fuzz-{target}-"))

    def one_input(data: bytes) -> None:
        targets.check(target, data, workdir)

    def frame_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        # Half the time change the msgpack structure (fields, types, sizes), which byte flips
        # rarely reach; otherwise libFuzzer's own byte-level mutation.
        if seed % 2 == 0:
            out = targets.mutate_frame(data, seed)
            if out is not None and len(out) <= max_size:
                return out
        mutated: bytes = atheris.Mutate(data, max_size)
        return mutated

    if target == "protocol":
        atheris.Setup([sys.argv[0], *flags], one_input, custom_mutator=frame_mutator)
    else:
        atheris.Setup([sys.argv[0], *flags], one_input)
    atheris.Fuzz()
    return 0  # not reached: libFuzzer exits the process


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    if argv[0] == "seeds":
        return _seeds(argv[1:])
    return _fuzz(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
