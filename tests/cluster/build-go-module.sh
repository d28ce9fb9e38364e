#!/usr/bin/env bash
# Build (once) and cache one binary of a Go module from the Go module proxy, with files of its
# source (CRDs, webhook manifests) copied beside it: the shared part of build-karpenter.sh and
# build-jobset.sh, controllers that tests run as local processes against the local control plane.
#
# Usage: tests/cluster/build-go-module.sh NAME MODULE VERSION PACKAGE BINARY [FILE_GLOB...]
#   NAME       cache directory prefix: ${MUSTER_CACHE_DIR:-$HOME/.cache/muster}/NAME-VERSION
#   MODULE     the Go module (sigs.k8s.io/jobset)
#   VERSION    vX.Y.Z
#   PACKAGE    the main package inside the module (. or ./kwok)
#   BINARY     the binary's name in NAME-VERSION/bin
#   FILE_GLOB  files of the module's source copied into NAME-VERSION/files (globs relative to
#              the module root, e.g. 'config/components/crd/bases/*.yaml')
#
# Prints the binary directory on stdout (the files are in ../files); progress goes to stderr.
# When cached (stamp file present) it returns at once; two builds of the same NAME-VERSION wait
# for each other (flock). A go.mod that asks for a newer Go than the local one is built with the
# one allowed upgrade, go1.27.3 (as build-control-plane.sh does). The module builds as the main
# module of its own downloaded source, so its go.mod's replace lines (if any) are honoured.
# MUSTER_GO_MODULE_PREPARE, when set, is a bash command run in that writable copy of the source
# before compiling (build-kueue.sh makes one path of Kueue's configurable with it); it fails the
# build when it fails.
set -euo pipefail

(($# >= 5)) || { sed -n '2,19p' "$0" >&2; exit 2; }
NAME="$1" MODULE="$2" VERSION="$3" PACKAGE="$4" BINARY="$5"
shift 5
CACHE_ROOT="${MUSTER_CACHE_DIR:-$HOME/.cache/muster}"
VDIR="$CACHE_ROOT/$NAME-$VERSION"
OUT="$VDIR/bin"
FILES="$VDIR/files"
STAMP="$VDIR/build-complete.stamp"

is_cached() { [[ -f "$STAMP" && -x "$OUT/$BINARY" && -d "$FILES" ]]; }

if is_cached; then
  echo "$OUT"
  exit 0
fi

log() { printf '[build-%s %s] %s\n' "$NAME" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "the version must look like vX.Y.Z, got '$VERSION'"
command -v go >/dev/null || die "go not found in PATH"

mkdir -p "$VDIR"
exec 9>"$VDIR/.lock"
if command -v flock >/dev/null; then
  if ! flock -n 9; then
    log "another build of $NAME $VERSION is running; waiting for it ..."
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

log "resolving $MODULE@$VERSION"
JSON="$(GOTOOLCHAIN=local go mod download -json "$MODULE@$VERSION" 2>/dev/null ||
  GOTOOLCHAIN="$NEWER_TOOLCHAIN" go mod download -json "$MODULE@$VERSION")" ||
  die "go mod download $MODULE@$VERSION failed: $JSON"
SRC="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$JSON")"
[[ -d "$SRC/$PACKAGE" ]] || die "no $PACKAGE in $SRC"
GOLINE="$(awk '$1 == "go" { print $2; exit }' "$SRC/go.mod")"
if ver_le "$GOLINE" "${LOCAL_GO#go}"; then
  TOOLCHAIN=local
elif ver_le "$GOLINE" "${NEWER_TOOLCHAIN#go}"; then
  TOOLCHAIN="$NEWER_TOOLCHAIN"
else
  die "$NAME $VERSION needs go $GOLINE, newer than both $LOCAL_GO and $NEWER_TOOLCHAIN"
fi

# The module cache is read-only: build from a writable copy.
cp -r "$SRC" "$TMP/src"
chmod -R u+w "$TMP/src"
if [[ -n "${MUSTER_GO_MODULE_PREPARE:-}" ]]; then
  log "preparing the source (MUSTER_GO_MODULE_PREPARE)"
  (cd "$TMP/src" && bash -euo pipefail -c "$MUSTER_GO_MODULE_PREPARE") || die "preparing the source failed"
fi
log "compiling $PACKAGE with GOTOOLCHAIN=$TOOLCHAIN (downloads its modules first)"
mkdir -p "$TMP/bin" "$TMP/files"
(cd "$TMP/src" && GOTOOLCHAIN="$TOOLCHAIN" go build -trimpath -ldflags "-s -w" -o "$TMP/bin/$BINARY" "$PACKAGE")
for glob in "$@"; do
  # shellcheck disable=SC2086 # the glob is expanded on purpose
  matched=("$TMP/src"/$glob)
  [[ -e "${matched[0]}" ]] || die "no file matches $glob in $MODULE@$VERSION"
  cp "${matched[@]}" "$TMP/files/"
done

rm -f "$STAMP"
rm -rf "$OUT" "$FILES"
mv "$TMP/bin" "$OUT"
mv "$TMP/files" "$FILES"
{
  echo "module=$MODULE version=$VERSION package=$PACKAGE"
  echo "go=$LOCAL_GO toolchain=$TOOLCHAIN"
  [[ -z "${MUSTER_GO_MODULE_PREPARE:-}" ]] ||
    echo "prepared=sha256:$(printf %s "$MUSTER_GO_MODULE_PREPARE" | sha256sum | cut -c1-16)"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$(($(date +%s) - T_START))"
} >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
log "done in $(($(date +%s) - T_START))s"
echo "$OUT"
