//! muster's `/gangs` view, read over its own HTTP endpoint, and the waits e2e tests build on it.
//!
//! "A gang waits whole" is what muster itself says about the gang (`waiting`, no seats, the exact
//! reason, in `/gangs` and in a `GangWaiting` Event) *and* what the cluster shows (none of its
//! members bound), on every poll. Stock kube-scheduler alone gets each of these wrong: it binds
//! the members that fit, and muster, never consulted, has no reason to give.
//!
//! The "none bound" part is cluster truth (its errors start with
//! [`CLUSTER_TRUTH`](crate::truth::CLUSTER_TRUTH)) and is checked first on every poll. In a
//! control run muster's view is never read: these waits observe only the cluster-truth part, for
//! at most [`CONTROL_TRUTH_WINDOW`], so a test fails there on what the cluster shows, fast.

use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context, Result};
use serde_json::Value;

use crate::cluster::Cluster;
use crate::k8s;
use crate::muster::Muster;
use crate::truth::{muster_view_is_checked, truth, CLUSTER_TRUTH, CONTROL_TRUTH_WINDOW};
use crate::wait::{holds_for, wait_for, Progress};

/// One gang as `/gangs` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangView {
    pub namespace: String,
    pub name: String,
    /// `waiting` (no seats), `admitted` (holding seats below quorum), `placed` or `backoff`.
    pub state: String,
    pub quorum: u64,
    pub members_with_nodes: u64,
    pub members: Vec<MemberView>,
    pub waiting_reason: Option<String>,
    pub seconds_until_timeout: Option<u64>,
    pub seconds_of_backoff_left: Option<u64>,
}

/// One entry of a gang's `members`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    /// The pod's name, or `(not created yet)` for room held for a member that does not exist.
    pub name: String,
    /// `pending`, `planned`, `seated`, `binding`, `bound`, or `held` (room for a member not
    /// created yet).
    pub state: String,
    pub node: Option<String>,
}

/// Member states that hold room on a node for a gang below quorum.
pub const SEAT_STATES: [&str; 3] = ["seated", "planned", "held"];

fn string(v: &Value, field: &str) -> Result<String> {
    v[field]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("`{field}` is not a string in {v}"))
}

fn optional_u64(v: &Value, field: &str) -> Result<Option<u64>> {
    match &v[field] {
        Value::Null => Ok(None),
        n => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| anyhow!("`{field}` is not a count in {v}")),
    }
}

