"""The checks behind every fuzz target, shared by the atheris runner and the regression tests.

A target takes arbitrary bytes. The only acceptable outcomes are:

* the input is rejected with the project's own error (``InputError`` for the instance readers,
  ``ProtocolError`` for the wire decoder), or
* it is accepted, and then what was accepted is self-consistent: a Problem written back in the
  same format reads back as the same problem (same domains, same cost on sample assignments); a
  decoded frame re-encodes to bytes that decode to the same frame.

Anything else (another exception, a failed check, a hang or memory blow-up caught by libFuzzer's
``-timeout`` / ``-rss_limit_mb``) is a crash. Nothing here imports atheris, so the pytest
regression suite (tests/quality) replays saved inputs through exactly these functions.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

#: Reader targets and the file extension each one is read with.
READER_EXT = {"wcsp": ".wcsp", "uai": ".uai", "yaml": ".yaml", "xml": ".xml"}
TARGETS = (*READER_EXT, "protocol")

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
REGRESSIONS = HERE / "regressions"
#: Seed files larger than this are skipped (libFuzzer mutates small inputs best).
MAX_SEED_BYTES = 16_384
#: Sample assignments compared after a round trip.
SAMPLES = 16


class FuzzFailure(AssertionError):
    """An accepted input whose result is not self-consistent."""


def check(target: str, data: bytes, workdir: Path) -> str:
    """Run one input through ``target``; returns "rejected" or "accepted", raises on a bug."""
    if target == "protocol":
        return check_protocol(data)
    return check_reader(target, data, workdir)


# ---- instance readers -------------------------------------------------------------------------
def check_reader(fmt: str, data: bytes, workdir: Path) -> str:
    """Read ``data`` as a ``fmt`` file; if it parses, write it back and compare."""
    from dcop.errors import DcopError, InputError
    from dcop.io import read_problem, write_problem

    ext = READER_EXT[fmt]
    path = workdir / f"input{ext}"
    path.write_bytes(data)
    try:
        problem = read_problem(path)
    except InputError:
        return "rejected"
    again_path = workdir / f"again{ext}"
    try:
        write_problem(problem, again_path)
    except DcopError:
        # A writer may refuse what its format cannot express with a clear error (ModelError,
        # e.g. a YAML file whose only constraint is a constant: no variables to hang it on).
        return "accepted"
    try:
        again = read_problem(again_path)
    except InputError as exc:
        raise FuzzFailure(f"the writer's own output does not read back: {exc}") from None
    same_problem(problem, again, seed=data)
    return "accepted"


def same_problem(a: object, b: object, seed: bytes = b"") -> None:
    """Same domain sizes, sign, cost kind and cost on sample assignments (matched by position)."""
    from dcop.model import Problem

    assert isinstance(a, Problem) and isinstance(b, Problem)
    sizes = [v.size for v in a.variables.values()]
    if sizes != [v.size for v in b.variables.values()]:
        raise FuzzFailure(f"domain sizes changed in a round trip: {sizes[:8]} ...")
    if (a.sign, a.cost_kind) != (b.sign, b.cost_kind):
        raise FuzzFailure(f"sign/kind changed: {(a.sign, a.cost_kind)} -> {(b.sign, b.cost_kind)}")
    names_a, names_b = list(a.variables), list(b.variables)
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed).digest()[:8], "little"))
    for k in range(SAMPLES):
        if k == 0:
            values = [0] * len(sizes)
        elif k == 1:
            values = [s - 1 for s in sizes]
        else:
            values = [int(rng.integers(0, s)) for s in sizes]
        ca = a.evaluate(dict(zip(names_a, values, strict=True)))
        cb = b.evaluate(dict(zip(names_b, values, strict=True)))
        if not _close(ca, cb):
            raise FuzzFailure(f"cost of {values[:8]} changed in a round trip: {ca!r} -> {cb!r}")


def _close(x: float, y: float) -> bool:
    if math.isinf(x) or math.isinf(y) or math.isnan(x) or math.isnan(y):
        return x == y
    # UAI stores probabilities: exp/log on the way through costs a few ulps.
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)


# ---- protocol decoder -------------------------------------------------------------------------
#: A fuzz input holds one message: its frames, each as a 4-byte little-endian length and the bytes
#: (an input without this magic is one frame).
FRAMES_MAGIC = b"DCF1"


def pack_frames(frames: list[bytes | memoryview]) -> bytes:
    """A message's frames as one fuzz input."""
    out = bytearray(FRAMES_MAGIC)
    for f in frames:
        data = bytes(f)
        out += len(data).to_bytes(4, "little") + data
    return bytes(out)


