//! Every sentence the model says to users, written once: Events, filter reasons, bind errors
//! and `/gangs` read from here, so the same situation is always described the same way.

use std::time::Duration;

use super::membership::{GangKey, MembershipError};
use super::notice::PodRef;
use super::objects::{NodeName, PodInfo};
use super::planner::Shortfall;
use super::podgroup::PodGroupApi;
use super::quorum_bound::BeyondCluster;
use super::resources::Shortfall as RoomShortfall;
use super::table::GangFacts;

/// Event on a pod whose gang keys cannot be used.
pub fn invalid_keys(error: &MembershipError) -> String {
    format!("{error}; muster will not schedule this pod until it is fixed")
}

/// Filter reason for every node when the pod's gang keys cannot be used.
pub fn invalid_membership(pod: &PodInfo, error: &MembershipError) -> String {
    format!("pod {}: {error}", pod.display_name())
}

pub fn quorum_conflict(key: &GangKey, values: &[u32]) -> String {
    let used = values.last().copied().unwrap_or_default();
    let listed = values
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    format!("members of gang {key} disagree on minAvailable ({listed}); using the largest, {used}")
}

/// Warning when members' keys disagree with their gang's PodGroup (which wins).
pub fn pod_group_conflict(key: &GangKey, api: PodGroupApi, found: &[String]) -> String {
    format!(
        "members of gang {key} disagree with their {api} {key}: {}; the PodGroup wins",
        found.join(", ")
    )
}

/// Why a gang whose quorum no placement could meet is refused at once (it holds nothing).
pub fn beyond_cluster(key: &GangKey, b: &BeyondCluster) -> String {
    format!(
        "gang {key}: quorum {} is more than the cluster could ever hold: its {} nodes have room \
         for at most {} members as small as its smallest, with nothing else running; nothing is \
         held (lower the gang's min-available or add nodes)",
        b.quorum, b.nodes, b.at_most
    )
}

/// Why a gang whose members name a PodGroup that does not exist waits (and holds nothing).
pub fn pod_group_missing(key: &GangKey, api: PodGroupApi) -> String {
    format!(
        "gang {key}: waiting for its {api} {key}, which does not exist (yet); nothing is held \
         until it does"
    )
}

/// Logged with a `Retry` notice when the PodGroup a gang waited for appeared.
pub const RETRY_POD_GROUP: &str =
    "the gang's PodGroup appeared; asking kube-scheduler to retry the pod";

/// Filter reason for a node muster's node watch has not delivered yet.
pub fn unknown_node(name: &str) -> String {
    format!(
        "node {name} is not in muster's cache yet; muster asks kube-scheduler to retry the pod \
         when it arrives"
    )
}

/// Filter reason and bind error while a gang backs off after a timeout.
pub fn backing_off(key: &GangKey, left: Duration) -> String {
    format!(
        "gang {key}: backing off for {}s after its quorum timeout",
        left.as_secs().max(1)
    )
}

