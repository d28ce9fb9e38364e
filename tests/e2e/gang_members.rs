//! End-to-end, on the real control plane, installed as users install it: only gang members pass
//! through muster. deploy/gang-admission-policy.yaml (applied from the file itself) marks each
//! gang member at creation with the resource `muster.dev/gang` and the scheduling gate
//! `muster.dev/gather`; kube-scheduler runs scheduler-config/muster-as-default-scheduler.yaml,
//! which sends muster only pods with that resource (`managedResources`); muster gathers each
//! gang behind its gate, publishes its seats as the members' `nominatedNodeName`, and removes
//! the quorum's gates together once the whole quorum can be placed.
//!
//! Without muster (the control run, `tests/control-run`) the gang-members mode is the stock
//! kube-scheduler alone: no extender and no admission policy (the harness applies it only when
//! [`Cluster::gathers`]), so gang members are plain pods, scheduled one by one as they come.
//! Each gang test fails there on cluster truth as soon as it is decided: a member bound while
//! the gang should hold nothing, a plain pod kept off its room, a member kube-scheduler may try
//! with no nomination (its seat is what kube-scheduler counts against other pods), or low pods
//! evicted for a gang that cannot run. The missing-marker test is about muster's warning, which
//! muster gives in the control run too: it is not listed there.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use muster_harness::api_proxy::{Fault, Pattern, Rule};
use muster_harness::checks::{metric, parse_metrics};
use muster_harness::k8s::{pod_node, KeyScheme};
use muster_harness::policy::{is_gated, is_marked, GANG_MARKER, GATHER_GATE, POLICY_FILE};
use muster_harness::truth::TruthContext;
use muster_harness::{
    holds_for, names, spread, wait_for, Cluster, ClusterOptions, NodeShape, PodBuilder, Progress,
    Timer, PLACE, REASON, TOGETHER, WINDOW,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
/// Deadline for a plain pod with room to be bound ("at once", with room for a busy machine).
const PLAIN: Duration = Duration::from_secs(20);

async fn gang_members_cluster() -> Result<Cluster> {
    Cluster::start(MUSTER).await
}

async fn create_gang(c: &Cluster, group: &str, members: &[String], cpu: &str) -> Result<()> {
    let quorum = members.len() as u32;
    for n in members {
        c.create(
            PodBuilder::new("ml", n)
                .cpu(cpu)
                .gang(KeyScheme::Muster, group, quorum),
        )
        .await?;
    }
    Ok(())
}

/// The gang is bound whole, its members within [`TOGETHER`] of each other.
async fn placed_whole(c: &Cluster, members: &[String]) -> Result<BTreeMap<String, String>> {
    let bound = c.wait_bound("ml", members, PLACE).await?;
    let s = spread(&bound);
    muster_harness::ensure_truth!(
        s <= TOGETHER,
        "members bound {s:?} apart (> {TOGETHER:?}): {bound:?}"
    );
    c.assert_no_overcommit().await?;
    Ok(bound.into_iter().map(|(k, (n, _))| (k, n)).collect())
}

/// Every listed pod has no node and (where muster gathers: not in a control run, which has no
/// gate to keep) still has muster's gate.
async fn all_gated(c: &Cluster, members: &[String]) -> Result<std::result::Result<(), String>> {
    let pods = c.pods("ml").await?;
    for m in members {
        let Some(p) = pods.iter().find(|p| p.metadata.name.as_deref() == Some(m)) else {
            return Ok(Err(format!("{m} does not exist")));
        };
        if let Some(node) = pod_node(p) {
            return Ok(Err(format!("{m} is bound to {node}")));
        }
        if c.gathers() && !is_gated(p) {
            return Ok(Err(format!("{m} lost its gate muster.dev/gather")));
        }
    }
    Ok(Ok(()))
}

/// Per pod of a namespace, what the watch showed at the first version without muster's gate
/// (the first kube-scheduler may try): its `status.nominatedNodeName` then (`None`: not
/// nominated when the gate went, or when it was created without one).
struct UngateRecorder {
    seen: Arc<Mutex<BTreeMap<String, Option<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl UngateRecorder {
    fn start(client: kube::Client, ns: &str) -> Self {
        let seen: Arc<Mutex<BTreeMap<String, Option<String>>>> = Arc::default();
        let api: Api<Pod> = Api::namespaced(client, ns);
        let out = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = stream.next().await {
                let pod = match ev {
                    Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => p,
                    _ => continue,
                };
                let name = pod.metadata.name.clone().unwrap_or_default();
                if !is_gated(&pod) {
                    let nominated = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.nominated_node_name.clone());
                    out.lock().unwrap().entry(name).or_insert(nominated);
                }
            }
        });
        UngateRecorder { seen, task }
    }

    fn at_ungate(&self) -> BTreeMap<String, Option<String>> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for UngateRecorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// -------------------------------------------------------------------------------------------

