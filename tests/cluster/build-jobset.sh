#!/usr/bin/env bash
# Build (once) and cache JobSet's controller from the Go module proxy (`sigs.k8s.io/jobset`, its
# main.go at the module root), for tests of gangs a JobSet submits. Beside it: its CRD
# (jobset.x-k8s.io, v1alpha2) and its webhook manifests. Run outside a cluster it needs its
# internal certificate management and leader election off in its config file, a serving
# certificate for 127.0.0.1, and webhook configurations pointing there: its defaulting webhook is
# required (an undefaulted JobSet fails in reconcile).
#
# Usage: tests/cluster/build-jobset.sh
#   MUSTER_JOBSET_VERSION  JobSet version (default v0.10.1)
#   MUSTER_CACHE_DIR       cache root (default $HOME/.cache/muster)
#
# Prints the binary directory (${MUSTER_CACHE_DIR}/jobset-<version>/bin, binary jobset) on
# stdout; the CRD and manifests are in ../files. See build-go-module.sh.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/build-go-module.sh" jobset sigs.k8s.io/jobset \
  "${MUSTER_JOBSET_VERSION:-v0.10.1}" . jobset \
  'config/components/crd/bases/*.yaml' 'config/components/webhook/manifests.yaml'
