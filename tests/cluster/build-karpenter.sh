#!/usr/bin/env bash
# Build (once) and cache Karpenter's KWOK cloud provider from the Go module proxy: the Karpenter
# controller (`sigs.k8s.io/karpenter/kwok`, its main.go) with a cloud provider that "launches"
# nodes as fake Node objects, which KWOK's controller (build-kwok.sh) then plays. It is what an
# autoscaled cluster is in tests: NodePools, NodeClaims, limits, consolidation, all of it
# Karpenter's own code. The CRDs it needs (karpenter.sh NodePool/NodeClaim/NodeOverlay,
# karpenter.kwok.sh KWOKNodeClass, autoscaling.x-k8s.io CapacityBuffer) are copied beside the
# binary, from the same source. Its go.mod asks for go1.27: built with that toolchain (155 s cold
# on 2 cores).
#
# Usage: tests/cluster/build-karpenter.sh
#   MUSTER_KARPENTER_VERSION  Karpenter version (default v1.15.0)
#   MUSTER_CACHE_DIR          cache root (default $HOME/.cache/muster)
#
# Prints the binary directory (${MUSTER_CACHE_DIR}/karpenter-<version>/bin, binary
# karpenter-kwok) on stdout; the CRDs are in ../files. See build-go-module.sh.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/build-go-module.sh" karpenter sigs.k8s.io/karpenter \
  "${MUSTER_KARPENTER_VERSION:-v1.15.0}" ./kwok karpenter-kwok \
  'kwok/charts/crds/*.yaml' 'kwok/apis/crds/*.yaml'