/// A gang created marked and gated is placed whole by muster, and its seats are published as
/// nominations only where they are at risk (fewer writes, never-half unchanged): with room on
/// every node and nothing else waiting, the members float (the watch shows each ungated
/// without a nomination) and muster's filter seats them where kube-scheduler offers; with a
/// plain pod of the same priority waiting (kube-scheduler never asks muster about it, so only a
/// nomination keeps it off a seat), each member's seat is its `nominatedNodeName` before its
/// gate goes, and each member binds on the node it was nominated to (explained).
#[tokio::test]
async fn a_gathered_gang_is_placed_whole_nominated_only_where_a_waiting_pod_could_take_its_seats(
) -> Result<()> {
    let _t = Timer("a_gathered_gang_is_placed_whole", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        for n in ["node-1", "node-2", "node-3"] {
            c.add_node(n, NodeShape::cpu("1")).await?;
        }
        let recorder = UngateRecorder::start(c.client(), "ml");
        let floating = names("free", 3);
        create_gang(&c, "free", &floating, "600m").await?;
        // The policy marked each member at creation (the marker stays after the gate goes); a
        // control run has no policy.
        for p in c.pods("ml").await?.into_iter().filter(|_| c.gathers()) {
            let limits = p
                .spec
                .as_ref()
                .and_then(|s| s.containers[0].resources.as_ref());
            ensure!(
                limits.is_some_and(|r| r
                    .limits
                    .as_ref()
                    .is_some_and(|l| l.contains_key(GANG_MARKER))),
                "{:?} was not marked by {POLICY_FILE}: {:?}",
                p.metadata.name,
                p.spec
            );
        }
        let bound = placed_whole(&c, &floating).await?;
        let nodes: BTreeSet<&String> = bound.values().collect();
        muster_harness::ensure_truth!(nodes.len() == 3, "one member per node: {bound:?}");
        let at_ungate = recorder_saw(&recorder, &floating).await?;
        for m in &floating {
            ensure!(
                at_ungate[m].is_none(),
                "{m}: nominated {:?} though its seat was at no risk (a write saved)",
                at_ungate[m]
            );
        }

        // Three more nodes, and a plain pod of the gang's priority waiting for room it will
        // not find (2 CPUs): it asks for more than any seat's node has beside the seat.
        for n in ["node-4", "node-5", "node-6"] {
            c.add_node(n, NodeShape::cpu("1")).await?;
        }
        c.create(PodBuilder::new("ml", "waiting").cpu("2")).await?;
        let contested = names("job", 3);
        create_gang(&c, "job", &contested, "600m").await?;
        let bound = placed_whole(&c, &contested).await?;
        let at_ungate = recorder_saw(&recorder, &contested).await?;
        // Cluster truth: the nomination is the seat kube-scheduler counts against the waiting
        // pod (kube-scheduler alone places this gang whole too, but never nominated).
        for m in &contested {
            muster_harness::ensure_truth!(
                at_ungate[m].as_ref() == Some(&bound[m]),
                "{m}: nominated {:?} when kube-scheduler could first try it, bound to {}",
                at_ungate[m],
                bound[m]
            );
        }
        for gang in ["free", "job"] {
            match c.muster.gang("ml", gang).await? {
                Some(g) if g.state == "placed" => {}
                other => bail!("expected {gang} placed in /gangs: {other:?}"),
            }
        }
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// What the recorder saw of each member when the watch first showed it ungated (its
/// nomination then), once it saw every one of them.
async fn recorder_saw(
    recorder: &UngateRecorder,
    members: &[String],
) -> Result<BTreeMap<String, Option<String>>> {
    wait_for("the watch to show every member ungated", WINDOW, || async {
        let seen = recorder.at_ungate();
        Ok(if members.iter().all(|m| seen.contains_key(m)) {
            Progress::Done(seen)
        } else {
            Progress::NotYet(format!("{seen:?}"))
        })
    })
    .await
}

/// A gang that cannot fit stays behind its gate, holding nothing: a plain pod takes the room at
/// once (kube-scheduler never asks muster about it); when room for the whole gang comes, the
/// gang is placed whole (holds-nothing, fail-safe).
#[tokio::test]
async fn a_gang_that_cannot_fit_stays_gated_while_a_plain_pod_takes_the_room_then_is_placed_whole(
) -> Result<()> {
    let _t = Timer("a_gang_that_cannot_fit_stays_gated", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?;
        let members = names("job", 2);
        create_gang(&c, "job", &members, "600m").await?;
        let reason = "gang ml/job: 1 of 2 members fit";
        // No member bound meanwhile (cluster truth: kube-scheduler alone binds one at once).
        c.wait_gang(
            "ml",
            "job",
            &members,
            "muster to say why the gang waits",
            REASON,
            |g| g.waiting_reason.as_deref() == Some(reason),
        )
        .await?;
        c.create(PodBuilder::new("ml", "plain").cpu("600m")).await?;
        let plain = c.wait_bound("ml", &["plain".to_string()], PLAIN).await?;
        muster_harness::ensure_truth!(plain["plain"].0 == "node-1", "{plain:?}");
        holds_for("the gang to stay gated and unbound", WINDOW, || {
            all_gated(&c, &members)
        })
        .await
        .truth()?;
        c.add_node("node-2", NodeShape::cpu("1")).await?;
        c.add_node("node-3", NodeShape::cpu("1")).await?;
        let bound = placed_whole(&c, &members).await?;
        muster_harness::ensure_truth!(
            bound.values().all(|n| n != "node-1"),
            "the plain pod's node has no room for a member: {bound:?}"
        );
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// muster stopped (SIGSTOP): plain pods keep being scheduled, a gang created meanwhile stays
/// gated with nothing bound; muster back → the gang is placed whole (fail-safe, never-half).
#[tokio::test]
async fn with_muster_stopped_plain_pods_are_scheduled_and_gangs_wait_whole_until_it_returns(
) -> Result<()> {
    let _t = Timer("with_muster_stopped", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        for n in ["node-1", "node-2"] {
            c.add_node(n, NodeShape::cpu("2")).await?;
        }
        let stopped = c.muster.freeze()?;
        let members = names("job", 2);
        create_gang(&c, "job", &members, "1500m").await?;
        let t0 = Instant::now();
        let plain = names("plain", 3);
        for p in &plain {
            c.create(PodBuilder::new("ml", p).cpu("100m")).await?;
        }
        let bound = c
            .wait_bound_while_unbound("ml", &plain, &members, PLAIN)
            .await?;
        eprintln!(
            "plain pods bound with muster stopped in {:.1}s: {bound:?}",
            t0.elapsed().as_secs_f64()
        );
        holds_for(
            "the gang to stay gated and unbound while muster is stopped",
            WINDOW,
            || all_gated(&c, &members),
        )
        .await
        .truth()?;
        stopped.thaw()?;
        placed_whole(&c, &members).await?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// How long muster stalls in the nominated-seat test: an outage of a fixed length (well
/// below kube-scheduler's 10 s `httpTimeout`), not a wait for a condition.
const MUSTER_STALL: Duration = Duration::from_secs(3);

/// A plain pod of the gang's priority does not take a seat muster published as a nomination:
/// kube-scheduler counts the nominated members against it (NominatedNodeNameForExpectation).
///
/// The order is made certain: the plain pod exists first (so it is ahead of the gang in
/// kube-scheduler's queue) but cannot run yet (it requires a pod labelled `anchor=yes` on its
/// node, and there is none); kube-scheduler is stopped while muster nominates and ungates the
/// gang; then an anchor pod is bound on each node. kube-scheduler, resumed, reads the pod events
/// in order (the nominations before the anchors), so when the anchors make the plain pod
/// schedulable it already knows the nominations. Without them the plain pod would take one of
/// the two nodes and the gang could not run. To put the plain pod's turn between the gang's
/// members, muster stalls for [`MUSTER_STALL`] as kube-scheduler resumes: the first member's
/// filter call waits, and the plain pod (queued longest) comes next.
#[tokio::test]
async fn a_plain_pod_of_equal_priority_never_takes_a_nominated_seat() -> Result<()> {
    let _t = Timer("a_plain_pod_never_takes_a_nominated_seat", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        for n in ["node-1", "node-2"] {
            c.add_node(n, NodeShape::cpu("1")).await?;
        }
        let pods: Api<Pod> = Api::namespaced(c.client(), "ml");
        let mut plain = PodBuilder::new("ml", "plain").cpu("600m").build();
        plain
            .spec
            .as_mut()
            .expect("spec")
            .affinity
            .get_or_insert_with(Default::default)
            .pod_affinity = Some(serde_json::from_value(serde_json::json!({
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"anchor": "yes"}},
                "topologyKey": "kubernetes.io/hostname",
            }]
        }))?);
        pods.create(&PostParams::default(), &plain).await?;
        wait_for(
            "kube-scheduler to find the plain pod unschedulable",
            PLACE,
            || async {
                let p = pods.get("plain").await?;
                let unschedulable = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.type_ == "PodScheduled"
                                && c.reason.as_deref() == Some("Unschedulable")
                        })
                    });
                Ok(if unschedulable {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("{:?}", p.status))
                })
            },
        )
        .await?;
        let frozen = c.cp.freeze_scheduler()?;
        let members = names("job", 2);
        create_gang(&c, "job", &members, "600m").await?;
        let nominated = wait_for("muster to nominate and ungate the gang", PLACE, || async {
            let all = c.pods("ml").await?;
            let mut out = BTreeMap::new();
            for m in &members {
                let p = all.iter().find(|p| p.metadata.name.as_deref() == Some(m));
                let nnn = p.and_then(|p| p.status.as_ref()?.nominated_node_name.clone());
                match (p, nnn) {
                    (Some(p), Some(n)) if !is_gated(p) => {
                        out.insert(m.clone(), n);
                    }
                    // muster nominates before it removes a gate: a member kube-scheduler may
                    // try with no seat is what kube-scheduler alone has (a control run).
                    (Some(p), None) if !is_gated(p) => muster_harness::bail_truth!(
                        "{m} has no gate and no nomination: no seat of it counts against the \
                         plain pod"
                    ),
                    _ => return Ok(Progress::NotYet(format!("{m}: {p:?}"))),
                }
            }
            Ok(Progress::Done(out))
        })
        .await?;
        for n in ["node-1", "node-2"] {
            let mut anchor = PodBuilder::new("ml", &format!("anchor-{n}"))
                .cpu("10m")
                .label("anchor", "yes")
                .build();
            anchor.spec.as_mut().expect("spec").node_name = Some(n.to_string());
            pods.create(&PostParams::default(), &anchor).await?;
        }
        // muster stalls (below kube-scheduler's 10 s httpTimeout) while kube-scheduler resumes:
        // the first gang member's filter call waits for it, holding kube-scheduler's serial
        // cycle, while kube-scheduler reads every event and queues the plain pod (ahead of
        // the second member: it has waited longer) next.
        let stalled = c.muster.freeze()?;
        frozen.thaw()?;
        tokio::time::sleep(MUSTER_STALL).await;
        stalled.thaw()?;
        let bound = placed_whole(&c, &members).await?;
        for m in &members {
            muster_harness::ensure_truth!(
                bound[m] == nominated[m],
                "{m} bound to {} but nominated to {}",
                bound[m],
                nominated[m]
            );
        }
        c.assert_none_bound_for("ml", &["plain".to_string()], WINDOW)
            .await?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// A gang member created while the policy is missing carries no marker, so kube-scheduler
