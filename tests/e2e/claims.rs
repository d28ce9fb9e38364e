//! End-to-end checks of documented claims (README.md, docs/) that had no test, each against its
//! own real control plane (etcd + kube-apiserver + the stock kube-scheduler, muster as its
//! extender, fake nodes).
//!
//! muster runs with the shipped RBAC here (the harness default: a token of ServiceAccount
//! `muster-system/muster` bound to `deploy/rbac.yaml`'s ClusterRole), so every test also shows
//! that those permissions are enough. Every test that claims gang behaviour fails with
//! kube-scheduler alone on cluster truth: each has a moment where vanilla scheduling binds part
//! of a gang (or a pod muster refuses), checked before muster's own Events, `/gangs` or
//! `/metrics` are read (and those are not read in the control run).
//!
//! Waiting is polling with deadlines; "is not placed" is an observation window in which every
//! poll must see nothing bound.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{Node, Pod, Secret, Toleration};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use muster_harness::checks::metric;
use muster_harness::control_plane::client_from_kubeconfig;
use muster_harness::k8s::{self, KeyScheme, MUSTER_GROUP, MUSTER_MIN_AVAILABLE};
use muster_harness::{
    ensure_truth, muster_view_is_checked, names, pod_names, rbac, spread, wait_for, Cluster,
    ClusterOptions, NodeShape, PodBuilder, Progress, Timer, PLACE, REASON, TOGETHER, WINDOW,
};
use serde_json::{json, Value};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");

// ------------------------------------------------------------------------------- helpers