impl GangView {
    /// Parses one element of `/gangs`' `gangs` array; a missing or mistyped field is an error
    /// (a changed `/gangs` must break these tests loudly, not make a check vacuous).
    pub fn from_json(v: &Value) -> Result<Self> {
        let members = v["members"]
            .as_array()
            .ok_or_else(|| anyhow!("`members` is not an array in {v}"))?
            .iter()
            .map(|m| {
                Ok(MemberView {
                    name: string(m, "name")?,
                    state: string(m, "state")?,
                    node: m["node"].as_str().map(str::to_string),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            namespace: string(v, "namespace")?,
            name: string(v, "name")?,
            state: string(v, "state")?,
            quorum: v["quorum"]
                .as_u64()
                .ok_or_else(|| anyhow!("`quorum` is not a count in {v}"))?,
            members_with_nodes: v["members_with_nodes"]
                .as_u64()
                .ok_or_else(|| anyhow!("`members_with_nodes` is not a count in {v}"))?,
            members,
            waiting_reason: v["waiting_reason"].as_str().map(str::to_string),
            seconds_until_timeout: optional_u64(v, "seconds_until_timeout")?,
            seconds_of_backoff_left: optional_u64(v, "seconds_of_backoff_left")?,
        })
    }

    /// Entries holding room for the gang below quorum (`seated`, `planned`, `held`).
    pub fn seats(&self) -> Vec<&MemberView> {
        self.members
            .iter()
            .filter(|m| SEAT_STATES.contains(&m.state.as_str()))
            .collect()
    }

    /// How many entries are in `state`.
    pub fn count(&self, state: &str) -> usize {
        self.members.iter().filter(|m| m.state == state).count()
    }

    /// The state of member `name`.
    pub fn state_of(&self, name: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.state.as_str())
    }

    /// One line for failure messages.
    pub fn describe(&self) -> String {
        let members: Vec<String> = self
            .members
            .iter()
            .map(|m| match &m.node {
                Some(n) => format!("{}={}@{n}", m.name, m.state),
                None => format!("{}={}", m.name, m.state),
            })
            .collect();
        format!(
            "gang {}/{} {} (quorum {}, {} with nodes) [{}] reason {:?}, timeout in {:?}s, backoff {:?}s",
            self.namespace,
            self.name,
            self.state,
            self.quorum,
            self.members_with_nodes,
            members.join(", "),
            self.waiting_reason,
            self.seconds_until_timeout,
            self.seconds_of_backoff_left
        )
    }

    /// `Ok` if the gang is `waiting`, no entry holds a seat or a node, and muster's reason is
    /// exactly `reason`.
    pub fn check_waiting_whole(&self, reason: &str) -> std::result::Result<(), String> {
        let placed_or_seated: Vec<&MemberView> = self
            .members
            .iter()
            .filter(|m| m.state != "pending" || m.node.is_some())
            .collect();
        if self.state != "waiting"
            || !placed_or_seated.is_empty()
            || self.waiting_reason.as_deref() != Some(reason)
        {
            return Err(format!(
                "expected waiting, no seats, reason {reason:?}; muster's /gangs: {}",
                self.describe()
            ));
        }
        Ok(())
    }
}

impl Muster {
    /// Every gang, from `GET /gangs`.
    pub async fn gangs(&self) -> Result<Vec<GangView>> {
        let (code, body) = self.get("/gangs").await?;
        ensure!(code == 200, "GET /gangs: HTTP {code}: {}", body.trim());
        let v: Value = serde_json::from_str(&body).context("GET /gangs: not JSON")?;
        v["gangs"]
            .as_array()
            .ok_or_else(|| anyhow!("GET /gangs: no `gangs` array in {body}"))?
            .iter()
            .map(GangView::from_json)
            .collect()
    }

    /// Gang `ns/name` from `GET /gangs`, if muster knows it.
    pub async fn gang(&self, ns: &str, name: &str) -> Result<Option<GangView>> {
        Ok(self
            .gangs()
            .await?
            .into_iter()
            .find(|g| g.namespace == ns && g.name == name))
    }
}

impl Cluster {
    /// `Err(description)` if one of `names` in `ns` is bound; the description starts with
    /// [`CLUSTER_TRUTH`].
    async fn none_bound(
        &self,
        ns: &str,
        names: &[String],
    ) -> Result<std::result::Result<(), String>> {
        let bound = self.bound_pods(ns).await?;
        let b: Vec<String> = names
            .iter()
            .filter_map(|n| bound.get(n).map(|node| format!("{n} → {node}")))
            .collect();
        Ok(if b.is_empty() {
            Ok(())
        } else {
            Err(format!("{CLUSTER_TRUTH} bound: {}", b.join(", ")))
        })
    }

    /// A control run's stand-in for a wait on muster's view: none of `members` gets bound for
    /// [`CONTROL_TRUTH_WINDOW`] (or `timeout`, if shorter).
    async fn control_run_truth_window(
        &self,
        ns: &str,
        members: &[String],
        what: &str,
        timeout: Duration,
    ) -> Result<()> {
        holds_for(
            &format!("{what} (control run: only the cluster truth, none of {members:?} bound)"),
            timeout.min(CONTROL_TRUTH_WINDOW),
            || async { self.none_bound(ns, members).await },
        )
        .await
    }