/// never asks muster about it: muster says so on the pod (Warning `GangMarkerMissing` naming
/// the policy file) and counts it (explained). Not in the control run: muster warns there too.
#[tokio::test]
async fn a_gang_member_without_the_marker_gets_a_warning_naming_the_policy() -> Result<()> {
    let _t = Timer("a_gang_member_without_the_marker", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?;
        // The policy's binding removed: the policy no longer applies.
        let gvk = GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingAdmissionPolicyBinding",
        );
        let ar = ApiResource::from_gvk_with_plural(&gvk, "mutatingadmissionpolicybindings");
        let bindings: Api<DynamicObject> = Api::all_with(c.client(), &ar);
        bindings
            .delete("muster-gang-members", &DeleteParams::default())
            .await?;
        let pods: Api<Pod> = Api::namespaced(c.client(), "ml");
        let probe = PodBuilder::new("ml", "probe")
            .gang(KeyScheme::Muster, "probe", 2)
            .build();
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        wait_for("the policy to stop applying", REASON, || async {
            let p = pods.create(&dry_run, &probe).await?;
            Ok(if is_marked(&p) {
                Progress::NotYet("still marked".into())
            } else {
                Progress::Done(())
            })
        })
        .await?;
        // Too large for any node: it stays pending, whoever schedules it.
        c.create(
            PodBuilder::new("ml", "lone-0")
                .cpu("64")
                .gang(KeyScheme::Muster, "lone", 2),
        )
        .await?;
        let (_, event) = c
            .wait_event_matching(
                "ml",
                &["lone-0".to_string()],
                "a GangMarkerMissing Warning naming the policy",
                REASON,
                |e| {
                    e.type_ == "Warning"
                        && e.reason == "GangMarkerMissing"
                        && e.message.contains(POLICY_FILE)
                },
            )
            .await?;
        eprintln!("muster's warning: {event}");
        let (status, gangs) = c.muster.get("/gangs").await?;
        ensure!(status == 200, "/gangs answered {status}");
        let gangs: serde_json::Value = serde_json::from_str(&gangs)?;
        let line = gangs["gangs"]
            .as_array()
            .and_then(|a| a.iter().find(|g| g["name"] == "lone"))
            .ok_or_else(|| anyhow!("/gangs does not list gang lone: {gangs}"))?;
        ensure!(
            line["marker_warning"]
                .as_str()
                .is_some_and(|w| w.contains("lone-0") && w.contains(POLICY_FILE)),
            "/gangs line of lone says nothing of the missing marker: {line}"
        );
        let (status, metrics) = c.muster.get("/metrics").await?;
        ensure!(status == 200, "/metrics answered {status}");
        let count = metric(
            &parse_metrics(&metrics),
            "muster_gang_markers_missing_total",
        )?;
        ensure!(count >= 1.0, "muster_gang_markers_missing_total is {count}");
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// muster killed after it removed a gang's gates and before the quorum bound: nothing of the
/// gang is bound while muster is away (kube-scheduler cannot bind a member without muster's
/// extender), and after muster starts again the gang is placed whole (never-half, derived).
/// kube-scheduler is stopped while muster releases the gang, so the kill falls in between.
#[tokio::test]
async fn muster_killed_after_the_gates_went_places_the_gang_whole_after_restart() -> Result<()> {
    let _t = Timer("muster_killed_after_the_gates_went", Instant::now());
    let mut c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        for n in ["node-1", "node-2"] {
            c.add_node(n, NodeShape::cpu("1")).await?;
        }
        let frozen = c.cp.freeze_scheduler()?;
        let members = names("job", 2);
        create_gang(&c, "job", &members, "600m").await?;
        wait_for("muster to ungate the gang", PLACE, || async {
            let pods = c.pods("ml").await?;
            let gated: Vec<_> = pods.iter().filter(|p| is_gated(p)).collect();
            Ok(if pods.len() == members.len() && gated.is_empty() {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{} of {} still gated", gated.len(), pods.len()))
            })
        })
        .await?;
        c.muster.kill_hard();
        frozen.thaw()?;
        c.assert_none_bound_for("ml", &members, WINDOW).await?;
        c.muster.restart().await?;
        placed_whole(&c, &members).await?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// A gang that loses a member after muster let it through holds nothing while the replacement
/// cannot run: the replacement arrives gated by another component (a quota controller, say),
/// so muster releases every seat at once and clears the nominations (holds-nothing): plain
/// pods of the gang's priority take the whole room at once, and nothing of the gang binds.
/// Once the other gate goes, the gang is placed whole (never-half). kube-scheduler is stopped
/// while muster lets the gang through, so the member is lost before any bind.
#[tokio::test]
async fn a_gang_that_loses_a_member_after_its_gates_went_holds_nothing_until_the_replacement_can_run(
) -> Result<()> {
    let _t = Timer(
        "a_gang_that_loses_a_member_after_its_gates_went",
        Instant::now(),
    );
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        for n in ["node-1", "node-2", "node-3"] {
            c.add_node(n, NodeShape::cpu("1")).await?;
        }
        let pods: Api<Pod> = Api::namespaced(c.client(), "ml");
        let frozen = c.cp.freeze_scheduler()?;
        let members = names("job", 3);
        create_gang(&c, "job", &members, "600m").await?;
        wait_for("muster to ungate the gang", PLACE, || async {
            let all = c.pods("ml").await?;
            let gated = all.iter().filter(|p| is_gated(p)).count();
            Ok(if all.len() == members.len() && gated == 0 {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{gated} of {} still gated", all.len()))
            })
        })
        .await
        .truth()?;
        c.delete_pod("ml", "job-2").await?;
        let mut replacement = PodBuilder::new("ml", "job-r")
            .cpu("600m")
            .gang(KeyScheme::Muster, "job", 3)
            .build();
        replacement.spec.as_mut().expect("spec").scheduling_gates =
            Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: QUOTA_GATE.to_string(),
            }]);
        pods.create(&PostParams::default(), &replacement).await?;
        frozen.thaw()?;
        let plain = names("plain", 3);
        for p in &plain {
            c.create(PodBuilder::new("ml", p).cpu("600m")).await?;
        }
        let gang = vec![
            "job-0".to_string(),
            "job-1".to_string(),
            "job-r".to_string(),
        ];
        c.wait_bound_while_unbound("ml", &plain, &gang, PLAIN)
            .await?;
        c.assert_none_bound_for("ml", &gang, WINDOW).await?;
        c.assert_no_overcommit().await?;

        c.delete_pods("ml", &plain).await?;
        let patch = serde_json::json!({
            "spec": {"schedulingGates": [{"name": QUOTA_GATE, "$patch": "delete"}]},
        });
        pods.patch(
            "job-r",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(&patch),
        )
        .await?;
        placed_whole(&c, &gang).await?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// A placed gang's replacement that fits is let through while another replacement is stuck.