def unpack_frames(data: bytes) -> list[bytes]:
    """The frames of a fuzz input (a truncated last frame keeps what is there)."""
    if not data.startswith(FRAMES_MAGIC):
        return [data]
    frames, k = [], len(FRAMES_MAGIC)
    while k + 4 <= len(data):
        n = int.from_bytes(data[k : k + 4], "little")
        frames.append(data[k + 4 : k + 4 + n])
        k += 4 + n
    return frames or [b""]


def check_protocol(data: bytes) -> str:
    """Decode ``data`` as a message; if it decodes, re-encoding must give a stable message."""
    from dcop.errors import ProtocolError
    from dcop.protocol import decode, encode

    try:
        env = decode(unpack_frames(data))
    except ProtocolError:
        return "rejected"
    frames = pack_frames(encode(env.sender, env.receiver, env.body, env.problem))
    try:
        again = decode(unpack_frames(frames))
    except ProtocolError as exc:
        raise FuzzFailure(f"a decoded message re-encodes to a rejected frame: {exc}") from None
    if pack_frames(encode(again.sender, again.receiver, again.body, again.problem)) != frames:
        raise FuzzFailure("re-encoding a decoded message is not stable")
    for table in getattr(env.body, "tables", ()):
        # The agent reshapes the bytes: the codec must have checked shape, dtype and size.
        arr = table.to_array()
        if arr.shape != table.shape or np.isnan(arr).any():
            raise FuzzFailure("a table passed decode but is not what it claims")
    return "accepted"


# ---- structure-aware mutation of frames -------------------------------------------------------
#: Values that break validators: wrong types, edges of ranges, non-finite floats, long strings.
INTERESTING: tuple[object, ...] = (
    None,
    True,
    False,
    0,
    1,
    -1,
    2,
    255,
    1 << 24,
    (1 << 24) + 1,
    (1 << 31) - 1,
    1 << 31,
    (1 << 62),
    (1 << 63) - 1,
    -(1 << 63),
    (1 << 64) - 1,
    0.0,
    -0.0,
    0.5,
    -1.5,
    1e308,
    math.inf,
    -math.inf,
    math.nan,
    "",
    "x",
    "x" * 300,
    "x" * 5000,
    "<f8",
    "<f4",
    ">f8",
    "|u1",
    "dpop",
    "adpop",
    "child",
    "back",
    "util",
    "value",
    "token",
    "result",
    "setup",
    b"",
    b"\x00" * 7,
    b"\x00" * 8,
    b"\xff" * 16,
    [],
    [0],
    [1, 2],
    ["x1", "x1"],
    {},
    {"x1": 0},
)


