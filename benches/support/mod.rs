//! Synthetic clusters shared by the benchmarks: no API server, the table is filled directly.
#![allow(dead_code)]

use muster::model::{GangTable, ModelConfig, NodeInfo, PodInfo};
use muster::testkit;

pub fn node(i: usize) -> NodeInfo {
    testkit::node(&format!("node-{i}"))
        .cpu(64_000)
        .memory(256 << 30)
        .gpus(8)
        .label("kubernetes.io/hostname", &format!("node-{i}"))
        .label("topology.kubernetes.io/zone", &format!("zone-{}", i % 4))
        .build()
}

pub fn pod(name: &str, cpu_milli: i64, gang: Option<(&str, u32)>, node: Option<String>) -> PodInfo {
    let mut p = testkit::pod(name)
        .namespace("bench")
        .cpu(cpu_milli)
        .memory(1 << 30);
    if let Some((g, min)) = gang {
        p = p.gang(g, min);
    }
    if let Some(n) = node {
        p = p.bound(&n);
    }
    p.build()
}

/// `nodes` nodes, `bound` plain pods spread over them (500m each), and ten waiting gangs of
/// `gang_size` members each (1 cpu each). Returns the table and the node names.
pub fn cluster(nodes: usize, bound: usize, gang_size: u32) -> (GangTable, Vec<String>) {
    cluster_with_gangs(nodes, bound, gang_size, 10)
}

/// [`cluster`] with `gangs` waiting gangs (`gang0`, `gang1`, …).
pub fn cluster_with_gangs(
    nodes: usize,
    bound: usize,
    gang_size: u32,
    gangs: usize,
) -> (GangTable, Vec<String>) {
    let mut t = GangTable::new(ModelConfig::default());
    for i in 0..nodes {
        t.apply_node(node(i));
    }
    for i in 0..bound {
        t.apply_pod(pod(
            &format!("bound-{i}"),
            500,
            None,
            Some(format!("node-{}", i % nodes)),
        ));
    }
    for g in 0..gangs {
        for m in 0..gang_size {
            t.apply_pod(pod(
                &format!("gang{g}-{m}"),
                1000,
                Some((&format!("gang{g}"), gang_size)),
                None,
            ));
        }
    }
    let names = (0..nodes).map(|i| format!("node-{i}")).collect();
    (t, names)
}

/// A realistic pod as kube-scheduler sends it (Go encoding), for decode costs.
pub fn pod_json(name: &str, gang: &str, min: u32) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","generateName":"train-","namespace":"bench","uid":"uid-{name}","resourceVersion":"123456","creationTimestamp":"2026-11-29T10:00:00Z","labels":{{"app":"train","job-name":"{gang}","role":"worker","batch.kubernetes.io/job-completion-index":"3"}},"annotations":{{"muster.dev/group":"{gang}","muster.dev/min-available":"{min}","kubectl.kubernetes.io/last-applied-configuration":"{{}}"}},"ownerReferences":[{{"apiVersion":"batch/v1","kind":"Job","name":"{gang}","uid":"0c8b5f6e-8a3c-4b8a-9d1e-3f1f2a6b7c8d","controller":true,"blockOwnerDeletion":true}}],"managedFields":[{{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-11-29T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:labels":{{".":{{}},"f:app":{{}}}}}}}}}}]}},"spec":{{"volumes":[{{"name":"kube-api-access-x7k2p","projected":{{"sources":[{{"serviceAccountToken":{{"expirationSeconds":3607,"path":"token"}}}},{{"configMap":{{"name":"kube-root-ca.crt","items":[{{"key":"ca.crt","path":"ca.crt"}}]}}}}],"defaultMode":420}}}}],"containers":[{{"name":"trainer","image":"pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime","command":["torchrun"],"args":["--nnodes=8","--nproc-per-node=1","train.py"],"env":[{{"name":"MASTER_ADDR","value":"{gang}-master-0"}},{{"name":"MASTER_PORT","value":"23456"}},{{"name":"WORLD_SIZE","value":"8"}}],"resources":{{"limits":{{"cpu":"1","memory":"1Gi","nvidia.com/gpu":"1"}},"requests":{{"cpu":"1","memory":"1Gi","nvidia.com/gpu":"1"}}}},"volumeMounts":[{{"name":"kube-api-access-x7k2p","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}}],"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","serviceAccount":"default","securityContext":{{}},"schedulerName":"default-scheduler","tolerations":[{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}},{{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"}},"status":{{"phase":"Pending","conditions":[{{"type":"PodScheduled","status":"False","lastProbeTime":null,"lastTransitionTime":"2026-11-29T10:00:01Z","reason":"Unschedulable","message":"waiting"}}],"qosClass":"Guaranteed"}}}}"#
    )
}

/// The body of a filter/prioritize call in node-cache mode.
pub fn extender_args(pod_json: &str, nodes: &[String]) -> String {
    let mut s = String::with_capacity(pod_json.len() + nodes.len() * 14 + 64);
    s.push_str(r#"{"Pod":"#);
    s.push_str(pod_json);
    s.push_str(r#","Nodes":null,"NodeNames":["#);
    for (i, n) in nodes.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push('"');
        s.push_str(n);
        s.push('"');
    }
    s.push_str("]}");
    s
}