/// A gang of three (quorum 2) is created while only one node exists: it stays gated and
/// nothing binds (kube-scheduler alone binds one member: half a gang). With three nodes it is
/// placed whole; then it loses a member and stays placed. A first replacement can run nowhere
/// (its nodeSelector matches no node) and its gate is removed by hand, as a member muster let
/// through before a restart would be: kube-scheduler finds it unschedulable and it stays
/// pending. A second replacement that fits must still be let through and bound: muster once
/// counted every pending member without its gate as on its way to a node, and held every
/// further replacement behind it for good.
#[tokio::test]
async fn a_stuck_member_does_not_keep_a_placed_gangs_replacement_that_fits_gated() -> Result<()> {
    let _t = Timer("a_stuck_member_does_not_keep", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?;
        let members = names("job", 3);
        for n in &members {
            c.create(
                PodBuilder::new("ml", n)
                    .cpu("1")
                    .gang(KeyScheme::Muster, "job", 2),
            )
            .await?;
        }
        holds_for("the gang to stay gated, nothing bound", WINDOW, || async {
            all_gated(&c, &members).await
        })
        .await
        .truth()?;
        for n in ["node-2", "node-3"] {
            c.add_node(n, NodeShape::cpu("1")).await?;
        }
        let bound = c.wait_bound("ml", &members, PLACE).await?;
        c.delete_pod("ml", "job-2").await?;
        let pods: Api<Pod> = Api::namespaced(c.client(), "ml");
        c.create(
            PodBuilder::new("ml", "job-stuck")
                .cpu("1")
                .node_selector("example.com/pool", "nowhere")
                .gang(KeyScheme::Muster, "job", 2),
        )
        .await?;
        let ungate = serde_json::json!({
            "spec": {"schedulingGates": [{"name": GATHER_GATE, "$patch": "delete"}]},
        });
        pods.patch(
            "job-stuck",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(&ungate),
        )
        .await?;
        wait_for("kube-scheduler to refuse job-stuck", PLACE, || async {
            let p = pods.get("job-stuck").await?;
            let refused = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.type_ == "PodScheduled"
                            && c.status == "False"
                            && c.reason.as_deref() == Some("Unschedulable")
                    })
                });
            Ok(if refused {
                Progress::Done(())
            } else {
                Progress::NotYet("not refused yet".into())
            })
        })
        .await?;
        c.create(
            PodBuilder::new("ml", "job-r")
                .cpu("1")
                .gang(KeyScheme::Muster, "job", 2),
        )
        .await?;
        let freed = bound.get("job-2").map(|(n, _)| n.clone());
        let placed = c.wait_bound("ml", &names_of(&["job-r"]), PLACE).await?;
        muster_harness::ensure_truth!(
            placed.get("job-r").map(|(n, _)| n.clone()) == freed,
            "job-r took the room job-2 left ({freed:?}): {placed:?}"
        );
        c.assert_none_bound_for("ml", &names_of(&["job-stuck"]), Duration::ZERO)
            .await?;
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["ml"], r).await
}

