#!/usr/bin/env bash
# Build the dcop image offline: the Debian-built base (deploy/build-base.sh, cached) plus the
# project installed without touching any registry.
#
#   deploy/build-image.sh [--tag dcop:latest] [--base dcop-base:bookworm] [--force-base] [--no-cache]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
TAG=dcop:latest
BASE="${DCOP_BASE_IMAGE:-dcop-base:bookworm}"
BASE_ARGS=()
BUILD_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG="$2"; shift ;;
    --base) BASE="$2"; shift ;;
    --force-base) BASE_ARGS+=(--force) ;;
    --no-cache) BUILD_ARGS+=(--no-cache) ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "build-image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

DCOP_BASE_IMAGE="$BASE" "$HERE/build-base.sh" --tag "$BASE" ${BASE_ARGS[@]+"${BASE_ARGS[@]}"}
start=$(date +%s)
# DOCKER_BUILDKIT=0: the classic builder works with a bare dockerd (no buildx plugin needed)
# and never tries to pull the local base image.
DOCKER_BUILDKIT=0 docker build -q ${BUILD_ARGS[@]+"${BUILD_ARGS[@]}"} -f "$HERE/Dockerfile" -t "$TAG" \
  --build-arg BASE_IMAGE="$BASE" \
  --build-arg PIP_ARGS="--no-deps --no-index --no-build-isolation" \
  "$REPO" >/dev/null
echo "build-image: built $TAG on $BASE in $(( $(date +%s) - start )) s" >&2
