#!/usr/bin/env bash
# On the GPU machine: the GPU and search tests, or the search suite with --gpu (toulbar2 on the
# host's cores beside it), from a checkout copied there with wheels carried in WHEEL_DIR.
#   bash benchmarks/device_search.sh WHEEL_DIR OUT tests
#   bash benchmarks/device_search.sh WHEEL_DIR OUT bench LIMIT [ONLY...]
set -u
wheels=$1 out=$2 what=$3; shift 3
source "$(dirname "$0")/device_env.sh" "$wheels" || exit 1
cd /tmp
python3 -c "import numba, numpy, cupy; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cupy', cupy.__version__)"
python3 -m dcop.search.warm
if [ "$what" = tests ]; then
  python3 -m pytest -n 16 -p no:cacheprovider --import-mode=append --rootdir "$DCOP_REPO" \
    -c "$DCOP_REPO/pyproject.toml" -q "$DCOP_REPO/tests/gpu" "$DCOP_REPO/tests/search" 2>&1 \
    | tail -40
else
  limit=$1; shift
  python3 "$DCOP_REPO/benchmarks/run.py" search --gpu --limit "$limit" --jobs 12 \
    --settings tb2 "tb2 -B=1" "dcop auto" ${1:+--only "$@"}
  cp "$DCOP_REPO"/benchmarks/results/search_gpu.* "$out"/
fi