/// The gang's entry in muster's `/gangs`, if it has one.
async fn gang_view(c: &Cluster, ns: &str, name: &str) -> Result<Option<Value>> {
    let (code, body) = c.muster.get("/gangs").await?;
    ensure!(code == 200, "/gangs answered HTTP {code}: {body}");
    let v: Value = serde_json::from_str(&body).context("/gangs is not JSON")?;
    Ok(v["gangs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["namespace"] == ns && g["name"] == name)
        .cloned())
}

/// Member states of a `/gangs` entry, e.g. `["trio-0=pending", …]`.
fn member_states(g: &Value) -> Vec<String> {
    g["members"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            format!(
                "{}={}",
                m["name"].as_str().unwrap_or("?"),
                m["state"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

/// Waits until muster's `GangWaiting` Event on one of `pods` is exactly `message`, none of
/// `pods` bound meanwhile (cluster truth first; only that in a control run).
async fn wait_gang_waiting(c: &Cluster, ns: &str, pods: &[String], message: &str) -> Result<()> {
    c.wait_gang_waiting_event(ns, pods, message, REASON).await
}

/// Asserts that `/gangs` shows the gang `waiting` with `reason`, the given quorum, and no
/// member holding a seat (a gang that cannot run holds nothing).
async fn assert_waiting_without_seats(
    c: &Cluster,
    ns: &str,
    name: &str,
    quorum: u64,
    reason: &str,
) -> Result<()> {
    let g = gang_view(c, ns, name)
        .await?
        .with_context(|| format!("gang {ns}/{name} is not in /gangs"))?;
    let states = member_states(&g);
    ensure!(
        g["state"] == "waiting"
            && g["quorum"] == quorum
            && g["waiting_reason"] == reason
            && states.iter().all(|s| s.ends_with("=pending")),
        "expected gang {ns}/{name} waiting (quorum {quorum}, {reason:?}) with every member \
         pending, got {g}"
    );
    Ok(())
}

/// `/metrics` as `name{labels}` → value.
async fn scrape(c: &Cluster) -> Result<BTreeMap<String, f64>> {
    c.muster.metrics().await
}

/// Polls `/metrics` until every `(series, value)` in `want` holds; the error shows what was seen.
async fn wait_metrics(c: &Cluster, what: &str, want: &[(&str, f64)]) -> Result<()> {
    c.muster.wait_metrics(what, REASON, want).await
}

async fn create_pod(c: &Cluster, pod: Pod) -> Result<Pod> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    k8s::create_pod(&c.client(), &ns, &pod).await
}

// ------------------------------------------------------------------ quorum without a key

/// README: "Without any quorum key, the quorum is the number of members that exist." Three pods
/// carry only `muster.dev/group`; with room for two none is bound (kube-scheduler alone would
/// bind two), and all three are bound together once room for the third appears.
#[tokio::test]
async fn quorum_is_the_number_of_members_that_exist_when_no_key_says_it() -> Result<()> {
    let _t = Timer(
        "quorum_is_the_number_of_members_that_exist_when_no_key_says_it",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "count";
    let r = async {
        c.namespace(ns).await?;
        let trio = names("trio", 3);
        // No node yet: nothing can be scheduled while the members are created, so the gang is
        // all three before anything is decided.
        for n in &trio {
            c.create(
                PodBuilder::new(ns, n)
                    .cpu("100m")
                    .annotation(MUSTER_GROUP, "trio"),
            )
            .await?;
        }
        // muster's view (not read in a control run: nothing can be bound without a node).
        if muster_view_is_checked() {
            wait_for("muster to see the gang of 3", REASON, || async {
                Ok(match gang_view(&c, ns, "trio").await? {
                    Some(g) if g["quorum"] == 3 && member_states(&g).len() == 3 => {
                        Progress::Done(())
                    }
                    other => Progress::NotYet(format!("{other:?}")),
                })
            })
            .await?;
        }
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2
        let reason = "gang count/trio: 2 of 3 members fit";
        wait_gang_waiting(&c, ns, &trio, reason).await?;
        c.assert_none_bound_for(ns, &trio, WINDOW).await?;
        assert_waiting_without_seats(&c, ns, "trio", 3, reason).await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?; // room for the third
        let bound = c.wait_bound(ns, &trio, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "bound apart: {bound:?}");
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[ns], r).await
}

// --------------------------------------------------- the simulation honours node rules

/// How the node with spare room is ruled out for the gang's members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Restriction {
    /// Members have `nodeSelector: {pool: gang}`; the roomy node lacks the label
    /// (kube-scheduler's NodeAffinity plugin).
    NodeSelector,
    /// The roomy node has taint `dedicated=other:NoSchedule`; members do not tolerate it
    /// (TaintToleration plugin).
    Taint,
    /// The roomy node is cordoned, `spec.unschedulable: true` (NodeUnschedulable plugin).
    Cordon,
}

/// A gang of 3 × 100m whose members can use only `fits-2` (room for 2) while `roomy` (room for
/// 10) is ruled out by `restriction`: muster must wait whole with "2 of 3 members fit" and hold
/// no seat — kube-scheduler alone binds 2 on `fits-2`, and a simulation that ignored the rule
/// would admit the gang with a seat planned on `roomy`. A node the members may use then places
/// the gang whole, none of it on `roomy`.
async fn restricted_gang_waits_whole(restriction: Restriction, ns: &str) -> Result<()> {
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace(ns).await?;
        let nodes: Api<Node> = Api::all(c.client());
        c.add_node("roomy", NodeShape::cpu("1")).await?;
        match restriction {
            Restriction::NodeSelector => {}
            Restriction::Taint => {
                let taint = json!({"spec": {"taints": [
                    {"key": "dedicated", "value": "other", "effect": "NoSchedule"}
                ]}});
                nodes
                    .patch("roomy", &PatchParams::default(), &Patch::Merge(&taint))
                    .await?;
            }
            Restriction::Cordon => {
                nodes.cordon("roomy").await?;
            }
        }
        // Created after the restriction: muster's node watch is ordered, so once muster knows
        // `fits-2` (without which nothing can be decided) it has seen the taint or cordon.
        let usable = |shape: NodeShape| match restriction {
            Restriction::NodeSelector => shape.label("pool", "gang"),
            _ => shape,
        };
        c.add_node("fits-2", usable(NodeShape::cpu("250m"))).await?;
        let gang = names("g", 3);
        for n in &gang {
            let mut p = PodBuilder::new(ns, n)
                .cpu("100m")
                .gang(KeyScheme::Muster, "g", 3);
            if restriction == Restriction::NodeSelector {
                p = p.node_selector("pool", "gang");
            }
            c.create(p).await?;
        }
        // Two members fit on `fits-2`; the third has no node, and the reason names the rule
        // that rules out `roomy` as kube-scheduler's own plugin words it.
        let rule = match restriction {
            Restriction::NodeSelector => "didn't match Pod's node affinity/selector",
            Restriction::Taint => "had untolerated taint(s)",
            Restriction::Cordon => "were unschedulable",
        };
        let reason = format!(
            "gang {ns}/g: 2 of 3 members placed; no node for the next: 0/2 nodes are available: \
             1 node(s) didn't have enough room, 1 node(s) {rule}."
        );
        wait_gang_waiting(&c, ns, &gang, &reason).await?;
        c.assert_none_bound_for(ns, &gang, WINDOW).await?;
        assert_waiting_without_seats(&c, ns, "g", 3, &reason).await?;

        c.add_node("fits-1", usable(NodeShape::cpu("150m"))).await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "bound apart: {bound:?}");
        let on_roomy: Vec<&String> = bound
            .iter()
            .filter(|(_, (node, _))| node == "roomy")
            .map(|(p, _)| p)
            .collect();
        ensure_truth!(
            on_roomy.is_empty(),
            "{on_roomy:?} bound to roomy: {bound:?}"
        );

        if restriction == Restriction::Taint {
            // The rule is the taint, not "tainted nodes are out": a gang that tolerates it and
            // fits only on `roomy` (3 × 300m) is placed there at once.
            let tolerant = names("tolerant", 3);
            for n in &tolerant {
                let mut pod = PodBuilder::new(ns, n)
                    .cpu("300m")
                    .gang(KeyScheme::Muster, "tolerant", 3)
                    .build();
                pod.spec.as_mut().expect("built with a spec").tolerations =
                    Some(vec![Toleration {
                        key: Some("dedicated".into()),
                        operator: Some("Equal".into()),
                        value: Some("other".into()),
                        effect: Some("NoSchedule".into()),
                        ..Default::default()
                    }]);
                create_pod(&c, pod).await?;
            }
            let bound = c.wait_bound(ns, &tolerant, PLACE).await?;
            ensure_truth!(
                bound.values().all(|(node, _)| node == "roomy"),
                "tolerating gang not on roomy: {bound:?}"
            );
        }
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[ns], r).await
}

#[tokio::test]
async fn gang_simulation_honours_node_selectors_like_node_affinity() -> Result<()> {
    let _t = Timer(
        "gang_simulation_honours_node_selectors_like_node_affinity",
        Instant::now(),
    );
    restricted_gang_waits_whole(Restriction::NodeSelector, "selector").await
}

#[tokio::test]
async fn gang_simulation_honours_no_schedule_taints_like_taint_toleration() -> Result<()> {
    let _t = Timer(
        "gang_simulation_honours_no_schedule_taints_like_taint_toleration",
        Instant::now(),
    );
    restricted_gang_waits_whole(Restriction::Taint, "taint").await
}

#[tokio::test]
async fn gang_simulation_honours_cordons_like_node_unschedulable() -> Result<()> {
    let _t = Timer(
        "gang_simulation_honours_cordons_like_node_unschedulable",
        Instant::now(),
    );
    restricted_gang_waits_whole(Restriction::Cordon, "cordon").await
}

// ------------------------------------------------------------------------------ Events

/// README: members that disagree on the quorum → the largest wins and a `GangQuorumConflict`
/// Warning says so; a pod naming two groups, or with a quorum that is not a positive integer,
/// is never scheduled and gets an `InvalidGangKeys` Warning. There is room for everything, so
/// kube-scheduler alone would bind every pod here.
#[tokio::test]
async fn quorum_conflict_and_invalid_keys_are_published_as_events() -> Result<()> {
    let _t = Timer(
        "quorum_conflict_and_invalid_keys_are_published_as_events",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "keys";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("2")).await?;
        // Disagreeing members: quorum 2 and 3, two members exist, so the gang (quorum 3) waits
        // for a third member and binds nothing.
        let mixed = names("mixed", 2);
        for (n, min) in mixed.iter().zip([2, 3]) {
            c.create(PodBuilder::new(ns, n).gang(KeyScheme::Muster, "mixed", min))
                .await?;
        }
        // Cluster truth first: kube-scheduler alone binds both at once.
        c.assert_none_bound_for(ns, &mixed, WINDOW).await?;
        let (_, ev) = c
            .wait_event_matching(ns, &mixed, "GangQuorumConflict", REASON, |e| {
                e.reason == "GangQuorumConflict"
            })
            .await?;
        ensure!(
            ev.type_ == "Warning"
                && ev.message
                    == "members of gang keys/mixed disagree on minAvailable (2, 3); using the largest, 3",
            "unexpected conflict Event: {ev}"
        );
        eprintln!("{ev}");
        let g = gang_view(&c, ns, "mixed")
            .await?
            .context("gang keys/mixed not in /gangs")?;
        ensure!(g["quorum"] == 3, "quorum is not the largest: {g}");

        let two_groups = PodBuilder::new(ns, "two-groups")
            .annotation(MUSTER_GROUP, "a")
            .annotation("scheduling.k8s.io/group-name", "b");
        let bad_quorum = PodBuilder::new(ns, "bad-quorum")
            .annotation(MUSTER_GROUP, "c")
            .annotation(MUSTER_MIN_AVAILABLE, "two");
        c.create(two_groups).await?;
        c.create(bad_quorum).await?;
        let invalid = pod_names(&["two-groups", "bad-quorum"]);
        c.assert_none_bound_for(ns, &invalid, WINDOW).await?;
        let expected = [
            (
                "two-groups",
                "conflicting gang keys: muster.dev/group=\"a\" but scheduling.k8s.io/group-name=\"b\"; give the pod one group name",
            ),
            (
                "bad-quorum",
                "muster.dev/min-available must be a positive integer, got \"two\"",
            ),
        ];
        for (pod, error) in expected {
            let (_, ev) = c
                .wait_event_matching(ns, &[pod.to_string()], "InvalidGangKeys", REASON, |e| {
                    e.reason == "InvalidGangKeys"
                })
                .await?;
            ensure!(
                ev.type_ == "Warning" && ev.message.starts_with(error),
                "unexpected InvalidGangKeys Event on {pod}: {ev}"
            );
            eprintln!("{pod}: {ev}");
            if c.gathers() {
                // The shipped mode: the pod waits behind muster's gate (kube-scheduler's
                // condition says only SchedulingGated; the Event above says why).
                let p = c
                    .pods(ns)
                    .await?
                    .into_iter()
                    .find(|p| k8s::pod_name(p) == pod)
                    .with_context(|| format!("{pod} is gone"))?;
                ensure!(
                    muster_harness::policy::is_gated(&p),
                    "{pod}, with invalid gang keys, is not behind muster's gate"
                );
                continue;
            }
            // Every pod through muster: kube-scheduler shows the same reason in the pod's
            // condition (muster's filter refused every node with it).
            let error = error.to_string();
            wait_for(
                &format!("{pod}'s PodScheduled condition to name the bad keys"),
                REASON,
                || {
                    let error = error.clone();
                    let c = &c;
                    async move {
                        let pods = c.pods(ns).await?;
                        let cond = pods
                            .iter()
                            .find(|p| k8s::pod_name(p) == pod)
                            .and_then(k8s::scheduled_condition)
                            .unwrap_or_default();
                        Ok(if cond.contains(&error) {
                            Progress::Done(())
                        } else {
                            Progress::NotYet(cond)
                        })
                    }
                },
            )
            .await?;
        }
        let everyone: Vec<String> = mixed
            .iter()
            .cloned()
            .chain(["two-groups".to_string(), "bad-quorum".to_string()])
            .collect();
        c.assert_none_bound_for(ns, &everyone, WINDOW).await
    }
    .await;
    c.report(&[ns], r).await
}

/// README: `GangBindFailed` (Warning) when muster cannot create a binding, and
/// `muster_bind_failures_total` counts it. A ValidatingAdmissionPolicy makes the real API
/// server refuse every binding of a pod whose name starts with `doomed`: one member of a gang
/// of 2 can then never be bound, whoever binds it. The other member is bound (the API server
/// refused the binding for good, which never-half allows when an Event says so).
#[tokio::test]
async fn a_binding_the_api_server_refuses_is_published_as_gang_bind_failed() -> Result<()> {
    let _t = Timer(
        "a_binding_the_api_server_refuses_is_published_as_gang_bind_failed",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "bindfail";
    let r = async {
        c.namespace(ns).await?;
        c.namespace("probe").await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?;
        refuse_bindings_of_doomed_pods(&c).await?;
        let before = metric(&scrape(&c).await?, "muster_bind_failures_total")?;
        ensure!(before == 0.0, "bind failures before the test: {before}");

        let pair = vec!["pair-0".to_string(), "doomed-pair-1".to_string()];
        for n in &pair {
            c.create(PodBuilder::new(ns, n).gang(KeyScheme::Muster, "pair", 2))
                .await?;
        }
        let (_, ev) = c
            .wait_event_matching(ns, &pair[1..], "GangBindFailed", REASON, |e| {
                e.reason == "GangBindFailed"
            })
            .await?;
        ensure!(
            ev.type_ == "Warning"
                && ev.message.starts_with(
                    "gang bindfail/pair: binding member bindfail/doomed-pair-1 to node node-1 \
                     failed for good: "
                )
                && ev
                    .message
                    .contains("test policy: bindings of doomed pods are refused"),
            "unexpected GangBindFailed Event: {ev}"
        );
        eprintln!("on doomed-pair-1: {ev}");
        let m = scrape(&c).await?;
        let failures = metric(&m, "muster_bind_failures_total")?;
        ensure!(failures >= 1.0, "muster_bind_failures_total = {failures}");
        eprintln!("muster_bind_failures_total = {failures}");
        c.wait_bound(ns, &pair[..1], PLACE).await?;
        ensure!(
            c.count_bound(ns, &pair[1..]).await? == 0,
            "a refused binding went through"
        );
        Ok(())
    }
    .await;
    c.report(&[ns, "probe"], r).await
}

/// Installs the policy and waits until the API server enforces it (policies load
/// asynchronously): a probe pod no scheduler serves is bound by hand until the binding is
/// refused with the policy's message.
async fn refuse_bindings_of_doomed_pods(c: &Cluster) -> Result<()> {
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": "refuse-doomed-bindings"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods/binding"]
            }]},
            "validations": [{
                "expression": "!object.metadata.name.startsWith('doomed')",
                "message": "test policy: bindings of doomed pods are refused"
            }]
        }
    }))?;
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": "refuse-doomed-bindings"},
        "spec": {"policyName": "refuse-doomed-bindings", "validationActions": ["Deny"]}
    }))?;
    let pp = PostParams::default();
    Api::<ValidatingAdmissionPolicy>::all(c.client())
        .create(&pp, &policy)
        .await?;
    Api::<ValidatingAdmissionPolicyBinding>::all(c.client())
        .create(&pp, &binding)
        .await?;
    let client = c.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "probe");
    let mut attempt = 0u32;
    wait_for("the binding policy to be enforced", REASON, || {
        attempt += 1;
        let name = format!("doomed-probe-{attempt}");
        let (pods, client) = (pods.clone(), client.clone());
        async move {
            let probe = PodBuilder::new("probe", &name)
                .scheduler_name("nobody")
                .build();
            pods.create(&PostParams::default(), &probe).await?;
            let body = json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "nowhere"}
            });
            let result: Result<Value, kube::Error> = pods
                .create_subresource("binding", &name, &PostParams::default(), &body)
                .await;
            k8s::delete_pod(&client, "probe", &name).await?;
            Ok(match result {
                Err(kube::Error::Api(e)) if e.message.contains("test policy") => Progress::Done(()),
                Err(e) => bail!("binding the probe failed otherwise: {e}"),
                Ok(_) => Progress::NotYet("a probe binding was accepted".into()),
            })
        }
    })
    .await
}

