#!/usr/bin/env bash
# Build (once) and cache the stock Kubernetes control plane binaries from the Go module proxy:
#   etcd, kube-apiserver, kube-scheduler (+ kubectl, unless MUSTER_SKIP_KUBECTL=1);
#   with --controllers, kube-controller-manager instead (its own directory and stamp, so the
#   control plane's cache stays valid: tests that need a cluster's controllers ask for it).
#
# Usage: tests/cluster/build-control-plane.sh [--controllers]
#   MUSTER_K8S_VERSION   Kubernetes version (default v1.37.2)
#   MUSTER_CACHE_DIR     cache root (default $HOME/.cache/muster)
#   MUSTER_SKIP_KUBECTL  set to 1 to skip building kubectl
#
# Prints the binary directory (${MUSTER_CACHE_DIR}/k8s-<version>/bin, or .../controllers-bin) on stdout; progress goes to
# stderr. When the binaries are cached (stamp file present) it returns immediately.
set -euo pipefail

VERSION="${MUSTER_K8S_VERSION:-v1.37.2}"
CACHE_ROOT="${MUSTER_CACHE_DIR:-$HOME/.cache/muster}"
VDIR="$CACHE_ROOT/k8s-$VERSION"
CONTROLLERS=0
[[ "${1:-}" != --controllers ]] || CONTROLLERS=1
[[ $# -eq 0 || $CONTROLLERS == 1 ]] || { echo "usage: $0 [--controllers]" >&2; exit 2; }
SUFFIX=""
if ((CONTROLLERS)); then
  SUFFIX="-controllers"
  OUT="$VDIR/controllers-bin"
  STAMP="$VDIR/controllers-complete.stamp"
  REQUIRED=(kube-controller-manager)
  MUSTER_SKIP_KUBECTL=1
else
  OUT="$VDIR/bin"
  STAMP="$VDIR/build-complete.stamp"
  REQUIRED=(etcd kube-apiserver kube-scheduler)
fi

is_cached() {
  [[ -f "$STAMP" ]] || return 1
  local b
  for b in "${REQUIRED[@]}"; do
    [[ -x "$OUT/$b" ]] || return 1
  done
  if [[ "${MUSTER_SKIP_KUBECTL:-0}" != 1 ]]; then
    [[ -x "$OUT/kubectl" ]] || return 1
  fi
  return 0
}

# Fast path: no go invocation, no locking.
if is_cached; then
  echo "$OUT"
  exit 0
fi

log() { printf '[build-control-plane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)(-.*)?$ ]] || die "MUSTER_K8S_VERSION must look like v1.X.Y, got '$VERSION'"
K8S_MINOR="${BASH_REMATCH[1]}"
STAGING_VERSION="v0.${VERSION#v1.}" # v1.37.2 -> v0.37.2
command -v go >/dev/null || die "go not found in PATH"

mkdir -p "$VDIR"
# Serialize concurrent builds of the same version (e.g. parallel test binaries).
exec 9>"$VDIR/.lock$SUFFIX"
if command -v flock >/dev/null; then
  if ! flock -n 9; then
    log "another build of $VERSION is running; waiting for it ..."
    flock 9
  fi
  if is_cached; then
    echo "$OUT"
    exit 0
  fi
fi
# Leftovers of an interrupted earlier build (we hold the lock, so nobody else is using them).
rm -rf "$VDIR"/.bin-tmp"$SUFFIX".* "$VDIR"/.bin-old"$SUFFIX".*

T_START=$(date +%s)
step_t0=0
step_name="setup"
step_begin() { step_t0=$(date +%s); step_name="$*"; log "==> $*"; }
step_end() { log "    done in $(($(date +%s) - step_t0))s"; }

# Run a long, silent command (in the background, so that a signal interrupts the script at once)
# with a heartbeat line every 60s.
CHILD_PID=""
HB_PID=""
with_heartbeat() {
  local what="$1"
  shift
  local t0 rc=0
  t0=$(date +%s)
  (
    exec 9>&- # do not hold the build lock
    while sleep 60 </dev/null >/dev/null 2>&1; do # no inherited fds: callers may capture output
      log "    ... still $what ($(($(date +%s) - t0))s elapsed)"
    done
  ) &
  HB_PID=$!
  "$@" 9>&- &
  CHILD_PID=$!
  wait "$CHILD_PID" || rc=$?
  CHILD_PID=""
  kill "$HB_PID" 2>/dev/null || true
  wait "$HB_PID" 2>/dev/null || true
  HB_PID=""
  return "$rc"
}

WORK="$(mktemp -d "${TMPDIR:-/tmp}/muster-k8s-build.XXXXXX")"
BIN_TMP=""
cleanup() {
  local rc=$?
  if [[ -n "$CHILD_PID" ]]; then kill "$CHILD_PID" 2>/dev/null || true; fi
  if [[ -n "$HB_PID" ]]; then kill "$HB_PID" 2>/dev/null || true; fi
  if ((rc != 0)); then log "FAILED (exit $rc) during: $step_name; see the messages above"; fi
  rm -rf "$WORK"
  if [[ -n "$BIN_TMP" ]]; then rm -rf "$BIN_TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export GOWORK=off
export CGO_ENABLED=0
export GOFLAGS="-mod=mod ${GOFLAGS:-}"

LOCAL_GO="$(GOTOOLCHAIN=local go env GOVERSION)" # e.g. go1.26.8
NEWER_TOOLCHAIN="go1.27.3"                        # the only allowed upgrade

ver_le() { [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | sed -n 1p)" == "$1" ]]; }

# Echo the GOTOOLCHAIN value to use for a module whose go.mod says `go <goline>`.
pick_toolchain() {
  local need="$1"
  if ver_le "$need" "${LOCAL_GO#go}"; then
    echo local
  elif ver_le "$need" "${NEWER_TOOLCHAIN#go}"; then
    echo "$NEWER_TOOLCHAIN"
  else
    die "module needs go $need, newer than both $LOCAL_GO and $NEWER_TOOLCHAIN"
  fi
}

log "building Kubernetes $VERSION control plane into $OUT"
log "cold build takes 10-25 minutes on 2 cores; progress lines follow"
log "local Go: $LOCAL_GO; temp dir: $WORK"

# ---------------------------------------------------------------------------------------------
step_begin "resolving k8s.io/kubernetes@$VERSION go.mod"
# `go mod download -json` prints its JSON (with an "Error" field) on stdout even when it fails.
mod_download() {
  GOTOOLCHAIN=local go mod download -json "$1" 2>/dev/null ||
    GOTOOLCHAIN="$NEWER_TOOLCHAIN" go mod download -json "$1"
}
KJSON="$(mod_download "k8s.io/kubernetes@$VERSION")" ||
  die "go mod download k8s.io/kubernetes@$VERSION failed: $KJSON"
KGOMOD="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$KJSON")"
KTIME="$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$(sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p' <<<"$KJSON")" 2>/dev/null || true)"
[[ -f "$KGOMOD" ]] || die "could not locate go.mod of k8s.io/kubernetes@$VERSION (got '$KGOMOD')"
K_GOLINE="$(awk '$1 == "go" { print $2; exit }' "$KGOMOD")"
# godebug directive(s), single-line or block form, copied so GODEBUG defaults match upstream.
K_GODEBUG="$(awk '/^godebug \(/ { b = 1 } b { print; if ($0 ~ /^\)/) b = 0; next } /^godebug / { print }' "$KGOMOD")"
# Staging modules: `k8s.io/<x> => ./staging/src/k8s.io/<x>` in kubernetes' own go.mod.
mapfile -t STAGING < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/src/.*#\1#p' "$KGOMOD")
((${#STAGING[@]} > 0)) || die "found no staging replace lines in $KGOMOD"
ETCD_VERSION="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$KGOMOD")"
[[ -n "$ETCD_VERSION" ]] || ETCD_VERSION="$(awk '$1 == "go.etcd.io/etcd/client/v3" { print $2; exit }' "$KGOMOD")"
[[ -n "$ETCD_VERSION" ]] || die "could not find the etcd version in $KGOMOD"
K_TOOLCHAIN="$(pick_toolchain "$K_GOLINE")"
log "    kubernetes go.mod: go $K_GOLINE -> GOTOOLCHAIN=$K_TOOLCHAIN; ${#STAGING[@]} staging modules -> $STAGING_VERSION; etcd $ETCD_VERSION"
step_end

# ---------------------------------------------------------------------------------------------
step_begin "resolving go.etcd.io/etcd/server/v3@$ETCD_VERSION go.mod"
EJSON="$(mod_download "go.etcd.io/etcd/server/v3@$ETCD_VERSION")" ||
  die "go mod download go.etcd.io/etcd/server/v3@$ETCD_VERSION failed: $EJSON"
EGOMOD="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$EJSON")"
[[ -f "$EGOMOD" ]] || die "could not locate go.mod of etcd server $ETCD_VERSION"
E_GOLINE="$(awk '$1 == "go" { print $2; exit }' "$EGOMOD")"
E_TOOLCHAIN="$(pick_toolchain "$E_GOLINE")"
log "    etcd go.mod: go $E_GOLINE -> GOTOOLCHAIN=$E_TOOLCHAIN"
step_end

# ---------------------------------------------------------------------------------------------
# Throwaway modules.
mkdir -p "$WORK/k8s" "$WORK/etcd"
{
  echo "module muster.local/k8sbuild"
  echo
  echo "go $K_GOLINE"
  [[ -z "$K_GODEBUG" ]] || echo "$K_GODEBUG"
  echo
  echo "require k8s.io/kubernetes $VERSION"
  echo
  echo "replace ("
  for m in "${STAGING[@]}"; do
    echo "	$m => $m $STAGING_VERSION"
  done
  echo ")"
} >"$WORK/k8s/go.mod"
{
  echo "module muster.local/etcdbuild"
  echo
  echo "go $E_GOLINE"
  echo
  echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
} >"$WORK/etcd/go.mod"

mkdir -p "$VDIR"
BIN_TMP="$(mktemp -d "$VDIR/.bin-tmp$SUFFIX.XXXXXX")"

if ((CONTROLLERS)); then
  K_PKGS=(k8s.io/kubernetes/cmd/kube-controller-manager)
else
  K_PKGS=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler)
fi
if [[ "${MUSTER_SKIP_KUBECTL:-0}" != 1 ]]; then K_PKGS+=(k8s.io/kubernetes/cmd/kubectl); fi

# ---------------------------------------------------------------------------------------------
if ((!CONTROLLERS)); then
step_begin "downloading etcd $ETCD_VERSION dependencies"
GOTOOLCHAIN="$E_TOOLCHAIN" with_heartbeat "downloading etcd modules" \
  go -C "$WORK/etcd" list -deps go.etcd.io/etcd/server/v3 >/dev/null
step_end

step_begin "compiling etcd $ETCD_VERSION"
GOTOOLCHAIN="$E_TOOLCHAIN" with_heartbeat "compiling etcd" \
  go -C "$WORK/etcd" build -trimpath -ldflags "-s -w" -o "$BIN_TMP/etcd" go.etcd.io/etcd/server/v3
step_end
fi

# ---------------------------------------------------------------------------------------------
step_begin "downloading Kubernetes $VERSION dependencies (several hundred modules)"
GOTOOLCHAIN="$K_TOOLCHAIN" with_heartbeat "downloading Kubernetes modules" \
  go -C "$WORK/k8s" list -tags selinux,notest -deps "${K_PKGS[@]}" >/dev/null
step_end

LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR"
  LDFLAGS+=" -X $pkg.gitTreeState=clean"
  [[ -z "$KTIME" ]] || LDFLAGS+=" -X $pkg.buildDate=$KTIME"
done

for pkg in "${K_PKGS[@]}"; do
  name="${pkg##*/}"
  step_begin "compiling $name $VERSION"
  GOTOOLCHAIN="$K_TOOLCHAIN" with_heartbeat "compiling $name" \
    go -C "$WORK/k8s" build -trimpath -tags selinux,notest -ldflags "$LDFLAGS" -o "$BIN_TMP/$name" "$pkg"
  step_end
done

# ---------------------------------------------------------------------------------------------
step_begin "installing into $OUT"
if ((CONTROLLERS)); then
  "$BIN_TMP/kube-controller-manager" --version >&2
else
  "$BIN_TMP/kube-apiserver" --version >&2
  "$BIN_TMP/etcd" --version | sed -n 1p >&2
fi
rm -f "$STAMP"
if [[ -e "$OUT" ]]; then
  old="$(mktemp -d "$VDIR/.bin-old$SUFFIX.XXXXXX")"
  mv "$OUT" "$old/bin"
  rm -rf "$old"
fi
mv "$BIN_TMP" "$OUT"
BIN_TMP=""
chmod 755 "$OUT"
{
  echo "version=$VERSION"
  echo "etcd=$ETCD_VERSION"
  echo "go=$LOCAL_GO k8s_toolchain=$K_TOOLCHAIN etcd_toolchain=$E_TOOLCHAIN"
  echo "binaries=$(cd "$OUT" && echo *)"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$(($(date +%s) - T_START))"
} >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
step_end

log "all done in $(($(date +%s) - T_START))s: $(cd "$OUT" && echo *)"
echo "$OUT"