/// Why a gang cannot be placed now (it holds nothing meanwhile).
pub fn does_not_fit(key: &GangKey, why: &Shortfall, window: Duration) -> String {
    match why {
        Shortfall::Room {
            fit,
            quorum,
            missing: 0,
            rule,
            task,
        } => {
            let task = task
                .as_ref()
                .map(|t| format!("task {}: {} of {} members fit; ", t.task, t.fit, t.min))
                .unwrap_or_default();
            match rule {
                None => format!("gang {key}: {task}{fit} of {quorum} members fit"),
                // The rule's message carries its own counts.
                Some(rule) => format!("gang {key}: {task}{rule}"),
            }
        }
        Shortfall::Room {
            fit,
            quorum,
            missing,
            rule,
            task: _,
        } => {
            let mut m = format!(
                "gang {key}: waiting for members: {} of {quorum} exist, and room for {fit} \
                 if the rest ask as much as the largest",
                quorum - missing
            );
            if let Some(rule) = rule {
                m.push_str(&format!(": {rule}"));
            }
            m
        }
        Shortfall::MembersMissing { existing, quorum } => format!(
            "gang {key}: waiting for members: {existing} of {quorum} exist; no room is held \
             for the missing {} once no member has appeared for {}",
            quorum.saturating_sub(*existing),
            humantime::format_duration(window)
        ),
        Shortfall::TaskMembersMissing {
            task,
            existing,
            min,
        } => format!(
            "gang {key}: waiting for members of task {task}: {existing} of {min} exist; no \
             room is held for the missing {} once no member has appeared for {}",
            min.saturating_sub(*existing),
            humantime::format_duration(window)
        ),
        Shortfall::PodGroupMissing { api } => pod_group_missing(key, *api),
        Shortfall::BeyondCluster(b) => beyond_cluster(key, b),
        Shortfall::QuorumUndecided { existing } => format!(
            "gang {key}: no member declares the gang's size; its quorum is the members that \
             exist once none has appeared for {} ({existing} so far)",
            humantime::format_duration(window)
        ),
    }
}

/// Event when the creation window ends while room is held for members not created yet (of a
/// task below its minimum, when that is what is missing).
pub fn window_over(key: &GangKey, facts: &GangFacts, window: Duration) -> String {
    let (what, existing, needed) = match facts.tasks.iter().find(|t| t.existing < t.min) {
        Some(t) => (format!("members of task {}", t.task), t.existing, t.min),
        None => ("members".to_string(), facts.existing, facts.spec.quorum),
    };
    format!(
        "gang {key}: waiting for {what}: {existing} of {needed} exist; room held for the \
         missing {} released, as no member appeared for {}",
        needed.saturating_sub(existing),
        humantime::format_duration(window)
    )
}

/// Logged with a `Retry` notice (the pod is annotated, no Event is made).
pub const RETRY: &str = "room held by gangs was released; asking kube-scheduler to retry the pod";

/// Logged with a `Retry` notice for a pod refused while a node it was offered was unknown.
pub const RETRY_AFTER_NODE_ARRIVED: &str =
    "a node muster did not know when it refused the pod arrived in its cache; asking \
     kube-scheduler to retry the pod";

/// Logged with a `Retry` notice for a pod whose preemption was refused because the watch had
/// not delivered it yet.
pub const RETRY_SEEN: &str =
    "muster has now seen the pod its preemption was refused for; asking kube-scheduler to retry it";

/// `GangWaiting` Event on a preemptor whose nomination made its gang's plan a hold.
pub fn holding(key: &GangKey, nodes: &[String]) -> String {
    format!(
        "gang {key}: room held on {} while the victims of this pod's preemption terminate; the gang binds together when they are gone",
        nodes.join(", ")
    )
}

/// Notice (not an Event) when a gang's creation window closed after the pod was refused.
pub const RETRY_AFTER_WINDOW: &str =
    "the gang's creation window closed; asking kube-scheduler to retry the pod";

/// Filter reason for a node without room; says so when gang seats take part of it.
pub fn no_room(shortfall: &RoomShortfall, seats_here: bool) -> String {
    if seats_here {
        format!("{shortfall} (some of it is reserved for gangs)")
    } else {
        shortfall.to_string()
    }
}

/// Answer of a bind call whose member is seated but whose gang is below quorum (or one of its
/// tasks below its minimum).
pub fn waiting_for_quorum(key: &GangKey, facts: &GangFacts) -> String {
    let (have, quorum, existing) = (
        facts.with_nodes + facts.confirmed_seats,
        facts.spec.quorum,
        facts.existing,
    );
    let mut message = format!("gang {key} waiting for quorum: {have}/{quorum} members have nodes");
    if let Some(t) = facts.short_task(true) {
        message.push_str(&format!(
            "; task {}: {}/{} members have nodes",
            t.task,
            t.with_nodes + t.confirmed_seats,
            t.min
        ));
    }
    if existing < quorum {
        message.push_str(&format!(
            "; {existing} of {quorum} members exist, the rest are not created yet"
        ));
    }
    message
}