fn names_of(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

/// Another component's scheduling gate (the tests play that component).
const QUOTA_GATE: &str = "example.com/quota";

/// A high-priority gathered gang fits only by preempting low-priority plain pods: muster lets
/// its quorum through the gate (no seats), kube-scheduler's preemption runs for its members
/// through muster's preempt verb (a candidate only when the whole gang then fits), the victims
/// go and the gang is placed whole (evict-for-whole, never-half). A gang that could not run
/// even with every low-priority pod gone stays gated and evicts nothing.
#[tokio::test]
async fn a_gathered_gang_that_fits_only_by_preempting_lower_priority_pods_is_placed_whole(
) -> Result<()> {
    let _t = Timer(
        "a_gathered_gang_that_fits_only_by_preempting",
        Instant::now(),
    );
    let c = gang_members_cluster().await?;
    let r = async {
        two_nodes_and_priorities(&c).await?;
        let low = names("low", 2);
        for n in &low {
            c.create(PodBuilder::new("ml", n).cpu("1").priority_class("low"))
                .await?;
        }
        c.wait_bound("ml", &low, PLAIN).await?;

        // Three members cannot run on two nodes even with both low pods gone.
        let never = names("never", 3);
        for n in &never {
            c.create(
                PodBuilder::new("ml", n)
                    .cpu("1")
                    .priority_class("high")
                    .gang(KeyScheme::Muster, "never", 3),
            )
            .await?;
        }
        holds_for(
            "the hopeless gang to stay gated and the low pods to stay",
            WINDOW,
            || async {
                let bound = c.bound_pods("ml").await?;
                if let Some(l) = low.iter().find(|l| !bound.contains_key(*l)) {
                    return Ok(Err(format!("cluster truth: {l} was evicted")));
                }
                all_gated(&c, &never).await
            },
        )
        .await
        .truth()?;
        c.delete_pods("ml", &never).await?;

        let members = names("job", 2);
        for n in &members {
            c.create(
                PodBuilder::new("ml", n)
                    .cpu("1")
                    .priority_class("high")
                    .gang(KeyScheme::Muster, "job", 2),
            )
            .await?;
        }
        let bound = placed_whole(&c, &members).await?;
        let nodes: BTreeSet<&String> = bound.values().collect();
        muster_harness::ensure_truth!(nodes.len() == 2, "one member per node: {bound:?}");
        let left = c.bound_pods("ml").await?;
        muster_harness::ensure_truth!(
            low.iter().all(|l| !left.contains_key(l)),
            "the low-priority pods are still bound: {left:?}"
        );
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// Namespace `ml`, PriorityClasses `low` (100) and `high` (100000), two 1-CPU nodes.
async fn two_nodes_and_priorities(c: &Cluster) -> Result<()> {
    c.namespace("ml").await?;
    for (name, value) in [("low", 100), ("high", 100_000)] {
        let pc = k8s_openapi::api::scheduling::v1::PriorityClass {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            value: Some(value),
            ..Default::default()
        };
        Api::<k8s_openapi::api::scheduling::v1::PriorityClass>::all(c.client())
            .create(&PostParams::default(), &pc)
            .await
            .with_context(|| format!("creating PriorityClass {name}"))?;
    }
    for n in ["node-1", "node-2"] {
        c.add_node(n, NodeShape::cpu("1")).await?;
    }
    Ok(())
}

/// A running gang's member preempted by kube-scheduler while muster is away (killed: the
/// preempt-only extender entry is `ignorable`, so a plain pod's preemption goes on without
/// muster's say): once muster is back, the rest of the gang is evicted, so the gang is
/// disrupted whole, not left half running (evict-for-whole). muster reads kube-scheduler's
/// `DisruptionTarget` condition (`PreemptionByScheduler`) on the victim, which still
/// terminates (its grace period), from its first list after the restart.
/// kube-scheduler alone leaves the other member running (checked while muster is away, and in
/// the control run, where muster runs with `--evict-gangs-preempted-without-muster=false`).
#[tokio::test]
async fn a_member_preempted_while_muster_is_away_gets_the_rest_of_its_gang_evicted_on_its_return(
) -> Result<()> {
    let _t = Timer(
        "a_member_preempted_while_muster_is_away_gets_the_rest_of_its_gang_evicted",
        Instant::now(),
    );
    let mut c = gang_members_cluster().await?;
    let r = async {
        two_nodes_and_priorities(&c).await?;
        let members = names("run", 2);
        for n in &members {
            let mut pod = PodBuilder::new("ml", n)
                .cpu("1")
                .priority_class("low")
                .gang(KeyScheme::Muster, "run", 2)
                .build();
            // A victim terminates for its grace period (the harness's pods have none): with no
            // kubelet here, it stays being deleted while muster is away and after.
            if let Some(spec) = pod.spec.as_mut() {
                spec.termination_grace_period_seconds = Some(30);
            }
            muster_harness::k8s::create_pod(&c.client(), "ml", &pod).await?;
        }
        placed_whole(&c, &members).await?;
        c.muster.kill_hard();
        c.create(PodBuilder::new("ml", "high").cpu("1").priority_class("high"))
            .await?;
        let cluster = &c;
        let victims = wait_for("kube-scheduler to preempt a member", PLACE, || async move {
            let pods = cluster.pods("ml").await?;
            let preempted: Vec<String> = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some() && disruption_target(p))
                .map(|p| muster_harness::k8s::pod_name(p).to_string())
                .collect();
            Ok(if preempted.is_empty() {
                Progress::NotYet("no member is being deleted".into())
            } else {
                Progress::Done(preempted)
            })
        })
        .await?;
        ensure!(victims.len() == 1, "one victim is enough for one pod: {victims:?}");
        let rest: Vec<String> = members
            .iter()
            .filter(|m| !victims.contains(m))
            .cloned()
            .collect();
        ensure!(
            being_deleted(&c, &rest).await?.is_empty(),
            "kube-scheduler alone deleted more than its victim"
        );
        c.muster.restart().await?;
        let (cluster, rest_ref) = (&c, &rest);
        // Only muster evicts the rest, and in a control run it is told not to: there the wait
        // observes the cluster for CONTROL_TRUTH_WINDOW instead of running out PLACE (a shorter
        // wait can only fail sooner, never pass).
        let evicted_within = if muster_harness::control_run_requested() {
            muster_harness::CONTROL_TRUTH_WINDOW
        } else {
            PLACE
        };
        wait_for("the rest of the gang to be evicted", evicted_within, || async move {
            let deleting = being_deleted(cluster, rest_ref).await?;
            Ok(if deleting.len() == rest_ref.len() {
                Progress::Done(())
            } else {
                Progress::NotYet(format!(
                    "cluster truth: half the gang runs, the rest not evicted ({deleting:?} of {rest_ref:?})"
                ))
            })
        })
        .await
        .truth()?;
        c.wait_event_containing("ml", &rest, "without muster's say", REASON)
            .await?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// kube-scheduler's mark on a pod it preempted: `DisruptionTarget=True`,
/// `PreemptionByScheduler`.
fn disruption_target(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some("PreemptionByScheduler")
            })
        })
}

/// The listed pods being deleted or gone.
async fn being_deleted(c: &Cluster, pods: &[String]) -> Result<Vec<String>> {
    let now = c.pods("ml").await?;
    Ok(pods
        .iter()
        .filter(|n| {
            now.iter()
                .find(|p| muster_harness::k8s::pod_name(p) == n.as_str())
                .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
        })
        .cloned()
        .collect())
}

/// How long the API server keeps refusing a member's nomination in the back-off test.
const REFUSED_FOR: Duration = Duration::from_secs(15);
/// The nomination PATCHes of that member muster may send within [`REFUSED_FOR`]: its
/// back-off (100 ms doubling to 10 s) allows 8 (at 0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3 and
/// 12.7 s; `cluster::gather::backoff`), with 2 of slack; sent again every round (a round
/// at least every second) it would be about 15.
const REFUSED_PATCHES_AT_MOST: u32 = 10;

/// A nomination the API server keeps refusing (fail-safe, never-half): muster's proxy answers
/// 500 to every `pods/status` PATCH of one member of a gang that fits. muster sends it again
/// only as its per-pod back-off allows (counted at the proxy: at most
/// [`REFUSED_PATCHES_AT_MOST`] in [`REFUSED_FOR`]), keeps every gate (the gang stays gated and
/// unbound), and withdraws the nominations it wrote for the other, still gated, members (a
/// gated member holds no room against plain pods beyond the moment of its release). Once the
/// API server accepts the PATCH again, the gang is placed whole.
#[tokio::test]
async fn a_nomination_the_api_server_keeps_refusing_is_backed_off_and_its_gang_stays_gated_until_it_passes(
) -> Result<()> {
    let _t = Timer("a_refused_nomination_is_backed_off", Instant::now());
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).through_api_proxy()).await?;
    let r = async {
        c.namespace("ml").await?;
        for n in ["node-1", "node-2"] {
            c.add_node(n, NodeShape::cpu("2")).await?;
        }
        let proxy = c.api_proxy().context("started through the proxy")?;
        let refused = proxy.add(Rule {
            pattern: Pattern {
                method: "PATCH",
                path_contains: vec!["/namespaces/ml/pods/job-1/status".into()],
            },
            fault: Fault::Status {
                code: 500,
                retry_after: None,
            },
            times: None,
        });
        // A plain pod of the gang's priority waits (3 CPUs fit nowhere): each seat is at risk
        // of it, so each is published as a nomination before any gate goes.
        c.create(PodBuilder::new("ml", "waiting").cpu("3")).await?;
        let members = names("job", 3);
        create_gang(&c, "job", &members, "1").await?;
        holds_for(
            "the gang to stay gated and unbound while one nomination is refused",
            REFUSED_FOR,
            || all_gated(&c, &members),
        )
        .await
        .truth()?;
        let sent = proxy.seen(refused);
        eprintln!("the refused nomination was sent {sent} times in {REFUSED_FOR:?}");
        ensure!(
            (1..=REFUSED_PATCHES_AT_MOST).contains(&sent),
            "the refused nomination of job-1 was sent {sent} times in {REFUSED_FOR:?} (at most \
             {REFUSED_PATCHES_AT_MOST} with the back-off)"
        );
        wait_for(
            "the other members' nominations withdrawn while they stay gated",
            Duration::from_secs(10),
            || async {
                let pods = c.pods("ml").await?;
                let nominated: Vec<String> = pods
                    .iter()
                    .filter(|p| {
                        p.status
                            .as_ref()
                            .is_some_and(|s| s.nominated_node_name.is_some())
                    })
                    .filter_map(|p| p.metadata.name.clone())
                    .collect();
                Ok(if nominated.is_empty() {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("nominated: {nominated:?}"))
                })
            },
        )
        .await?;
        let m = parse_metrics(&c.muster.get("/metrics").await?.1);
        let backed_off: Vec<(&String, &f64)> = m
            .iter()
            .filter(|(k, _)| {
                k.starts_with("muster_gather_writes_backed_off_total")
                    || k.starts_with("muster_nomination_writes_total")
            })
            .collect();
        eprintln!("muster's gather writes under the fault: {backed_off:?}");
        proxy.clear();
        placed_whole(&c, &members).await?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// A gang-keyed pod for a scheduler that does not call muster (`schedulerName: volcano`) is
