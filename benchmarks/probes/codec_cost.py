"""Probe: what encoding and decoding one message costs (Degree, Token, Util), in microseconds.

Run before and after a change of the wire format (``python benchmarks/probes/codec_cost.py``);
prints a line per message: encode, decode, and the header's bytes. Results are not committed;
what was learnt is kept in ``CONCLUSION`` below.
"""

from __future__ import annotations

import sys
import timeit

import numpy as np

from dcop.protocol import Degree, Sizing, Token, Util, WireTable, decode, encode

#: Measured when the messages moved from hand-written dataclasses to msgspec Structs (2-core VM
#: shared with six other sessions, best of 5 x 2000, three alternating runs; only the ratios mean
#: much): us per call (encode, decode) before -> after. Degree (1.7-5.7, 11.5-19.5) -> (0.4,
#: 1.9-4.2); Token back with 8 sizings (12.9-21.4, 71-95) -> (1.0, 7.7-10.3); Util of one
#: 1000-entry table (7.5-10.8, 33-47) -> (0.9, 15-20: the NaN check of the table remains).
CONCLUSION = "msgspec: encode 5-20x and decode 2-9x cheaper; a UTIL's decode is its NaN check"


def messages() -> dict[str, object]:
    table = WireTable.from_array(("a", "b", "c"), np.random.default_rng(0).random((10, 10, 10)))
    back = Token(
        1,
        "back",
        (),
        (),
        tuple(range(10)),
        tuple(range(40)),
        (3, 5, 9),
        3,
        1000,
        5000,
        tuple(Sizing(((3, 5),), 100 * k, 7, 900) for k in range(8)),
        0.25,
    )
    return {
        "degree": Degree(tuple(range(10)), 0.5),
        "token": back,
        "util": Util((table,), 1.0, ()),
    }


def main(number: int = 2000, repeat: int = 7) -> None:
    for name, body in messages().items():
        frames = encode(1, 2, body)  # type: ignore[arg-type]
        raw = [bytes(f) for f in frames]
        enc = min(timeit.repeat(lambda b=body: encode(1, 2, b), number=number, repeat=repeat))
        dec = min(timeit.repeat(lambda r=raw: decode(r), number=number, repeat=repeat))
        print(
            f"{name:7s} encode {enc / number * 1e6:7.2f} us  decode {dec / number * 1e6:7.2f} us"
            f"  header {len(raw[0])} bytes"
        )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