/// The one `GangPlaced` Event of a gang, naming each member's node.
pub fn placed(key: &GangKey, members: &[(PodRef, NodeName)], already_had_nodes: u32) -> String {
    let placements: Vec<String> = members
        .iter()
        .map(|(p, n)| format!("{} on {n}", p.name))
        .collect();
    format!(
        "gang {key} placed: {} members bound together ({already_had_nodes} already had nodes): {}",
        members.len(),
        placements.join(", ")
    )
}

pub fn bind_failed(node: &NodeName, error: &str) -> String {
    format!("muster could not bind the pod to node {node}: {error}")
}

/// The `GangBindFailed` Event of a member bound with its gang whose binding was refused for
/// good: the others stay bound (a binding cannot be undone), so the gang is below quorum.
pub fn gang_bind_failed(
    key: &GangKey,
    pod: &PodRef,
    node: &NodeName,
    error: &str,
    facts: &GangFacts,
) -> String {
    format!(
        "gang {key}: binding member {pod} to node {node} failed for good: {error}; \
         {}/{} members have nodes; its room on {node} is held until the gang's timeout \
         while kube-scheduler retries it",
        facts.with_nodes, facts.spec.quorum
    )
}

/// A seat's node lost room before its gang's quorum was bound: nothing was bound.
pub fn seat_lost_room(key: &GangKey, node: &NodeName, shortfall: &RoomShortfall) -> String {
    format!(
        "gang {key}: node {node} no longer has room for the members seated there ({shortfall}); \
         nothing was bound, those members are planned again"
    )
}

/// At quorum, a seat's node refuses its member under a kube-scheduler rule (cordoned, tainted,
/// a label gone, a pod that its affinity or spread now counts): nothing is bound.
pub fn seat_node_refuses(
    key: &GangKey,
    node: &NodeName,
    pod: &str,
    plugin: &str,
    reason: &str,
) -> String {
    format!(
        "gang {key}: node {node} no longer admits member {pod} seated there ({plugin}: {reason}); \
         nothing was bound, the members seated there are planned again"
    )
}

/// The `GangTimedOut` Event (naming the task below its minimum, if one is).
pub fn timed_out(key: &GangKey, timeout: Duration, facts: &GangFacts, backoff: Duration) -> String {
    let (had_nodes, quorum, existing) = (
        facts.with_nodes + facts.confirmed_seats,
        facts.spec.quorum,
        facts.existing,
    );
    let mut missing = if existing < quorum {
        format!(" ({existing} of {quorum} members exist)")
    } else {
        String::new()
    };
    if let Some(t) = facts.short_task(true) {
        missing.push_str(&format!(
            " (task {}: {}/{} members had nodes, {} exist)",
            t.task,
            t.with_nodes + t.confirmed_seats,
            t.min,
            t.existing
        ));
    }
    format!(
        "gang {key} did not reach quorum within {}: {had_nodes}/{quorum} members had nodes{missing}; \
         seats released, retrying in {}",
        humantime::format_duration(timeout),
        humantime::format_duration(backoff),
    )
}

