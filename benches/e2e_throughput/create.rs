//! Creating the cluster's objects: fake nodes, PodGroups (native configuration) and the pods,
//! by a concurrent creator that records when each pod was created.

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::api::{Api, PostParams};
use kube::Client;
use muster_harness::k8s::{self, NodeShape};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::params::Params;
use crate::workload::{pod_group_object, Workload, NS};

/// Creates nodes `node-<i>` for each `i` in `which` (the late ones come in a second call).
/// Whether node `i` is one of the gang nodes of configuration `muster-second` (tainted and
/// labelled as deploy/second-scheduler/gang-nodes-policy.yaml expects): every node but a
/// `plain_percent` share, spread evenly over the indices so the late nodes are split alike.
pub fn is_gang_node(p: &Params, i: usize) -> bool {
    (i + 1) * p.plain_percent / 100 == i * p.plain_percent / 100
}

/// `gang_nodes`: taint and label the gang nodes ([`is_gang_node`]); plain pods then have the
/// others to themselves, and the policy keeps gang members (of muster-scheduler) on these.
pub async fn create_nodes(
    client: &Client,
    p: &Params,
    which: Range<usize>,
    gang_nodes: bool,
) -> Result<()> {
    let sem = Arc::new(Semaphore::new(16));
    let mut set = JoinSet::new();
    for i in which {
        let permit = sem.clone().acquire_owned().await?;
        let client = client.clone();
        let mut shape = NodeShape::cpu(&p.node_cpu)
            .memory(&p.node_memory)
            .pods(p.node_pods);
        if let Some(l) = &p.topology {
            shape = l.label(i, shape);
        }
        if gang_nodes && is_gang_node(p, i) {
            let key = muster_harness::policy::GANG_NODES_KEY;
            shape = shape.label(key, "true").taint(key, "true", "NoSchedule");
        }
        set.spawn(async move {
            let _permit = permit;
            k8s::add_node(&client, &format!("node-{i:04}"), &shape).await
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(())
}

pub async fn create_pod_groups(client: &Client, w: &Workload) -> Result<()> {
    let api: Api<PodGroup> = Api::namespaced(client.clone(), NS);
    let sem = Arc::new(Semaphore::new(16));
    let mut set = JoinSet::new();
    for (i, g) in w.gangs.iter().enumerate() {
        let permit = sem.clone().acquire_owned().await?;
        let api = api.clone();
        let mut pg = pod_group_object(g);
        if let Some(l) = &w.topology {
            pg.spec.scheduling_constraints = l.pod_group_constraints(i);
        }
        set.spawn(async move {
            let _permit = permit;
            api.create(&PostParams::default(), &pg)
                .await
                .with_context(|| {
                    format!(
                        "creating PodGroup {NS}/{}",
                        pg.metadata.name.as_deref().unwrap_or("?")
                    )
                })
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(())
}

/// Creates a pod, retrying transient errors; `None` if it already existed (409 on a retry).
pub async fn create_pod(api: &Api<Pod>, pod: &Pod) -> Result<Option<Pod>> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match api.create(&PostParams::default(), pod).await {
            Ok(p) => return Ok(Some(p)),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt > 1 => return Ok(None),
            Err(e) if attempt < 5 => {
                eprintln!(
                    "e2e_throughput: creating pod {} failed (attempt {attempt}): {e}",
                    k8s::pod_name(pod)
                );
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => {
                return Err(e).with_context(|| format!("creating pod {NS}/{}", k8s::pod_name(pod)))
            }
        }
    }
}

pub struct Created {
    pub at: Vec<Option<Instant>>,
    pub errors: Vec<String>,
    pub scheduling_group_dropped: usize,
    pub done_at: Option<Instant>,
}

pub async fn create_all(
    client: Client,
    pods: Vec<(usize, Pod)>,
    concurrency: usize,
    qps: Option<f64>,
    created: Arc<Mutex<Created>>,
) {
    let start = tokio::time::Instant::now();
    let api: Api<Pod> = Api::namespaced(client, NS);
    let sem = Arc::new(Semaphore::new(concurrency));
    let mut set = JoinSet::new();
    let handle =
        |r: std::result::Result<(usize, bool, Result<Option<Pod>>), tokio::task::JoinError>| {
            let mut c = created.lock().unwrap();
            match r {
                Ok((i, wants_group, Ok(p))) => {
                    c.at[i] = Some(Instant::now());
                    if wants_group
                        && p.is_some_and(|p| p.spec.and_then(|s| s.scheduling_group).is_none())
                    {
                        c.scheduling_group_dropped += 1;
                    }
                }
                Ok((_, _, Err(e))) => c.errors.push(format!("{e:#}")),
                Err(e) => c.errors.push(e.to_string()),
            }
        };
    for (k, (i, pod)) in pods.into_iter().enumerate() {
        if let Some(q) = qps {
            tokio::time::sleep_until(start + Duration::from_secs_f64(k as f64 / q)).await;
        }
        let Ok(permit) = sem.clone().acquire_owned().await else {
            break;
        };
        let api = api.clone();
        let wants_group = pod
            .spec
            .as_ref()
            .is_some_and(|s| s.scheduling_group.is_some());
        set.spawn(async move {
            let _permit = permit;
            (i, wants_group, create_pod(&api, &pod).await)
        });
        while let Some(r) = set.try_join_next() {
            handle(r);
        }
    }
    while let Some(r) = set.join_next().await {
        handle(r);
    }
    created.lock().unwrap().done_at = Some(Instant::now());
}