def mutate_frame(data: bytes, seed: int) -> bytes | None:
    """Decode ``data`` as msgpack and change one thing inside (a value, a key, a list); returns
    the re-packed frame, or None when ``data`` is not msgpack (the caller mutates bytes then)."""
    import random

    import msgpack

    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception:
        return None
    rnd = random.Random(seed)
    containers: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict | list):
            containers.append(node)
            for child in node.values() if isinstance(node, dict) else node:
                walk(child)

    walk(obj)
    if not containers:
        obj = {
            "v": 5,
            "s": 1,
            "r": -1,
            "p": {"t": rnd.choice(["util", "hello", "value"]), "x": obj},
        }
        containers.append(obj)
    box = rnd.choice(containers)
    op = rnd.randrange(5)
    keys = list(box) if isinstance(box, dict) else list(range(len(box)))
    if op == 0 and keys:  # replace a value
        box[rnd.choice(keys)] = rnd.choice(INTERESTING)
    elif op == 1 and keys:  # drop an entry
        del box[rnd.choice(keys)]
    elif op == 2:  # add an entry
        value = rnd.choice(INTERESTING)
        if isinstance(box, dict):
            box[rnd.choice(["extra", "p", "tables", "shape", "data", 7])] = value
        else:
            box.insert(rnd.randrange(len(box) + 1), value)
    elif op == 3 and keys:  # nudge a number
        key = rnd.choice(keys)
        if type(box[key]) is int:
            box[key] += rnd.choice([-1, 1, 1 << 20, -(1 << 20)])
        elif isinstance(box[key], bytes):
            box[key] = box[key][: rnd.randrange(len(box[key]) + 1)] + b"\x00" * rnd.randrange(3)
    elif keys:  # copy one entry over another (type confusion between fields)
        a, b = rnd.choice(keys), rnd.choice(keys)
        box[a] = box[b]
    try:
        frame: bytes = msgpack.packb(obj, use_bin_type=True)
    except (ValueError, TypeError, OverflowError):
        return None
    return frame


# ---- seeds ------------------------------------------------------------------------------------
def protocol_seeds() -> dict[str, bytes]:
    """One valid frame per message type (and a few variants)."""
    from dcop.protocol import (
        COORDINATOR_ID,
        AgentMetrics,
        Degree,
        Done,
        Down,
        Error,
        Go,
        Heartbeat,
        Hello,
        IpcTable,
        Neighbour,
        Offer,
        Result,
        RunSpec,
        Setup,
        Sizing,
        Start,
        Stop,
        Token,
        TreeReport,
        Util,
        Value,
        WireTable,
        encode,
    )
    from dcop.protocol.messages import ROWS, ClusterCut, More, Replay, Whole, WideSep

    table = WireTable.from_array(("x1", "x2"), np.array([[0.0, 1.5], [np.inf, 3.0]]))
    small = WireTable.from_array(("x1",), np.arange(3, dtype=np.float32))
    scalar = WireTable.from_array((), np.float64(7.0))
    metrics = AgentMetrics({"util": 1}, {"util": 99}, {"value": 1}, {"value": 20}, 0.1, 0.2, 99)
    handle = bytes(range(64))  # a CUDA IPC handle's size
    messages = {
        "hello": Hello("x1", 1234, "localhost", "tcp://127.0.0.1:7001", True, 0.1, "", "cuda/a"),
        "setup": Setup(
            "x1", 2, (table, small), "ab" * 32, (Neighbour(2, "x2", "tcp://h:7002", "cuda/a"),)
        ),
        "setup_start": Setup(
            "x1", 2, (small,), "ab" * 32, (), (), Start(RunSpec("adpop", 3, trees=1), (0,))
        ),
        "degree": Degree((0, 3), 0.5),
        "token_child": Token(0, "child", (1, 1), 0.25, path=(0, 3), domains=(2, 3)),
        "token_back": Token(
            0,
            "back",
            (0, 1),
            0.0,
            links=((1, 2),),
            separator=(0,),
            width=1,
            sizings=(Sizing(((0,),), 2, 2, 2),),
        ),
        "tree": TreeReport(0, 2, (Sizing((), 9, 1, 12),)),
        "go": Go(0, None),
        "go_mbdpop": Go(0, None, (ClusterCut(2, (3, 4), (0, 2), (3, 2), 4, 18.0, ("x0", "x2")),)),
        "token_wide": Token(
            0,
            "back",
            separator=(0, 2),
            width=2,
            sizings=(Sizing(((0, 2),), 6, 3, 6),),
            wide=(WideSep(3, 2, 3, (0, 2), (3, 2)),),
            clusters=(ClusterCut(5, (6,), (1,), (4,), 4, 8.0),),
        ),
        "util_chunk": Util(
            (WireTable.from_array((ROWS, "x1"), np.zeros((2, 3))),),
            1.0,
            (),
            0,
            1,
            2,
            Whole(("\x00ctx", "x1"), (4, 3)),
        ),
        "util_parts": Util(
            (WireTable.from_array((ROWS, "x2"), np.zeros((1, 2))),),
            1.0,
            (),
            part=1,
            parts=2,
            whole=Whole(("x1", "x2"), (2, 2)),
        ),
        "more": More(3, 1.5),
        "replay": Replay((("x0", 2), ("x2", 1)), 1.75),
        "util": Util((table, scalar), 1.0, ()),
        "util_shared": Util((scalar,), 1.0, (IpcTable(("x1", "x3"), (4, 5), "<f4", handle, 256),)),
        "offer": Offer(handle, 1 << 20, 0.5),
        "value": Value((("x1", 1), ("x2", 0)), 2.0),
        "down": Down((small,), 2.5),
        "result": Result(1, 12.0, None, (2, 3), (), (0,), metrics),
        "result_mar": Result(None, -3.5, None, (2,), (), (), metrics, (0.25, 0.75)),
        "result_child": Result(0, None, 4, (), (1,), (0, 1), AgentMetrics()),
        "error": Error("neighbour 3 went silent", 3),
        "stop": Stop("done"),
        "done": Done("done"),
        "heartbeat": Heartbeat("util", 10, True),
    }
    out = {}
    for name, body in messages.items():
        receiver = (
            2
            if name
            in (
                "degree",
                "token_child",
                "token_back",
                "util",
                "util_shared",
                "offer",
                "value",
                "down",
            )
            else 0
        )
        sender = COORDINATOR_ID if name in ("setup", "start", "stop", "go", "done") else 1
        if name in (
            "hello",
            "ready",
            "result",
            "result_child",
            "result_mar",
            "error",
            "tree",
            "heartbeat",
        ):
            receiver = COORDINATOR_ID
        out[f"{name}.bin"] = pack_frames(encode(sender, receiver, body, 7))
    return out