/// left alone: the policy marks only the pods of schedulers that call muster (it is created
/// without muster's gate and marker), muster counts it in no gang and says so once (Warning
/// `GangKeysIgnored`), and the muster gang of the same group name in the same namespace is
/// unaffected: with one of its two members created it stays gated and unbound (counting the
/// Volcano pod as its second member, muster would release both and bind one alone), and with
/// the second it is placed whole. No Volcano scheduler runs, so its pod stays Pending.
#[tokio::test]
async fn a_gang_pod_of_another_scheduler_is_left_unmarked_with_a_warning_and_the_muster_gang_is_unaffected(
) -> Result<()> {
    let _t = Timer("a_gang_pod_of_another_scheduler", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("2")).await?;
        let volcano = c
            .create(
                PodBuilder::new("ml", "volcano-0")
                    .cpu("100m")
                    .gang(KeyScheme::Muster, "job", 2)
                    .scheduler_name("volcano"),
            )
            .await?;
        ensure!(
            !is_marked(&volcano) && !is_gated(&volcano),
            "the policy marked or gated a pod of schedulerName volcano: {:?}",
            volcano
                .spec
                .as_ref()
                .map(|s| (&s.scheduling_gates, &s.containers[0].resources))
        );
        let members = names("job", 2);
        let member = |name: &str| {
            PodBuilder::new("ml", name)
                .cpu("500m")
                .gang(KeyScheme::Muster, "job", 2)
        };
        c.create(member(&members[0])).await?;
        holds_for(
            "the muster gang's one member to stay gated and unbound",
            WINDOW,
            || all_gated(&c, &members[..1]),
        )
        .await
        .truth()?;
        let (_, event) = c
            .wait_event_matching(
                "ml",
                &["volcano-0".to_string()],
                "a GangKeysIgnored Warning naming its scheduler",
                REASON,
                |e| {
                    e.type_ == "Warning"
                        && e.reason == "GangKeysIgnored"
                        && e.message.contains(
                            "its schedulerName volcano does not call muster (the schedulers \
                             that do: default-scheduler)",
                        )
                },
            )
            .await?;
        eprintln!("muster's warning: {event}");
        c.create(member(&members[1])).await?;
        placed_whole(&c, &members).await?;
        let events = c.events_for("ml", "volcano-0").await?;
        let warnings: i32 = events
            .iter()
            .filter(|e| e.reason == "GangKeysIgnored")
            .map(|e| e.count)
            .sum();
        ensure!(
            warnings == 1,
            "volcano-0 was warned {warnings} times: {events:?}"
        );
        let pods = c.pods("ml").await?;
        let v = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some("volcano-0"))
            .context("volcano-0 is gone")?;
        ensure!(pod_node(v).is_none(), "volcano-0 was bound");
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// Removes `key` from the pod's labels, as `kubectl label pod NAME KEY-` does.
async fn remove_label(c: &Cluster, name: &str, key: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(c.client(), "ml");
    let patch = serde_json::json!({"metadata": {"labels": {key: null}}});
    pods.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// muster owns its gate: a member gated by the policy (its group given as the label
/// `muster.dev/group`, quorum 2, alone, so it waits) whose gang label is removed is in no gang any
/// more; muster removes its gate and says why (Warning `GangGateReleased`), and kube-scheduler
/// binds it as a plain pod. Before, its gate stayed forever.
#[tokio::test]
async fn a_gated_member_whose_gang_label_is_removed_is_released_and_bound_as_a_plain_pod(
) -> Result<()> {
    let _t = Timer("a_gated_member_whose_gang_label_is_removed", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?;
        let name = "lone".to_string();
        c.create(
            PodBuilder::new("ml", &name)
                .cpu("100m")
                .label("muster.dev/group", "lone")
                .annotation("muster.dev/min-available", "2"),
        )
        .await?;
        holds_for(
            "the lone member (1 of 2) to stay gated and unbound",
            WINDOW,
            || all_gated(&c, std::slice::from_ref(&name)),
        )
        .await
        .truth()?;
        remove_label(&c, &name, "muster.dev/group").await?;
        c.wait_bound("ml", std::slice::from_ref(&name), PLAIN)
            .await
            .truth()?;
        let (_, event) = c
            .wait_event_matching(
                "ml",
                std::slice::from_ref(&name),
                "a GangGateReleased Warning saying it has no gang keys",
                REASON,
                |e| {
                    e.type_ == "Warning"
                        && e.reason == "GangGateReleased"
                        && e.message.contains("has no gang keys (any more)")
                },
            )
            .await?;
        eprintln!("muster's warning: {event}");
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// A pod created with two different groups (muster's annotation and coscheduling's label) is
/// not a valid member: muster keeps it behind its gate (released alone it could bind part of
/// a gang: never-half) and says so, naming both keys (Warning `InvalidGangKeys`). Once the
/// label is removed it is a valid member of its gang (quorum 1) and is placed.
#[tokio::test]
async fn a_pod_created_with_two_conflicting_groups_stays_gated_with_a_warning_naming_both(
) -> Result<()> {
    let _t = Timer("a_pod_created_with_two_conflicting_groups", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?;
        let name = "split".to_string();
        c.create(
            PodBuilder::new("ml", &name)
                .cpu("100m")
                .annotation("muster.dev/group", "alpha")
                .annotation("muster.dev/min-available", "1")
                .label("scheduling.x-k8s.io/pod-group", "beta"),
        )
        .await?;
        holds_for(
            "the pod with two groups to stay gated and unbound",
            WINDOW,
            || all_gated(&c, std::slice::from_ref(&name)),
        )
        .await
        .truth()?;
        let (_, event) = c
            .wait_event_matching(
                "ml",
                std::slice::from_ref(&name),
                "an InvalidGangKeys Warning naming both keys and the gate",
                REASON,
                |e| {
                    e.type_ == "Warning"
                        && e.reason == "InvalidGangKeys"
                        && e.message.contains(
                            "conflicting gang keys: muster.dev/group=\"alpha\" but \
                             scheduling.x-k8s.io/pod-group=\"beta\"",
                        )
                        && e.message
                            .contains("stays behind muster's gate muster.dev/gather")
                },
            )
            .await?;
        eprintln!("muster's warning: {event}");
        remove_label(&c, &name, "scheduling.x-k8s.io/pod-group").await?;
        c.wait_bound("ml", std::slice::from_ref(&name), PLACE)
            .await
            .truth()?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// How long a plain pod that must preempt may take to be bound while muster is frozen: each
/// of up to three preempt calls (the first cycle, and retries that reach PostFilter again
/// before kube-scheduler's cache shows the victim gone) costs kube-scheduler's serial cycle the
/// preempt-only entry's `httpTimeout` before it goes on without muster, plus the eviction and
/// the binding on a busy machine. With the entry's old 10 s timeout one call alone is over it.
const PREEMPTED_WHILE_FROZEN: Duration =
    Duration::from_secs(3 * muster_harness::timing::PREEMPT_ONLY_HTTP_TIMEOUT.as_secs() + 2);

/// muster frozen (SIGSTOP: its socket still accepts, nothing answers), a high-priority plain
/// pod that fits only by preempting a low-priority plain pod is bound within
/// [`PREEMPTED_WHILE_FROZEN`]: kube-scheduler waits for the preempt-only entry's short
/// `httpTimeout`, not 10 s, then (the entry is `ignorable`) preempts on its own (fail-safe).
/// It picks the plain pod, not a member of the running gang of higher priority; once muster
/// resumes, that gang is still whole (never-half). Not in the control run: kube-scheduler alone
/// asks no extender, and this test claims no gang behaviour.
#[tokio::test]
async fn with_muster_frozen_a_plain_pod_that_must_preempt_is_scheduled_within_the_short_preempt_timeout(
) -> Result<()> {
    let _t = Timer(
        "with_muster_frozen_a_plain_pod_that_must_preempt_is_scheduled",
        Instant::now(),
    );
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        for (name, value) in [("low", 100), ("mid", 1_000), ("high", 100_000)] {
            let pc = k8s_openapi::api::scheduling::v1::PriorityClass {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                value: Some(value),
                ..Default::default()
            };
            Api::<k8s_openapi::api::scheduling::v1::PriorityClass>::all(c.client())
                .create(&PostParams::default(), &pc)
                .await
                .with_context(|| format!("creating PriorityClass {name}"))?;
        }
        for n in ["node-1", "node-2", "node-3"] {
            c.add_node(n, NodeShape::cpu("1")).await?;
        }
        let members = names("run", 2);
        for n in &members {
            c.create(
                PodBuilder::new("ml", n)
                    .cpu("1")
                    .priority_class("mid")
                    .gang(KeyScheme::Muster, "run", 2),
            )
            .await?;
        }
        placed_whole(&c, &members).await?;
        let low = vec!["low".to_string()];
        c.create(PodBuilder::new("ml", "low").cpu("1").priority_class("low"))
            .await?;
        c.wait_bound("ml", &low, PLAIN).await?;
        let frozen = c.muster.freeze()?;
        let t0 = Instant::now();
        c.create(
            PodBuilder::new("ml", "high")
                .cpu("1")
                .priority_class("high"),
        )
        .await?;
        let high = vec!["high".to_string()];
        c.wait_bound("ml", &high, PLACE).await?;
        let took = t0.elapsed();
        eprintln!(
            "high-priority plain pod bound {:.2}s after its creation with muster frozen \
             (bound: {PREEMPTED_WHILE_FROZEN:?})",
            took.as_secs_f64()
        );
        ensure!(
            took <= PREEMPTED_WHILE_FROZEN,
            "with muster frozen, the plain pod that must preempt took {took:?} to be bound \
             (> {PREEMPTED_WHILE_FROZEN:?}): kube-scheduler waited for muster's preempt answer"
        );
        ensure!(
            being_deleted(&c, &low).await? == low,
            "the low-priority pod was not the victim"
        );
        frozen.thaw()?;
        let cluster = &c;
        let members_ref = &members;
        holds_for(
            "the running gang to stay whole after muster resumes",
            WINDOW,
            || async move {
                let bound = cluster.bound_pods("ml").await?;
                let deleting = being_deleted(cluster, members_ref).await?;
                let on: Vec<&String> = members_ref
                    .iter()
                    .filter(|m| bound.contains_key(*m))
                    .collect();
                Ok(if on.len() == members_ref.len() && deleting.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "the gang is not whole: bound {on:?}, being deleted {deleting:?}"
                    ))
                })
            },
        )
        .await
        .truth()?;
        c.assert_no_overcommit().await?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// Whether muster's marker is published in the node's capacity and allocatable (what
/// NodeResourcesFit's queueing hint reads of a node).
async fn marker_published(c: &Cluster, node: &str) -> Result<bool> {
    let n = Api::<k8s_openapi::api::core::v1::Node>::all(c.client())
        .get(node)
        .await?;
    let has = |l: Option<
        &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| { l.is_some_and(|l| l.contains_key(GANG_MARKER)) };
    let s = n.status.as_ref();
    Ok(has(s.and_then(|s| s.capacity.as_ref())) && has(s.and_then(|s| s.allocatable.as_ref())))
}

/// kube-scheduler retries a gang member it rejected for room when nodes are added, and the gang
/// is still placed whole: muster publishes its marker `muster.dev/gang` on every node
/// (src/cluster/node_marker.rs), which NodeResourcesFit's queueing hint for node events needs —
/// it checks the member against the new node without the config's `ignoredByScheduler`
/// resources (`isSchedulableAfterNodeChange`, noderesources/fit.go:547 in v1.37.2). Without the
/// marker the members wait for kube-scheduler's 5-minute flush (`--publish-node-marker=false`:
/// this test then fails at PLACE).
///
/// Members kube-scheduler rejects for room are made certain: kube-scheduler is stopped while
/// muster lets the gang through; then a pod bound outside every scheduler (`spec.nodeName`, as a
/// DaemonSet's or a static pod) takes the node's room before kube-scheduler resumes and tries the
/// members (its priority is theirs: nothing is preempted). Then one node with room for one
/// member comes: nothing is bound (without muster one member is, in the control run); then a
/// second: the gang is placed whole on the two.
#[tokio::test]
async fn members_rejected_for_room_are_retried_when_nodes_are_added_and_placed_whole() -> Result<()>
{
    let _t = Timer("members_rejected_for_room_are_retried", Instant::now());
    let c = gang_members_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("2")).await?;
        let frozen = c.cp.freeze_scheduler()?;
        let members = names("job", 2);
        create_gang(&c, "job", &members, "1").await?;
        wait_for("muster to let the gang through", PLACE, || async {
            let pods = c.pods("ml").await?;
            let gated: Vec<&String> = members
                .iter()
                .filter(|m| {
                    pods.iter()
                        .any(|p| p.metadata.name.as_deref() == Some(m.as_str()) && is_gated(p))
                })
                .collect();
            Ok(if gated.is_empty() {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("still gated: {gated:?}"))
            })
        })
        .await?;
        let mut squatter = PodBuilder::new("ml", "squatter").cpu("2").build();
        squatter.spec.as_mut().expect("spec").node_name = Some("node-1".into());
        Api::<Pod>::namespaced(c.client(), "ml")
            .create(&PostParams::default(), &squatter)
            .await?;
        frozen.thaw()?;
        let rejected = wait_for(
            "kube-scheduler to find no room for either member",
            PLACE,
            || async {
                let pods = c.pods("ml").await?;
                // node-1, the only node, is full with the squatter: a member bound now is an
                // over-commit (kube-scheduler alone can do it, in the control run, when it
                // schedules a member before its cache has the squatter).
                let bound: Vec<String> = pods
                    .iter()
                    .filter(|p| {
                        members
                            .iter()
                            .any(|m| p.metadata.name.as_deref() == Some(m))
                    })
                    .filter_map(|p| {
                        let node = muster_harness::k8s::pod_node(p)?;
                        Some(format!("{} on {node}", p.metadata.name.as_deref()?))
                    })
                    .collect();
                if !bound.is_empty() {
                    return Ok(Progress::Done(Err(format!(
                        "bound while the squatter fills node-1, the only node: {bound:?}"
                    ))));
                }
                let mut seen = BTreeMap::new();
                for m in &members {
                    let p = pods.iter().find(|p| p.metadata.name.as_deref() == Some(m));
                    let cond = p.and_then(muster_harness::k8s::scheduled_condition);
                    match cond {
                        Some(c) if c.contains("Unschedulable") => {
                            seen.insert(m.clone(), c);
                        }
                        other => return Ok(Progress::NotYet(format!("{m}: {other:?}"))),
                    }
                }
                // NodeResourcesFit's own rejection is what its node hint decides on (a member
                // kube-scheduler tried before it saw the squatter was refused by muster).
                Ok(if seen.values().any(|c| c.contains("Insufficient cpu")) {
                    Progress::Done(Ok(seen))
                } else {
                    Progress::NotYet(format!("no NodeResourcesFit rejection yet: {seen:?}"))
                })
            },
        )
        .await?;
        let rejected = match rejected {
            Ok(seen) => seen,
            Err(overcommit) => return Err(anyhow!(overcommit)).truth(),
        };
        eprintln!("rejected: {rejected:?}");
        c.add_node("node-2", NodeShape::cpu("1")).await?;
        c.assert_none_bound_for("ml", &members, WINDOW).await?;
        c.add_node("node-3", NodeShape::cpu("1")).await?;
        let bound = placed_whole(&c, &members).await?;
        let nodes: BTreeSet<&str> = bound.values().map(String::as_str).collect();
        muster_harness::ensure_truth!(
            nodes == BTreeSet::from(["node-2", "node-3"]),
            "the gang on the two new nodes: {bound:?}"
        );
        for n in ["node-1", "node-2", "node-3"] {
            ensure!(
                marker_published(&c, n).await?,
                "{n}: muster did not publish {GANG_MARKER}"
            );
        }
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

/// Nodes added while muster may not patch `nodes/status`, in this test.
const NODES_WITHOUT_PERMISSION: usize = 12;

/// The node marker's writer when muster may not patch `nodes/status` (an operator who dropped
/// the rule from the ClusterRole, or granted it late): the marker only makes kube-scheduler retry
/// members when nodes come, so a gang is still placed whole (fail-safe); muster warns once and
/// asks again one node every 10 s, not every node (a refusal stops the batch: without that, the
/// first refusal came with one refused write per node added); and once the permission is back,
/// every node gets the marker within seconds (not after the 5 minutes muster used to wait).
#[tokio::test]
async fn without_permission_to_patch_node_status_muster_warns_once_asks_one_node_at_a_time_and_publishes_once_granted(
) -> Result<()> {
    use k8s_openapi::api::authorization::v1::ResourceAttributes;
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let _t = Timer("without_permission_to_patch_node_status", Instant::now());
    // Its own control plane: the ClusterRole it edits is cluster-wide.
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).own_control_plane()).await?;
    let r = async {
        c.namespace("ml").await?;
        let roles = Api::<ClusterRole>::all(c.client());
        let shipped = roles.get(muster_harness::rbac::SERVICE_ACCOUNT).await?;
        let mut without = shipped.clone();
        let rules = without
            .rules
            .as_mut()
            .context("the ClusterRole has rules")?;
        let before = rules.len();
        rules.retain(|r| {
            !r.resources
                .iter()
                .flatten()
                .any(|res| res == "nodes/status")
        });
        ensure!(
            rules.len() + 1 == before,
            "one rule grants nodes/status: {rules:?}"
        );
        roles
            .replace(
                &shipped.metadata.name.clone().unwrap_or_default(),
                &PostParams::default(),
                &without,
            )
            .await?;
        let patch_node_status = || ResourceAttributes {
            verb: Some("patch".into()),
            resource: Some("nodes".into()),
            subresource: Some("status".into()),
            ..Default::default()
        };
        wait_for("the authorizer to refuse nodes/status", PLACE, || async {
            let may = muster_harness::rbac::service_account_may(
                &c.client(),
                muster_harness::rbac::SERVICE_ACCOUNT,
                patch_node_status(),
            )
            .await?;
            Ok(if may {
                Progress::NotYet("still allowed".into())
            } else {
                Progress::Done(())
            })
        })
        .await?;

        let nodes: Vec<String> = (1..=NODES_WITHOUT_PERMISSION)
            .map(|i| format!("node-{i}"))
            .collect();
        for n in &nodes {
            c.add_node(n, NodeShape::cpu("2")).await?;
        }
        let members = names("job", 2);
        create_gang(&c, "job", &members, "1").await?;
        placed_whole(&c, &members).await?;

        let forbidden = "muster_node_marker_writes_total{outcome=\"forbidden\"}";
        let without_marker = NODES_WITHOUT_PERMISSION as f64;
        // The first refusal, then the probe 10 s later.
        let seen = wait_for("two refused writes", PLACE, || async {
            let m = c.muster.metrics().await?;
            let refused = m.get(forbidden).copied().unwrap_or(0.0);
            let short = m.get("muster_nodes_without_marker").copied().unwrap_or(0.0);
            Ok(if refused >= 2.0 && short == without_marker {
                Progress::Done(refused)
            } else {
                Progress::NotYet(format!(
                    "{forbidden} = {refused}, nodes without marker = {short}"
                ))
            })
        })
        .await?;
        ensure!(
            seen <= 3.0,
            "{seen} refused writes for {NODES_WITHOUT_PERMISSION} nodes: a refusal must stop the \
             others (one node asked every 10 s)"
        );
        for n in &nodes {
            ensure!(
                !marker_published(&c, n).await?,
                "{n} has {GANG_MARKER} without permission"
            );
        }
        let log = std::fs::read_to_string(c.muster.log_path())?;
        let warnings = log
            .matches("cannot publish muster.dev/gang on nodes")
            .count();
        ensure!(
            warnings == 1,
            "warned {warnings} times of the refusal (want once)"
        );

        // Granted again: every node gets the marker at the next probe.
        let mut granted = roles.get(muster_harness::rbac::SERVICE_ACCOUNT).await?;
        granted.rules = shipped.rules.clone();
        roles
            .replace(
                &shipped.metadata.name.clone().unwrap_or_default(),
                &PostParams::default(),
                &granted,
            )
            .await?;
        wait_for("every node to get the marker", PLACE, || async {
            let mut missing = Vec::new();
            for n in &nodes {
                if !marker_published(&c, n).await? {
                    missing.push(n.clone());
                }
            }
            Ok(if missing.is_empty() {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("without the marker: {missing:?}"))
            })
        })
        .await?;
        c.muster
            .wait_metrics(
                "muster to see every node published",
                PLACE,
                &[("muster_nodes_without_marker", 0.0)],
            )
            .await?;
        let log = std::fs::read_to_string(c.muster.log_path())?;
        ensure!(
            log.contains("publishing muster.dev/gang on nodes goes through again"),
            "muster did not log that publishing goes through again"
        );
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}
