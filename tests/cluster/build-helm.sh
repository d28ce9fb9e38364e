#!/usr/bin/env bash
# Build (once) and cache the `helm` CLI from the Go module proxy, as build-control-plane.sh does
# for the control plane: `go install helm.sh/helm/v3/cmd/helm@<version>` with the version flags
# helm's own Makefile sets. tests/e2e/helm.rs lints and renders deploy/chart/ with it.
#
# Usage: tests/cluster/build-helm.sh
#   MUSTER_HELM_VERSION  helm version (default v3.22.0)
#   MUSTER_CACHE_DIR     cache root (default $HOME/.cache/muster)
#
# Prints the binary directory (${MUSTER_CACHE_DIR}/helm-<version>/bin) on stdout; progress goes to
# stderr. When the binary is cached (stamp file present) it returns immediately. A cold build
# takes a few minutes on 2 cores (less when the control plane's modules are already downloaded).
set -euo pipefail

VERSION="${MUSTER_HELM_VERSION:-v3.22.0}"
CACHE_ROOT="${MUSTER_CACHE_DIR:-$HOME/.cache/muster}"
VDIR="$CACHE_ROOT/helm-$VERSION"
OUT="$VDIR/bin"
STAMP="$VDIR/build-complete.stamp"

is_cached() { [[ -f "$STAMP" && -x "$OUT/helm" ]]; }

# Fast path: no go invocation, no locking.
if is_cached; then
  echo "$OUT"
  exit 0
fi

log() { printf '[build-helm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "MUSTER_HELM_VERSION must look like v3.X.Y, got '$VERSION'"
command -v go >/dev/null || die "go not found in PATH"

mkdir -p "$VDIR"
# Serialize concurrent builds (e.g. parallel test binaries).
exec 9>"$VDIR/.lock"
if command -v flock >/dev/null; then
  if ! flock -n 9; then
    log "another build of helm $VERSION is running; waiting for it ..."
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

# helm's go.mod: its Go line (the local toolchain must do) and the Kubernetes modules' minor
# version, which `helm lint` and `helm template` report as the cluster's version (Capabilities).
log "resolving helm.sh/helm/v3@$VERSION"
JSON="$(GOFLAGS=-mod=mod go mod download -json "helm.sh/helm/v3@$VERSION")" ||
  die "go mod download helm.sh/helm/v3@$VERSION failed: $JSON"
GOMOD="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$JSON")"
[[ -f "$GOMOD" ]] || die "could not locate go.mod of helm $VERSION (got '$GOMOD')"
GOLINE="$(awk '$1 == "go" { print $2; exit }' "$GOMOD")"
K8S_MINOR="$(awk '$1 == "k8s.io/client-go" { split($2, v, "."); print v[2]; exit }' "$GOMOD")"
[[ -n "$K8S_MINOR" ]] || die "no k8s.io/client-go in $GOMOD"
LOCAL_GO="$(GOTOOLCHAIN=local go env GOVERSION)"
[[ "$(printf '%s\n%s\n' "$GOLINE" "${LOCAL_GO#go}" | sort -V | head -1)" == "$GOLINE" ]] ||
  die "helm $VERSION needs go $GOLINE, newer than the local $LOCAL_GO"
log "    go $GOLINE (local $LOCAL_GO), Kubernetes modules 1.$K8S_MINOR"

LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$VERSION"
LDFLAGS+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  LDFLAGS+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$K8S_MINOR"
done

log "compiling helm $VERSION (downloads its modules first; a few minutes cold)"
GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOBIN="$BIN_TMP" \
  go install -trimpath -ldflags "$LDFLAGS" "helm.sh/helm/v3/cmd/helm@$VERSION"
"$BIN_TMP/helm" version --short >&2

rm -f "$STAMP"
rm -rf "$OUT"
mv "$BIN_TMP" "$OUT"
chmod 755 "$OUT"
{
  echo "version=$VERSION"
  echo "go=$LOCAL_GO k8s_modules=1.$K8S_MINOR"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$(($(date +%s) - T_START))"
} >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
log "done in $(($(date +%s) - T_START))s"
echo "$OUT"
