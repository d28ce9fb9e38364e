#!/usr/bin/env bash
# Build (once) and cache Kueue's controller manager from the Go module proxy
# (`sigs.k8s.io/kueue`, its main package cmd/kueue), for tests of gangs Kueue admits by quota.
# Beside it: its CRDs (config/components/crd/bases, kueue.x-k8s.io v1beta1 and v1beta2, stored as
# v1beta2) and its webhook manifests (config/components/webhook/manifests.yaml, the paths it
# serves). Its go.mod asks for go 1.25.0: built with the local Go.
#
# One line of cmd/kueue/main.go is changed before compiling: with its internal certificate
# management off, Kueue reads its metrics serving certificate from the fixed directory
# /etc/kueue/metrics/certs (a mounted Secret in its Deployment) and exits when it is missing, even
# with metrics off. The line keeps that default and takes KUEUE_METRICS_CERT_DIR when it is set,
# so the harness points it at certificates of its own instead of writing under /etc.
#
# Usage: tests/cluster/build-kueue.sh
#   MUSTER_KUEUE_VERSION  Kueue version (default v0.17.0; the patched line must be found as is)
#   MUSTER_CACHE_DIR      cache root (default $HOME/.cache/muster)
#
# Prints the binary directory (${MUSTER_CACHE_DIR}/kueue-<version>/bin, binary kueue) on stdout;
# the CRDs and manifests are in ../files. See build-go-module.sh.
set -euo pipefail
read -r -d '' prepare <<'PREPARE' || true
f=cmd/kueue/main.go
line='metricsCertPath := "/etc/kueue/metrics/certs"'
grep -q "^[[:space:]]*$line\$" "$f" || { echo "$f: no line '$line' to patch" >&2; exit 1; }
sed -i "s|^\([[:space:]]*\)$line\$|\1$line; if d := os.Getenv(\"KUEUE_METRICS_CERT_DIR\"); d != \"\" { metricsCertPath = d }|" "$f"
grep -q 'os.Getenv("KUEUE_METRICS_CERT_DIR")' "$f"
PREPARE
MUSTER_GO_MODULE_PREPARE="$prepare" exec "$(dirname "${BASH_SOURCE[0]}")/build-go-module.sh" \
  kueue sigs.k8s.io/kueue "${MUSTER_KUEUE_VERSION:-v0.17.0}" ./cmd/kueue kueue \
  'config/components/crd/bases/*.yaml' 'config/components/webhook/manifests.yaml'
