#!/usr/bin/env bash
# Source this on a GPU machine where dcop is not installed (no network, no build tools needed):
#   source benchmarks/device_env.sh [WHEEL_DIR]
# It installs carried wheels (if a folder is given) into /tmp/dcop-site, builds a tree of links
# that puts agents/, coordinator/, protocol/, gpu/ and deploy/ under their import names
# (dcop.agents, ...), and puts both first on PYTHONPATH. Run Python from outside the repository:
# a dcop/ folder in the current directory would shadow the link tree.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
site=/tmp/dcop-site
tree=/tmp/dcop-tree
if [ -n "${1:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$1"/*.whl || return 1
fi
rm -rf "$tree" && mkdir -p "$tree/dcop"
for f in "$repo"/dcop/*; do ln -s "$f" "$tree/dcop/"; done
for p in agents coordinator protocol gpu deploy; do ln -s "$repo/$p" "$tree/dcop/$p"; done
export PYTHONPATH="$tree:$site:$repo${PYTHONPATH:+:$PYTHONPATH}"
export DCOP_REPO="$repo"
# Bytecode written, in a folder of its own: the GPU machine sets PYTHONDONTWRITEBYTECODE and its
# site-packages hold no .pyc, so every fresh process compiled numpy and dcop from source (0.3 s
# of a small solve there; an install writes its bytecode once).
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/dcop-pycache
# The copy's .git may be a stale snapshot: pass DCOP_COMMIT=<hash> in the command for the
# results' commit field (benchmarks/compare/machine.py).
# GPU tests, from outside the checkout too (pytest's default import mode would put the checkout's
# dcop/, which lacks the agents/... links, ahead of the tree):
#   cd /tmp && python3 -m pytest -n 16 -p no:cacheprovider --import-mode=append \
#     --rootdir "$DCOP_REPO" -c "$DCOP_REPO/pyproject.toml" "$DCOP_REPO/tests/gpu" ...
