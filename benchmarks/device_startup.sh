#!/usr/bin/env bash
# On the GPU machine: the GPU tests, the start-up suite's GPU part (startup_gpu.*) and the kernel
# benchmark at d = 10, from a checkout copied there with wheels carried in WHEEL_DIR and the
# shared instances in INSTANCES; each step bounded by its own time limit, results into OUT.
#   bash benchmarks/device_startup.sh WHEEL_DIR INSTANCES OUT STEP...   (tests startup kernels)
set -u
wheels=$1 instances=$2 out=$3; shift 3
source "$(dirname "$0")/device_env.sh" "$wheels" || exit 1
export DCOP_INSTANCES
DCOP_INSTANCES="$(cd "$instances" && pwd)"
cd /tmp
python3 -c "import numpy, cupy; print('numpy', numpy.__version__, 'cupy', cupy.__version__)"
for step in "$@"; do
  started=$(date +%s)
  case "$step" in
    tests)
      timeout 240 python3 -m pytest -n 16 -p no:cacheprovider --import-mode=append \
        --rootdir "$DCOP_REPO" -c "$DCOP_REPO/pyproject.toml" -q "$DCOP_REPO/tests/gpu" 2>&1 \
        | tail -25 | tee "$out/tests_gpu.txt" ;;
    startup)
      timeout 330 python3 "$DCOP_REPO/benchmarks/startup.py" --gpu --out "$out" ;;
    kernels)
      timeout 150 python3 "$DCOP_REPO/benchmarks/gpu_kernels.py" --domains 10 --out "$out" \
        --name gpu_kernels_h200 ;;
  esac
  echo "step $step: rc $? in $(( $(date +%s) - started )) s"
done