def seed_files(instances: Path, extra: list[Path]) -> dict[str, list[Path]]:
    """Small instance files per reader target, from ``instances`` (recursively) and ``extra``."""
    found: dict[str, list[Path]] = {t: [] for t in READER_EXT}
    suffixes = {".yml": "yaml", **{ext: fmt for fmt, ext in READER_EXT.items()}}
    candidates = sorted(instances.rglob("*")) if instances.is_dir() else []
    for path in [*candidates, *extra]:
        fmt = suffixes.get(path.suffix.lower())
        if fmt and path.is_file() and path.stat().st_size <= MAX_SEED_BYTES:
            found[fmt].append(path)
    return found


def write_seed_corpus(instances: Path, extra: list[Path], corpus: Path = CORPUS) -> dict[str, int]:
    """Fill ``corpus/<target>/`` with seeds; returns how many files each target has."""
    counts = {}
    for fmt, paths in seed_files(instances, extra).items():
        folder = corpus / fmt
        folder.mkdir(parents=True, exist_ok=True)
        for path in paths:
            shutil.copyfile(path, folder / f"{path.parent.name}-{path.name}")
        counts[fmt] = len(list(folder.iterdir()))
    folder = corpus / "protocol"
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in protocol_seeds().items():
        (folder / name).write_bytes(frame)
    counts["protocol"] = len(list(folder.iterdir()))
    return counts


def regression_inputs(root: Path = REGRESSIONS) -> list[tuple[str, Path]]:
    """Every saved crash input as (target, path): ``regressions/<target>/<name>``."""
    out: list[tuple[str, Path]] = []
    for target in TARGETS:
        folder = root / target
        if folder.is_dir():
            out.extend((target, p) for p in sorted(folder.iterdir()) if p.is_file())
    return out


def replay(target: str, data: bytes) -> str:
    """``check`` in a fresh temporary folder (for one-off replays)."""
    with tempfile.TemporaryDirectory(prefix="dcop-fuzz-") as tmp:
        return check(target, data, Path(tmp))