    /// Polls `/gangs` until `pred` holds for gang `ns/group` (described by `what`); returns that
    /// view. Fails at once if one of `unbound` gets bound: what this waits for must happen before
    /// any of them is bound. In a control run: fails once none of `unbound` was seen bound for
    /// [`CONTROL_TRUTH_WINDOW`] (the view it returns is muster's), or at once on a bound one.
    pub async fn wait_gang(
        &self,
        ns: &str,
        group: &str,
        unbound: &[String],
        what: &str,
        timeout: Duration,
        pred: impl Fn(&GangView) -> bool,
    ) -> Result<GangView> {
        let pred = &pred;
        if !muster_view_is_checked() {
            let what = format!("gang {ns}/{group}: {what}");
            self.control_run_truth_window(ns, unbound, &what, timeout)
                .await?;
            bail!(
                "control run: {what} is muster's view, not read here; the cluster truth before it \
                 (none of {unbound:?} bound) held"
            );
        }
        wait_for(
            &format!("gang {ns}/{group}: {what}"),
            timeout,
            || async move {
                if let Err(b) = self.none_bound(ns, unbound).await? {
                    return Err(truth(format!(
                        "while waiting for gang {ns}/{group} ({what}): {b}"
                    )));
                }
                Ok(match self.muster.gang(ns, group).await? {
                    Some(g) if pred(&g) => Progress::Done(g),
                    Some(g) => Progress::NotYet(format!("muster's /gangs: {}", g.describe())),
                    None => Progress::NotYet("muster's /gangs does not list it".into()),
                })
            },
        )
        .await
    }

    /// Waits until gang `ns/group` waits whole for exactly `reason`: muster's `/gangs` says
    /// `waiting` with no seats and that reason, and a `GangWaiting` Event on one of `members` has
    /// that message. Fails at once if a member is bound. In a control run: none of `members` is
    /// bound for [`CONTROL_TRUTH_WINDOW`].
    pub async fn wait_gang_waiting_whole(
        &self,
        ns: &str,
        group: &str,
        members: &[String],
        reason: &str,
        timeout: Duration,
    ) -> Result<()> {
        let what = format!("gang {ns}/{group} to wait whole with reason {reason:?}");
        if !muster_view_is_checked() {
            return self
                .control_run_truth_window(ns, members, &what, timeout)
                .await;
        }
        wait_for(&what, timeout, || async {
            if let Err(b) = self.none_bound(ns, members).await? {
                return Err(truth(format!(
                    "gang {ns}/{group} should wait whole ({reason:?}), but {b}"
                )));
            }
            let view = self.muster.gang(ns, group).await?;
            let gangs = match &view {
                Some(g) => g.check_waiting_whole(reason),
                None => Err("muster's /gangs does not list it".into()),
            };
            let events = k8s::events_in(&self.client(), ns).await?;
            let event = events.iter().any(|(pod, e)| {
                members.contains(pod) && e.reason == "GangWaiting" && e.message == reason
            });
            Ok(match (gangs, event) {
                (Ok(()), true) => Progress::Done(()),
                (Ok(()), false) => {
                    let seen: Vec<String> = events
                        .iter()
                        .filter(|(pod, _)| members.contains(pod))
                        .map(|(pod, e)| format!("{pod}: {e}"))
                        .collect();
                    Progress::NotYet(format!(
                        "no GangWaiting Event with that message; events: {}",
                        seen.join(" | ")
                    ))
                }
                (Err(e), _) => Progress::NotYet(e),
            })
        })
        .await
    }

    /// Waits until muster's `GangWaiting` Event on one of `members` is exactly `message`; no
    /// member may be bound meanwhile (cluster truth, checked first on every poll). In a control
    /// run: none of `members` is bound for [`CONTROL_TRUTH_WINDOW`].
    pub async fn wait_gang_waiting_event(
        &self,
        ns: &str,
        members: &[String],
        message: &str,
        timeout: Duration,
    ) -> Result<()> {
        let what = format!("muster's GangWaiting Event {message:?} on one of {members:?}");
        if !muster_view_is_checked() {
            return self
                .control_run_truth_window(ns, members, &what, timeout)
                .await;
        }
        wait_for(&what, timeout, || async {
            if let Err(b) = self.none_bound(ns, members).await? {
                return Err(truth(format!("while waiting for {what}: {b}")));
            }
            let events = k8s::events_in(&self.client(), ns).await?;
            let mut seen = Vec::new();
            for (pod, e) in &events {
                if !members.contains(pod) {
                    continue;
                }
                if e.reason == "GangWaiting" && e.message == message {
                    return Ok(Progress::Done(()));
                }
                seen.push(format!("{pod}: {e}"));
            }
            Ok(Progress::NotYet(if seen.is_empty() {
                "no events".into()
            } else {
                seen.join(" | ")
            }))
        })
        .await
    }