/// Event on the preemptor: which victims kube-scheduler may evict (by node), and why the
/// other candidates were dropped; with no victim left, why nothing is evicted.
pub fn preemption(
    pod: &PodInfo,
    kept: &std::collections::BTreeMap<&str, Vec<String>>,
    dropped: &[(String, super::preempt::DropReason)],
) -> String {
    use super::preempt::DropReason;
    let why = |r: &DropReason| {
        match r {
        DropReason::GangCannotFollow { fit, quorum } => match pod.gang() {
            Some(m) => format!(
                "gang {} could place only {fit} of {quorum} members even with every lower-priority pod evicted",
                m.gang
            ),
            None => format!("only {fit} of {quorum} members could be placed"),
        },
        DropReason::RunningGangVictim { gang } => {
            format!("it would evict part of running gang {gang} where other victims will do")
        }
        DropReason::GangNotLowerPriority { gang, priority } => format!(
            "running gang {gang} has priority {priority}, not lower than the preemptor's {}",
            pod.priority
        ),
        DropReason::DisruptsMore => "another node disrupts fewer pods".to_string(),
        DropReason::NotSeenYet => {
            "muster has not seen this pod yet, so it cannot judge its gang (it asks for a retry once it has)".to_string()
        }
        DropReason::QuorumUndecided { existing } => format!(
            "{}: no member declares the member count, and members may still be arriving ({existing} so far)",
            gang_of(pod)
        ),
        DropReason::MembersMissing { existing, quorum } => format!(
            "{} has {existing} of {quorum} members and its creation window is over",
            gang_of(pod)
        ),
        DropReason::GangBackingOff { left } => format!(
            "{} is backing off for {}s after its quorum timeout",
            gang_of(pod),
            left.as_secs().max(1)
        ),
        DropReason::HeldForGang { gang } => {
            format!("the room its victims free is held for gang {gang}")
        }
        DropReason::NotThePod { actual } => {
            format!("uid {} is {actual} in muster's cache, not this pod", pod.uid)
        }
        DropReason::VictimNotOnNode { victim, on: None } => {
            format!("victim {victim} is on no node in muster's cache")
        }
        DropReason::VictimNotOnNode {
            victim,
            on: Some(on),
        } => format!("victim {victim} is on node {on}, not this one"),
        DropReason::VictimNotLowerPriority { victim, priority } => format!(
            "victim {victim} has priority {priority}, not lower than the preemptor's {}",
            pod.priority
        ),
        DropReason::BeyondCluster(b) => format!(
            "{}: quorum {} is more than the cluster could ever hold (at most {} on its {} nodes)",
            gang_of(pod),
            b.quorum,
            b.at_most,
            b.nodes
        ),
    }
    };
    let dropped_text = dropped
        .iter()
        .map(|(node, r)| format!("{node}: {}", why(r)))
        .collect::<Vec<_>>()
        .join("; ");
    let subject = match pod.gang() {
        Some(m) => format!("pod {} (gang {})", pod.display_name(), m.gang),
        None => format!("pod {}", pod.display_name()),
    };
    if kept.is_empty() {
        return format!("preemption for {subject} evicts nothing: {dropped_text}");
    }
    let kept_text = kept
        .iter()
        .map(|(node, victims)| format!("{node} [{}]", victims.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    let mut message = format!("preemption for {subject} may evict, on one of: {kept_text}");
    if !dropped.is_empty() {
        message.push_str(&format!("; dropped {dropped_text}"));
    }
    message
}

fn gang_of(pod: &PodInfo) -> String {
    match pod.gang() {
        Some(m) => format!("gang {}", m.gang),
        None => "the gang".to_string(),
    }
}

/// Event on every member of a gang disrupted whole by preemption.
pub fn gang_disrupted(key: &GangKey, by: &PodInfo, node: &str) -> String {
    let by_text = match by.gang() {
        Some(m) => format!(
            "gang {} (pod {}, priority {})",
            m.gang,
            by.display_name(),
            by.priority
        ),
        None => format!("pod {} (priority {})", by.display_name(), by.priority),
    };
    format!(
        "gang {key} is evicted whole: {by_text} preempts a member on node {node}, and the gang's disruption mode is \"gang\" (muster.dev/disruption), so no member is left running alone"
    )
}

/// Filter reason when a gang would not fit even with every lower-priority pod evicted.
pub fn beyond_preemption(does_not_fit: &str) -> String {
    format!("{does_not_fit}, even with every lower-priority pod evicted: preemption cannot help")
}
