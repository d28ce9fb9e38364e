#!/usr/bin/env bash
# Build (once) and cache Kubeflow Trainer v2's controller manager from the Go module proxy
# (`github.com/kubeflow/trainer/v2`, its main package cmd/trainer-controller-manager), for tests
# of gangs a TrainJob submits. Beside it: its CRDs (manifests/base/crds: trainer.kubeflow.org
# v1alpha1 TrainJob, TrainingRuntime, ClusterTrainingRuntime) and its webhook manifest
# (manifests/base/webhook/manifests.yaml, the paths it serves). Its go.mod asks for go 1.24.0:
# built with the local Go. It runs TrainJobs through JobSet (its go.mod names JobSet v0.8.2; the
# tests run it against JobSet v0.10.1's controller, build-jobset.sh, whose v1alpha2 API is a
# superset) and, with `podGroupPolicy.coscheduling`, creates scheduler-plugins PodGroups (their
# CRD: tests/crds/scheduler-plugins-podgroups.yaml).
#
# One line of cmd/trainer-controller-manager/main.go is changed before compiling: Trainer always
# manages its webhook certificate itself (cert-controller's rotator, no flag turns it off): it
# wants the Secret kubeflow-trainer-webhook-cert in namespace kubeflow-system, a certificate
# only for the Service name kubeflow-trainer-controller-manager.kubeflow-system.svc (no
# Service can be reached from a kube-apiserver without nodes, and 127.0.0.1 is not in it), and
# waits for that Secret to be mounted as files under /tmp (a kubelet's job). The line keeps that
# and skips the rotator when TRAINER_EXTERNAL_WEBHOOK_CERTS is set, marking the certificates
# ready at once: the webhook server then reads tls.crt/tls.key from controller-runtime's default
# directory, $TMPDIR/k8s-webhook-server/serving-certs, where the harness writes a certificate of
# its own CA for 127.0.0.1 (as it does for JobSet and Kueue).
#
# Usage: tests/cluster/build-trainer.sh
#   MUSTER_TRAINER_VERSION  Trainer version (default v2.0.0; the patched line must be found as is)
#   MUSTER_CACHE_DIR        cache root (default $HOME/.cache/muster)
#
# Prints the binary directory (${MUSTER_CACHE_DIR}/trainer-<version>/bin, binary
# trainer-controller-manager) on stdout; the CRDs and manifest are in ../files. See
# build-go-module.sh.
set -euo pipefail
read -r -d '' prepare <<'PREPARE' || true
f=cmd/trainer-controller-manager/main.go
line='if err = cert.ManageCerts(mgr, cert.Config{'
grep -q "^[[:space:]]*$line\$" "$f" || { echo "$f: no line '$line' to patch" >&2; exit 1; }
sed -i "s|^\([[:space:]]*\)$line\$|\1if os.Getenv(\"TRAINER_EXTERNAL_WEBHOOK_CERTS\") != \"\" { close(certsReady) } else $line|" "$f"
grep -q 'os.Getenv("TRAINER_EXTERNAL_WEBHOOK_CERTS")' "$f"
PREPARE
MUSTER_GO_MODULE_PREPARE="$prepare" exec "$(dirname "${BASH_SOURCE[0]}")/build-go-module.sh" \
  trainer github.com/kubeflow/trainer/v2 "${MUSTER_TRAINER_VERSION:-v2.0.0}" \
  ./cmd/trainer-controller-manager trainer-controller-manager \
  'manifests/base/crds/trainer.kubeflow.org_*.yaml' 'manifests/base/webhook/manifests.yaml'
