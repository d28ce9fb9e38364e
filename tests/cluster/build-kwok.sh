#!/usr/bin/env bash
# Build (once) and cache KWOK's controller from the Go module proxy, as build-helm.sh does for
# helm: `go install sigs.k8s.io/kwok/cmd/kwok@<version>`. It plays the kubelets of the fake
# nodes in clusters started with controllers (tests/harness: `ClusterOptions::with_controllers`):
# node heartbeats, pods turning Running, and finishing when a test asks
# (tests/cluster/kwok-stages.yaml).
#
# Usage: tests/cluster/build-kwok.sh
#   MUSTER_KWOK_VERSION  KWOK version (default v0.8.0)
#   MUSTER_CACHE_DIR     cache root (default $HOME/.cache/muster)
#
# Prints the binary directory (${MUSTER_CACHE_DIR}/kwok-<version>/bin) on stdout; progress goes to
# stderr. When the binary is cached (stamp file present) it returns immediately. A cold build
# takes about 2 minutes on 2 cores.
set -euo pipefail

VERSION="${MUSTER_KWOK_VERSION:-v0.8.0}"
CACHE_ROOT="${MUSTER_CACHE_DIR:-$HOME/.cache/muster}"
VDIR="$CACHE_ROOT/kwok-$VERSION"
OUT="$VDIR/bin"
STAMP="$VDIR/build-complete.stamp"

is_cached() { [[ -f "$STAMP" && -x "$OUT/kwok" ]]; }

# Fast path: no go invocation, no locking.
if is_cached; then
  echo "$OUT"
  exit 0
fi

log() { printf '[build-kwok %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$VERSION" =~ ^v0\.[0-9]+\.[0-9]+$ ]] || die "MUSTER_KWOK_VERSION must look like v0.X.Y, got '$VERSION'"
command -v go >/dev/null || die "go not found in PATH"

mkdir -p "$VDIR"
# Serialize concurrent builds (e.g. parallel test binaries).
exec 9>"$VDIR/.lock"
if command -v flock >/dev/null; then
  if ! flock -n 9; then
    log "another build of kwok $VERSION is running; waiting for it ..."
    flock 9
  fi
  if is_cached; then
    echo "$OUT"
    exit 0
  fi
fi
rm -rf "$VDIR"/.bin-tmp.*
BIN_TMP="$(mktemp -d "$VDIR/.bin-tmp.XXXXXX")"
trap 'rm -rf "$BIN_TMP"' EXIT
trap 'exit 130' INT TERM

export GOWORK=off CGO_ENABLED=0
T_START=$(date +%s)
LOCAL_GO="$(GOTOOLCHAIN=local go env GOVERSION)"

log "compiling kwok $VERSION (downloads its modules first; about 2 minutes cold)"
GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false" GOBIN="$BIN_TMP" \
  go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$VERSION"
"$BIN_TMP/kwok" --version >&2 || true

rm -f "$STAMP"
rm -rf "$OUT"
mv "$BIN_TMP" "$OUT"
chmod 755 "$OUT"
{
  echo "version=$VERSION"
  echo "go=$LOCAL_GO"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$(($(date +%s) - T_START))"
} >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
log "done in $(($(date +%s) - T_START))s"
echo "$OUT"
