#!/usr/bin/env bash
# Build (once) and cache Karpenter's KWOK cloud provider from the Go module proxy: the Karpenter
# controller (`sigs.k8s.io/karpenter/kwok`, its main.go) with a cloud provider that "launches"
# nodes as fake Node objects, which KWOK's controller (build-kwok.sh) then plays. It is what an
# autoscaled cluster is in tests: NodePools, NodeClaims, limits, consolidation, all of it
# Karpenter's own code. The CRDs it needs (karpenter.sh NodePool/NodeClaim/NodeOverlay,
# karpenter.kwok.sh KWOKNodeClass, autoscaling.x-k8s.io CapacityBuffer) are copied beside the
# binary, from the same source.
#
# Usage: tests/cluster/build-karpenter.sh
#   MUSTER_KARPENTER_VERSION  Karpenter version (default v1.15.0)
#   MUSTER_CACHE_DIR          cache root (default $HOME/.cache/muster)
#
# Prints the binary directory (${MUSTER_CACHE_DIR}/karpenter-<version>/bin) on stdout; the CRDs
# are in ../crds. Progress goes to stderr. When cached (stamp file present) it returns at once.
# Its go.mod asks for a newer Go than the local one may be: then the one allowed upgrade,
# go1.27.3, is used (as build-control-plane.sh does). The module has no `replace` lines, so it
# builds as the main module of its own downloaded source.
set -euo pipefail

VERSION="${MUSTER_KARPENTER_VERSION:-v1.15.0}"
CACHE_ROOT="${MUSTER_CACHE_DIR:-$HOME/.cache/muster}"
VDIR="$CACHE_ROOT/karpenter-$VERSION"
OUT="$VDIR/bin"
CRDS="$VDIR/crds"
STAMP="$VDIR/build-complete.stamp"

is_cached() { [[ -f "$STAMP" && -x "$OUT/karpenter-kwok" && -d "$CRDS" ]]; }

if is_cached; then
  echo "$OUT"
  exit 0
fi

log() { printf '[build-karpenter %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "MUSTER_KARPENTER_VERSION must look like vX.Y.Z, got '$VERSION'"
command -v go >/dev/null || die "go not found in PATH"

mkdir -p "$VDIR"
exec 9>"$VDIR/.lock"
if command -v flock >/dev/null; then
  if ! flock -n 9; then
    log "another build of karpenter $VERSION is running; waiting for it ..."
    flock 9
  fi
  if is_cached; then
    echo "$OUT"
    exit 0
  fi
fi
rm -rf "$VDIR"/.tmp.*
TMP="$(mktemp -d "$VDIR/.tmp.XXXXXX")"
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

export GOWORK=off CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
T_START=$(date +%s)
LOCAL_GO="$(GOTOOLCHAIN=local go env GOVERSION)"
NEWER_TOOLCHAIN="go1.27.3"
ver_le() { [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | sed -n 1p)" == "$1" ]]; }

log "resolving sigs.k8s.io/karpenter@$VERSION"
JSON="$(GOTOOLCHAIN=local go mod download -json "sigs.k8s.io/karpenter@$VERSION" 2>/dev/null ||
  GOTOOLCHAIN="$NEWER_TOOLCHAIN" go mod download -json "sigs.k8s.io/karpenter@$VERSION")" ||
  die "go mod download sigs.k8s.io/karpenter@$VERSION failed: $JSON"
SRC="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$JSON")"
[[ -d "$SRC/kwok" ]] || die "no kwok/ in $SRC"
GOLINE="$(awk '$1 == "go" { print $2; exit }' "$SRC/go.mod")"
if ver_le "$GOLINE" "${LOCAL_GO#go}"; then
  TOOLCHAIN=local
elif ver_le "$GOLINE" "${NEWER_TOOLCHAIN#go}"; then
  TOOLCHAIN="$NEWER_TOOLCHAIN"
else
  die "karpenter $VERSION needs go $GOLINE, newer than both $LOCAL_GO and $NEWER_TOOLCHAIN"
fi
grep -q '^replace' "$SRC/go.mod" && log "note: its go.mod has replace lines; building it as the main module honours them"

# The module cache is read-only: build from a writable copy.
cp -r "$SRC" "$TMP/src"
chmod -R u+w "$TMP/src"
log "compiling the KWOK provider with GOTOOLCHAIN=$TOOLCHAIN (downloads its modules first)"
mkdir -p "$TMP/bin"
(cd "$TMP/src" && GOTOOLCHAIN="$TOOLCHAIN" go build -trimpath -ldflags "-s -w" -o "$TMP/bin/karpenter-kwok" ./kwok)
mkdir -p "$TMP/crds"
cp "$TMP/src"/kwok/charts/crds/*.yaml "$TMP/src"/kwok/apis/crds/*.yaml "$TMP/crds/"

rm -f "$STAMP"
rm -rf "$OUT" "$CRDS"
mv "$TMP/bin" "$OUT"
mv "$TMP/crds" "$CRDS"
{
  echo "version=$VERSION"
  echo "go=$LOCAL_GO toolchain=$TOOLCHAIN"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$(($(date +%s) - T_START))"
} >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
log "done in $(($(date +%s) - T_START))s"
echo "$OUT"
