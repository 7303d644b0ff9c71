#!/usr/bin/env bash
# Build the offline base image for dcop from Debian packages (no image registry needed).
#
#   deploy/build-base.sh [--force] [--tag dcop-base:bookworm]
#
# debootstrap installs a minimal Debian bookworm with python3 and the Debian builds of numpy,
# pyzmq, PyYAML, rich, click and defusedxml; the few Python packages that bookworm has too old or
# lacks (typer>=0.12, networkx>=3, msgspec, opt_einsum, cotengra, goatd, setuptools>=77 for building the
# project) are downloaded as
# wheels with this machine's pip into a virtual environment at /opt/dcop (which also sees the
# Debian packages). The tree is then `docker import`ed.
#
# The Debian mirror is the one this machine's apt uses (read from /etc/apt/sources.list and
# /etc/apt/sources.list.d/ at run time), or $DCOP_DEBIAN_MIRROR, or debootstrap's default.
# The build is skipped when the image already exists with the same recipe version (use --force).
set -euo pipefail

TAG="${DCOP_BASE_IMAGE:-dcop-base:bookworm}"
FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1 ;;
    --tag) TAG="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "build-base.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# Bump when the recipe below changes, so that cached images are rebuilt.
RECIPE=3
SUITE=bookworm
DEBS=(python3 python3-venv python3-pip python3-numpy python3-zmq python3-yaml
      python3-rich python3-click python3-defusedxml python3-typing-extensions)
WHEELS=("typer>=0.12" "networkx>=3.0" "msgspec==0.22.0" "opt_einsum==3.4.0" "cotengra==0.8.3" "autoray"
        "goatd==0.3.0; platform_machine == 'x86_64'" "setuptools>=77" "wheel")

log() { echo "build-base: $*" >&2; }

if [ "$FORCE" = 0 ] && have=$(docker image inspect -f '{{ index .Config.Labels "dcop.base.recipe" }}' "$TAG" 2>/dev/null) \
   && [ "$have" = "$RECIPE" ]; then
  log "$TAG exists (recipe $RECIPE), skipping (use --force to rebuild)"
  exit 0
fi

for tool in debootstrap docker; do
  command -v "$tool" >/dev/null || { log "needs $tool (apt-get install debootstrap docker.io)"; exit 1; }
done
[ "$(id -u)" = 0 ] || { log "debootstrap needs root"; exit 1; }

# The first Debian (not -security, not -updates) URI of this machine's apt sources.
apt_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '/^URIs:/ {u=$2} /^Suites:/ {for (i=2;i<=NF;i++) if ($i=="'"$SUITE"'") s=1}
         /^$/ {if (u!="" && s) {print u; exit} u=""; s=0}
         END {if (u!="" && s) print u}' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1=="deb" {i=2; if ($2 ~ /^\[/) {while ($i !~ /\]$/) i++; i++} if ($(i+1)=="'"$SUITE"'") print $i}' "$f"
  done
}
MIRROR="${DCOP_DEBIAN_MIRROR:-$(apt_mirror | grep -v -- '-security' | head -n1 || true)}"
log "mirror: ${MIRROR:-debootstrap default}"

WORK=$(mktemp -d /var/tmp/dcop-base.XXXXXX)
cleanup() { umount "$WORK/root/proc" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
ROOT="$WORK/root"

start=$(date +%s)
log "debootstrap $SUITE into $ROOT"
debootstrap --variant=minbase "$SUITE" "$ROOT" ${MIRROR:+"$MIRROR"} \
  > "$WORK/debootstrap.log" 2>&1 || { tail -n 30 "$WORK/debootstrap.log" >&2; exit 1; }
mount -t proc proc "$ROOT/proc"

# apt inside the new tree resolves virtual packages (python3-zmq needs one), which
# debootstrap's --include does not.
log "apt-get install ${DEBS[*]}"
chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive sh -c \
  "apt-get update -q && apt-get install -y -q --no-install-recommends ${DEBS[*]} && apt-get clean" \
  > "$WORK/apt.log" 2>&1 || { tail -n 30 "$WORK/apt.log" >&2; exit 1; }

log "downloading wheels: ${WHEELS[*]}"
mkdir -p "$ROOT/tmp/wheels"
PY=python3
command -v "$PY" >/dev/null || PY=python
"$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.11 --implementation cp \
  --dest "$ROOT/tmp/wheels" "${WHEELS[@]}"

log "virtual environment /opt/dcop"
CHROOT_ENV=(/usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root)
chroot "$ROOT" "${CHROOT_ENV[@]}" /usr/bin/python3 -m venv --system-site-packages /opt/dcop
# Only what Debian lacks or has too old is installed from the wheels; the rest stays Debian's.
chroot "$ROOT" "${CHROOT_ENV[@]}" /opt/dcop/bin/pip install -q --no-index --find-links /tmp/wheels \
  --no-cache-dir "${WHEELS[@]}"
umount "$ROOT/proc"

# Trim what a runtime image does not need.
rm -rf "$ROOT/tmp/wheels" "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* \
  "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* \
  "$ROOT"/var/log/*.log "$ROOT"/var/cache/debconf/*-old
find "$ROOT/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C.*' -exec rm -rf {} + 2>/dev/null || true

log "docker import $TAG"
tar -C "$ROOT" --numeric-owner -c . | docker import \
  -c 'ENV PATH=/opt/dcop/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV VIRTUAL_ENV=/opt/dcop' -c 'ENV LANG=C.UTF-8' -c 'ENV PYTHONUNBUFFERED=1' \
  -c "LABEL dcop.base.recipe=$RECIPE" -c "LABEL dcop.base.suite=$SUITE" \
  -c 'CMD ["/bin/bash"]' - "$TAG" >/dev/null
log "built $TAG in $(( $(date +%s) - start )) s"