    /// On every poll for `window`: no member of `members` is bound and muster's `/gangs` still
    /// says gang `ns/group` is `waiting` with no seats for exactly `reason` (in a control run: only
    /// that none is bound).
    pub async fn assert_gang_waits_whole_for(
        &self,
        ns: &str,
        group: &str,
        members: &[String],
        reason: &str,
        window: Duration,
    ) -> Result<()> {
        let check_view = muster_view_is_checked();
        holds_for(
            &format!("gang {ns}/{group} to wait whole ({reason:?})"),
            window,
            || async {
                if let Err(b) = self.none_bound(ns, members).await? {
                    return Ok(Err(b));
                }
                if !check_view {
                    return Ok(Ok(()));
                }
                Ok(match self.muster.gang(ns, group).await? {
                    Some(g) => g.check_waiting_whole(reason),
                    None => Err("muster's /gangs does not list it".into()),
                })
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_readme_example_and_checks_waiting_whole() {
        let v = json!({"namespace":"ml","name":"ai-gang-job","state":"waiting","quorum":2,
            "members_with_nodes":0,
            "members":[{"name":"ai-gang-job-master-0","state":"pending","node":null},
                       {"name":"ai-gang-job-worker-0","state":"pending","node":null}],
            "waiting_reason":"gang ml/ai-gang-job: 1 of 2 members fit",
            "seconds_until_timeout":null,"seconds_of_backoff_left":null});
        let g = GangView::from_json(&v).unwrap();
        assert_eq!(g.quorum, 2);
        assert!(g.seats().is_empty());
        g.check_waiting_whole("gang ml/ai-gang-job: 1 of 2 members fit")
            .unwrap();
        // Any other reason, even a prefix of it, is not the same verdict.
        assert!(g
            .check_waiting_whole("gang ml/ai-gang-job: 1 of 2")
            .is_err());
        assert!(g
            .check_waiting_whole("gang ml/ai-gang-job waiting for quorum: 1/2 members have nodes")
            .is_err());
    }

    #[test]
    fn a_seat_or_another_state_is_not_waiting_whole() {
        let v = json!({"namespace":"ml","name":"g","state":"admitted","quorum":3,
            "members_with_nodes":0,
            "members":[{"name":"g-0","state":"seated","node":"n1"},
                       {"name":"(not created yet)","state":"held","node":"n1"},
                       {"name":"(not created yet)","state":"held","node":"n2"}],
            "waiting_reason":null,"seconds_until_timeout":58,"seconds_of_backoff_left":null});
        let g = GangView::from_json(&v).unwrap();
        assert_eq!(g.seats().len(), 3);
        assert_eq!(g.count("held"), 2);
        assert_eq!(g.state_of("g-0"), Some("seated"));
        assert_eq!(g.seconds_until_timeout, Some(58));
        assert!(g.check_waiting_whole("x").is_err());
        let mut waiting = g.clone();
        waiting.state = "waiting".into();
        waiting.waiting_reason = Some("x".into());
        assert!(waiting.check_waiting_whole("x").is_err(), "seats remain");
    }

    #[test]
    fn a_changed_view_is_an_error_not_a_vacuous_pass() {
        let v = json!({"namespace":"ml","name":"g","state":"waiting","quorum":"2",
            "members_with_nodes":0,"members":[]});
        let err = GangView::from_json(&v).unwrap_err().to_string();
        assert!(err.contains("quorum"), "{err}");
    }
}
