#!/usr/bin/env bash
# On the GPU machine: the search's sanity on CuPy, then benchmarks/search.py --gpu (toulbar2 on
# the host's cores beside it). Usage: bash benchmarks/device_search.sh WHEEL_DIR OUT LIMIT [ONLY...]
set -u
wheels=$1 out=$2 limit=$3; shift 3
source "$(dirname "$0")/device_env.sh" "$wheels" || exit 1
cd /tmp
python3 -c "import numba, numpy, cupy; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cupy', cupy.__version__)"
python3 -m dcop.search.warm
python3 - <<'PY'
import time
from dcop.generators import random_network
from dcop.search import solve_aobb
for backend in ("numpy", "cupy"):
    t = time.monotonic()
    r = solve_aobb(random_network(22, 10, 0.3, 0.0, seed=1), backend=backend)
    print(backend, r.status, r.upper_bound, round(time.monotonic() - t, 2), "s",
          [s.to_json() for s in r.search.steps], f"{r.search.rate:.3g}/s", flush=True)
PY
python3 "$DCOP_REPO/benchmarks/search.py" --gpu --limit "$limit" --jobs 12 \
  --settings tb2 "tb2 -B=1" "dcop auto" --out "$out" ${1:+--only "$@"}