// ------------------------------------------------------------------------------ metrics

/// README's metrics table, scraped from `/metrics` while a real run goes through every gang
/// state: the cache gauges follow the nodes and pods the test made; `muster_gangs{state}` and
/// `muster_seats_reserved` follow a waiting gang, an admitted gang holding a seat for a member
/// not created yet, its placement, and a gang whose 2 s timeout puts it in backoff; the
/// counters match what happened and nothing failed or was dropped.
///
/// With every pod through muster: the states of a gang seated by kube-scheduler's own calls,
/// including a seat held for a member not created yet, which the shipped mode never holds (its
/// gauges are checked in `gang_members`).
#[tokio::test]
async fn metrics_follow_a_real_run_through_every_gang_state() -> Result<()> {
    let _t = Timer(
        "metrics_follow_a_real_run_through_every_gang_state",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let ns = "metrics";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("250m")).await?;
        c.add_node("node-2", NodeShape::cpu("250m")).await?;
        let gangs = |w: f64, a: f64, p: f64, b: f64, seats: f64| {
            [
                ("muster_gangs{state=\"waiting\"}", w),
                ("muster_gangs{state=\"admitted\"}", a),
                ("muster_gangs{state=\"placed\"}", p),
                ("muster_gangs{state=\"backoff\"}", b),
                ("muster_seats_reserved", seats),
            ]
        };
        let with = |base: [(&'static str, f64); 5], more: &[(&'static str, f64)]| {
            base.iter().chain(more).copied().collect::<Vec<_>>()
        };
        wait_metrics(
            &c,
            "the caches to hold the 2 nodes and no pod",
            &with(
                gangs(0.0, 0.0, 0.0, 0.0, 0.0),
                &[("muster_cache_nodes", 2.0), ("muster_cache_pods", 0.0)],
            ),
        )
        .await?;
        let age = metric(&scrape(&c).await?, "muster_cache_last_event_age_seconds")?;
        ensure!(
            (0.0..30.0).contains(&age),
            "muster_cache_last_event_age_seconds = {age} after watch events"
        );

        // waiting: 3 × 200m fit one per node, 2 of 3.
        let big = c
            .create_gang(ns, "big", 3, 3, KeyScheme::Muster, |p| p.cpu("200m"))
            .await?;
        wait_gang_waiting(&c, ns, &big, "gang metrics/big: 2 of 3 members fit").await?;
        wait_metrics(
            &c,
            "one waiting gang, no seats, 3 pods",
            &with(
                gangs(1.0, 0.0, 0.0, 0.0, 0.0),
                &[("muster_cache_pods", 3.0)],
            ),
        )
        .await?;

        // admitted: the first of 2 members is seated and a seat is held for the second.
        let member = |name: &str, group: &str| {
            PodBuilder::new(ns, name)
                .cpu("50m")
                .gang(KeyScheme::Muster, group, 2)
        };
        c.create(member("early-0", "early")).await?;
        wait_metrics(
            &c,
            "gang early admitted with 2 seats",
            &with(
                gangs(1.0, 1.0, 0.0, 0.0, 2.0),
                &[("muster_cache_pods", 4.0)],
            ),
        )
        .await?;

        // placed: the second member arrives; both are bound, no seat is left.
        c.create(member("early-1", "early")).await?;
        c.wait_bound(ns, &names("early", 2), PLACE).await?;
        wait_metrics(
            &c,
            "gang early placed, no seats",
            &with(
                gangs(1.0, 0.0, 1.0, 0.0, 0.0),
                &[
                    ("muster_cache_pods", 5.0),
                    ("muster_gangs_placed_total", 1.0),
                ],
            ),
        )
        .await?;

        // backoff: a gang whose second member never comes, with a 2 s quorum timeout.
        c.create(member("lonely-0", "lonely").annotation(k8s::MUSTER_GANG_TIMEOUT, "2s"))
            .await?;
        wait_metrics(
            &c,
            "gang lonely timed out and backing off, its seats released",
            &with(
                gangs(1.0, 0.0, 1.0, 1.0, 0.0),
                &[
                    ("muster_gang_timeouts_total", 1.0),
                    ("muster_cache_pods", 6.0),
                ],
            ),
        )
        .await?;

        // A deleted pod leaves the cache.
        c.delete_pod(ns, "big-0").await?;
        wait_metrics(&c, "5 pods in the cache", &[("muster_cache_pods", 5.0)]).await?;

        let m = scrape(&c).await?;
        let waits = metric(&m, "muster_quorum_waits_total")?;
        ensure!(
            waits >= 2.0,
            "early-0 and lonely-0 waited, muster_quorum_waits_total = {waits}"
        );
        let binds = metric(&m, "muster_requests_total{verb=\"bind\",outcome=\"ok\"}")?;
        ensure!(binds >= 2.0, "2 bind calls succeeded, counted {binds}");
        let filters = metric(&m, "muster_requests_total{verb=\"filter\",outcome=\"ok\"}")?;
        ensure!(filters >= 4.0, "filter requests counted {filters}");
        for zero in ["muster_bind_failures_total", "muster_events_dropped_total"] {
            ensure!(metric(&m, zero)? == 0.0, "{zero} = {}", m[zero]);
        }
        let watch_errors: Vec<(&String, &f64)> = m
            .iter()
            .filter(|(k, v)| k.starts_with("muster_watch_errors_total") && **v != 0.0)
            .collect();
        ensure!(watch_errors.is_empty(), "watch errors: {watch_errors:?}");
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Starts a cluster with one node of 150m, kills kube-apiserver (a crash) and waits until
/// both watches counted errors in `muster_watch_errors_total{kind}` and the cache's last event
/// aged past 1 s (no event can arrive meanwhile); then starts kube-apiserver again.
async fn api_server_outage(c: &mut Cluster, ns: &str) -> Result<()> {
    c.namespace(ns).await?;
    c.add_node("node-1", NodeShape::cpu("150m")).await?;
    wait_metrics(c, "node-1 in the cache", &[("muster_cache_nodes", 1.0)]).await?;
    let m = scrape(c).await?;
    ensure!(
        !m.keys().any(|k| k.starts_with("muster_watch_errors_total")),
        "watch errors before the outage: {m:?}"
    );
    let stopped = c.cp.kill_apiserver()?;
    let outage = Instant::now();
    wait_for("both watches to count errors", REASON, || async {
        let m = scrape(c).await?;
        let pods = m.get("muster_watch_errors_total{kind=\"pods\"}");
        let nodes = m.get("muster_watch_errors_total{kind=\"nodes\"}");
        Ok(match (pods, nodes) {
            (Some(p), Some(n)) if *p >= 1.0 && *n >= 1.0 => Progress::Done(()),
            _ => Progress::NotYet(format!("pods {pods:?}, nodes {nodes:?}")),
        })
    })
    .await?;
    wait_for("the cache's last event to age past 1s", REASON, || async {
        let age = metric(&scrape(c).await?, "muster_cache_last_event_age_seconds")?;
        Ok(if age >= 1.0 {
            Progress::Done(())
        } else {
            Progress::NotYet(format!("age {age}"))
        })
    })
    .await?;
    eprintln!(
        "watch errors counted within {:.1}s of the API server going down",
        outage.elapsed().as_secs_f64()
    );
    c.cp.start_apiserver_again(stopped).await
}

/// `muster_watch_errors_total{kind}`: kube-apiserver is killed and both watches count errors
/// while it is down.
#[tokio::test]
async fn watch_errors_are_counted_while_the_api_server_is_down() -> Result<()> {
    let _t = Timer(
        "watch_errors_are_counted_while_the_api_server_is_down",
        Instant::now(),
    );
    // Kills kube-apiserver: its own, not the slot's shared one.
    let mut c = Cluster::start_with(ClusterOptions::new(MUSTER).own_control_plane()).await?;
    let ns = "outage";
    let r = api_server_outage(&mut c, ns).await;
    c.report(&[ns], r).await
}

/// "pod/node watch errors (retried with backoff)": after kube-apiserver comes back, the
/// watches resume, so a node and a gang created afterwards are seen and the gang is placed.
/// While the node watch is still in back-off, kube-scheduler may already offer node-2: muster
/// refuses it as not in its cache yet and, once its watch delivers node-2, asks kube-scheduler
/// to retry the members (`muster.dev/retry`), which would otherwise stay parked until an
/// unrelated cluster event or kube-scheduler's 5-minute flush.
#[tokio::test]
async fn watches_recover_after_the_api_server_restarts() -> Result<()> {
    let _t = Timer(
        "watches_recover_after_the_api_server_restarts",
        Instant::now(),
    );
    // Kills kube-apiserver: its own, not the slot's shared one.
    let mut c = Cluster::start_with(ClusterOptions::new(MUSTER).own_control_plane()).await?;
    let ns = "outage";
    let r = async {
        api_server_outage(&mut c, ns).await?;
        let gang = c
            .create_gang(ns, "after", 2, 2, KeyScheme::Muster, |p| p.cpu("100m"))
            .await?;
        // The watches resume after their back-off (up to tens of seconds): PLACE, not REASON.
        // Cluster truth first on every poll: no member bound (kube-scheduler alone binds one).
        c.wait_gang_waiting_event(ns, &gang, "gang outage/after: 1 of 2 members fit", PLACE)
            .await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        wait_metrics(
            &c,
            "the cache to hold both nodes",
            &[("muster_cache_nodes", 2.0)],
        )
        .await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "bound apart: {bound:?}");
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

// ----------------------------------------------------------------- priority between gangs

/// README: "Competing gangs are served by priority, then age." A low-priority gang, then a
/// high-priority one, both wait for room for one of them; when it appears, the high-priority
/// gang is placed whole and the older low-priority gang binds nothing. Served by age, the low
/// gang would win (creation times are in seconds and ties go by name, so the names put the
/// low gang first too); kube-scheduler alone would bind two low members before any room appears.
#[tokio::test]
async fn a_higher_priority_gang_created_later_is_placed_first() -> Result<()> {
    let _t = Timer(
        "a_higher_priority_gang_created_later_is_placed_first",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "prio";
    let r = async {
        c.namespace(ns).await?;
        let classes: Api<PriorityClass> = Api::all(c.client());
        for (name, value) in [("gang-low", 100), ("gang-high", 1000)] {
            let pc: PriorityClass = serde_json::from_value(json!({
                "metadata": {"name": name}, "value": value
            }))?;
            classes.create(&PostParams::default(), &pc).await?;
        }
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2
        let gang = |group: &'static str, class: &'static str| {
            c.create_gang(ns, group, 3, 3, KeyScheme::Muster, move |p| {
                p.cpu("100m").priority_class(class)
            })
        };
        let low = gang("early-low", "gang-low").await?;
        wait_gang_waiting(&c, ns, &low, "gang prio/early-low: 2 of 3 members fit").await?;
        let high = gang("late-high", "gang-high").await?;
        wait_gang_waiting(&c, ns, &high, "gang prio/late-high: 2 of 3 members fit").await?;
        let everyone: Vec<String> = low.iter().chain(&high).cloned().collect();
        c.assert_none_bound_for(ns, &everyone, WINDOW).await?;

        // Room for 4: one gang of 3, not both.
        c.add_node("node-2", NodeShape::cpu("250m")).await?;
        let bound = c.wait_bound(ns, &high, PLACE).await?;
        ensure_truth!(
            spread(&bound) <= TOGETHER,
            "high gang bound apart: {bound:?}"
        );
        wait_gang_waiting(&c, ns, &low, "gang prio/early-low: 1 of 3 members fit").await?;
        c.assert_none_bound_for(ns, &low, WINDOW).await?;
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[ns], r).await
}

// --------------------------------------------------------------------------------- RBAC

/// muster runs with exactly the shipped RBAC: its kubeconfig authenticates as ServiceAccount
/// `muster-system/muster` (not an admin), which may not read Secrets or create pods, and with
/// it muster places a gang and publishes its Events.
#[tokio::test]
async fn muster_places_a_gang_as_its_service_account_with_the_shipped_rbac() -> Result<()> {
    let _t = Timer(
        "muster_places_a_gang_as_its_service_account_with_the_shipped_rbac",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "rbac";
    let r = async {
        c.namespace(ns).await?;
        let as_muster = client_from_kubeconfig(c.muster.kubeconfig_path()).await?;
        let review: SelfSubjectReview = Api::all(as_muster.clone())
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .context("SelfSubjectReview with muster's kubeconfig")?;
        let user = review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .unwrap_or_default();
        ensure!(user == rbac::USER, "muster authenticates as {user:?}");
        let forbidden = |r: Result<(), kube::Error>, what: &str| match r {
            Err(kube::Error::Api(e)) if e.code == 403 => Ok(()),
            other => Err(anyhow::anyhow!("{what} was not forbidden: {other:?}")),
        };
        forbidden(
            Api::<Secret>::all(as_muster.clone())
                .list(&ListParams::default())
                .await
                .map(drop),
            "listing secrets",
        )?;
        forbidden(
            Api::<Pod>::namespaced(as_muster.clone(), ns)
                .create(&PostParams::default(), &PodBuilder::new(ns, "x").build())
                .await
                .map(drop),
            "creating a pod",
        )?;

        c.add_node("node-1", NodeShape::cpu("150m")).await?; // room for 1 of 2
        let pair = c
            .create_gang(ns, "pair", 2, 2, KeyScheme::Muster, |p| p.cpu("100m"))
            .await?;
        wait_gang_waiting(&c, ns, &pair, "gang rbac/pair: 1 of 2 members fit").await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        c.wait_bound(ns, &pair, PLACE).await?;
        c.wait_event_matching(ns, &pair, "GangPlaced", REASON, |e| {
            e.reason == "GangPlaced"
        })
        .await?;
        let log = std::fs::read_to_string(c.muster.log_path())?;
        let denied: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
            .collect();
        ensure!(
            denied.is_empty(),
            "muster was refused something: {denied:?}"
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

// --------------------------------------------------------------------------------- demo

/// README: the demo "ends with `PASS: …` or `FAIL: …` and a matching exit code".
/// Runs the `muster-local demo` that `tests/cluster/local-cluster demo` executes, with this
/// build's muster.
#[tokio::test]
async fn the_demo_prints_pass_and_exits_zero() -> Result<()> {
    let _t = Timer("the_demo_prints_pass_and_exits_zero", Instant::now());
    let local = muster_local()?;
    let out = tokio::process::Command::new(&local)
        .arg("demo")
        .env("MUSTER_BIN", MUSTER)
        // The demo as users run it: its own etcd + kube-apiserver, not the test slot's shared pair.
        .env_remove(muster_harness::shared::SHARED_ENV)
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running {} demo", local.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    ensure!(
        out.status.success() && last.starts_with("PASS: ") && !stdout.contains("FAIL: "),
        "demo exited with {} and last line {last:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The shipped mode, as the README describes the demo: the seed's two Jobs' pods wait behind
    // muster's gate with muster's reason, muster removes the gates once the gang fits, and both
    // pods run.
    for shown in [
        "created job ml/ai-gang-job-master",
        "created job ml/ai-gang-job-worker",
        "SchedulingGated (muster.dev/gather)",
        "gang ml/ai-gang-job: 1 of 2 members fit",
        "both pods Running",
    ] {
        ensure!(
            stdout.contains(shown),
            "the demo did not show {shown:?}:\n{stdout}"
        );
    }
    for task in ["master", "worker"] {
        ensure!(
            stdout
                .lines()
                .any(|l| l.contains(&format!("ai-gang-job-{task}-0-"))
                    && l.contains("muster removed its gate muster.dev/gather")),
            "the demo did not show the {task}'s gate removed:\n{stdout}"
        );
    }
    Ok(())
}

/// The `muster-local` binary next to `muster`. It belongs to the harness package, so cargo
/// does not build it for this test; `tests/run` builds it (`cargo test --workspace --no-run`).
/// Building it from here would resolve the harness's dependencies with other features and
/// rebuild them (minutes), so this refuses a missing binary, or one older than a harness
/// source, rather than run a stale demo.
fn muster_local() -> Result<std::path::PathBuf> {
    let dir = std::path::Path::new(MUSTER)
        .parent()
        .context("muster binary has no directory")?;
    let path = dir.join("muster-local");
    let build = "build it with `cargo build -p muster-harness --bin muster-local` (tests/run does)";
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .with_context(|| format!("{} is missing: {build}", path.display()))?;
    let sources = muster_harness::paths::repo_root().join("tests/harness/src");
    let mut stack = vec![sources];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let p = entry?.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::metadata(&p)?.modified()? > built {
                bail!("{} is older than {}: {build}", path.display(), p.display());
            }
        }
    }
    Ok(path)
}
