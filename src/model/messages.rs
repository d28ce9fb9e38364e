//! Every sentence the model says to users, written once: Events, filter reasons, bind errors
//! and `/gangs` read from here, so the same situation is always described the same way.

use std::fmt;
use std::time::Duration;

use super::notice::PodRef;
use crate::model::inputs::membership::{GangKey, MembershipError};
use crate::model::inputs::objects::{NodeName, PodInfo};
use crate::model::inputs::pod_group::PodGroupApi;

/// Event on a pod whose gang keys cannot be used; `gated`: it carries muster's gate, which
/// stays (released alone it could bind without its gang: never-half).
pub fn invalid_keys(error: &MembershipError, gated: bool) -> String {
    if gated {
        format!(
            "{error}; the pod stays behind muster's gate {GATE} until its keys are fixed \
             (edit them, or delete the pod), since released alone it could run without its gang"
        )
    } else {
        format!("{error}; muster will not schedule this pod until it is fixed")
    }
}

/// Event on a pod behind muster's gate that has no gang keys (any more): the gate goes.
pub fn gate_released_no_keys() -> String {
    format!(
        "this pod is behind muster's gate {GATE} but has no gang keys (any more): muster removes \
         the gate, and kube-scheduler schedules it as a plain pod"
    )
}

/// Event on a pod behind muster's gate whose scheduler does not call muster: the gate goes.
pub fn gate_released_other_scheduler(scheduler: &str) -> String {
    format!(
        "this pod is behind muster's gate {GATE}, but its schedulerName {scheduler} does not call \
         muster: muster removes the gate and leaves the pod to {scheduler}"
    )
}

const GATE: &str = crate::model::inputs::membership::GATHER_GATE;

/// Warning on a gang-keyed pod whose scheduler does not call muster; `keys`: the key that
/// named its group and the name (`None` when the keys are invalid anyway).
pub fn other_scheduler(
    scheduler: &str,
    keys: Option<&str>,
    calling: &[std::sync::Arc<str>],
) -> String {
    let keys = keys.map(|k| format!(" ({k})")).unwrap_or_default();
    let calling = calling.iter().map(|n| &**n).collect::<Vec<_>>().join(", ");
    format!(
        "muster ignores this pod's gang keys{keys}: its schedulerName {scheduler} does not call \
         muster (the schedulers that do: {calling}), so it is scheduled by {scheduler} alone and \
         is not a member of any muster gang"
    )
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

/// The rule a simulation names when it ran out of its `budget` of node checks with `placed` of
/// `need` members placed (the gang does not fit in what muster simulates per call).
pub fn out_of_checks(budget: u64, placed: usize, need: usize) -> String {
    format!(
        "the simulation stopped after {budget} node checks with {placed} of {need} members \
         placed: muster simulates no more per call (members with pod (anti-)affinity or spread \
         terms, or many distinct members, cost a walk over the nodes each)"
    )
}

/// Why a gang whose quorum no placement could meet is refused at once (it holds nothing):
/// its `nodes` nodes have room for at most `at_most` members as small as its smallest.
pub fn beyond_cluster(key: &GangKey, quorum: u32, nodes: usize, at_most: u64) -> String {
    format!(
        "gang {key}: quorum {quorum} is more than the cluster could ever hold: its {nodes} nodes \
         have room for at most {at_most} members as small as its smallest, with nothing else \
         running; nothing is held (lower the gang's min-available or add nodes)"
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

/// A gang's counts, as its sentences tell them: plain numbers, read by the caller at the
/// moment of the decision (the table's `GangFacts::counts`).
pub struct GangCounts<'a> {
    pub quorum: u32,
    /// Live members that exist.
    pub existing: u32,
    /// Live members bound or assumed.
    pub with_nodes: u32,
    pub confirmed_seats: u32,
    /// The first task below its minimum, counting members with nodes and confirmed seats.
    pub short_task: Option<TaskCounts<'a>>,
    /// The first task with fewer members existing than its minimum.
    pub task_missing_members: Option<TaskCounts<'a>>,
}

/// One task's counts, and its minimum.
pub struct TaskCounts<'a> {
    pub task: &'a str,
    pub min: u32,
    pub existing: u32,
    pub with_nodes: u32,
    pub confirmed_seats: u32,
}

/// Why a gang cannot be placed now (it holds nothing meanwhile): at most `fit` of `quorum`
/// members fit, every member existing; `rule` stopped the simulation when it was not room
/// alone, `task` (name, fit, minimum) is the task below its minimum it stopped at.
pub fn room_short(
    key: &GangKey,
    fit: u32,
    quorum: u32,
    rule: Option<&str>,
    task: Option<(&str, u32, u32)>,
) -> String {
    let task = task
        .map(|(task, fit, min)| format!("task {task}: {fit} of {min} members fit; "))
        .unwrap_or_default();
    match rule {
        None => format!("gang {key}: {task}{fit} of {quorum} members fit"),
        // The rule's message carries its own counts.
        Some(rule) => format!("gang {key}: {task}{rule}"),
    }
}

/// A DRA request the cluster has nodes for, whose devices competing gangs ahead of this one
/// keep: `need` says what the members need and how many nodes have it free ("2 members need
/// 4 devices of class gpu.example.com each; nodes with 4 free: 3"); `gangs` how many gangs
/// ahead take devices of `class`.
pub fn devices_reserved_ahead(need: &str, class: &str, gangs: u32) -> String {
    let gangs = match gangs {
        1 => "1 gang".to_string(),
        n => format!("{n} gangs"),
    };
    format!("{need}; devices of class {class} are reserved for {gangs} ahead of this one")
}

/// Why a gang cannot be placed now while `missing` of its `quorum` members are not created
/// yet (within the creation window).
pub fn room_short_of_members_to_come(
    key: &GangKey,
    fit: u32,
    quorum: u32,
    missing: u32,
    rule: Option<&str>,
) -> String {
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

/// Members are missing and the creation window is over: nothing is held for them.
pub fn members_missing(key: &GangKey, existing: u32, quorum: u32, window: Duration) -> String {
    format!(
        "gang {key}: waiting for members: {existing} of {quorum} exist; no room is held \
         for the missing {} once no member has appeared for {}",
        quorum.saturating_sub(existing),
        humantime::format_duration(window)
    )
}

/// Members of a task below its minimum are missing and the creation window is over.
pub fn task_members_missing(
    key: &GangKey,
    task: &str,
    existing: u32,
    min: u32,
    window: Duration,
) -> String {
    format!(
        "gang {key}: waiting for members of task {task}: {existing} of {min} exist; no \
         room is held for the missing {} once no member has appeared for {}",
        min.saturating_sub(existing),
        humantime::format_duration(window)
    )
}

/// A gathered gang (behind muster's gate) waits for members not created yet, holding nothing.
pub fn gathered_members_missing(
    key: &GangKey,
    task: Option<&str>,
    existing: u32,
    needed: u32,
) -> String {
    let what = task.map_or_else(|| "members".to_string(), |t| format!("members of task {t}"));
    format!(
        "gang {key}: waiting for {what}: {existing} of {needed} exist; it holds no room and \
         its gates stay until every member its quorum needs exists"
    )
}

/// An admitted gathered gang's seats no longer hold its quorum: every seat is released.
pub fn gathered_seats_released(
    key: &GangKey,
    task: Option<&str>,
    have: u32,
    needed: u32,
) -> String {
    let what = task.map_or_else(|| "members".to_string(), |t| format!("members of task {t}"));
    format!(
        "gang {key}: seats released: {have} of {needed} {what} have a node or a seat (a member \
         was deleted or gated, or its node went); it is let through again once every member \
         its quorum needs exists and fits"
    )
}

/// A gathered gang fits only by preempting pods of lower priority: let through for that.
/// A gathered gang short of room alone, for which the cluster autoscaler is asked for room
/// (`--capacity-buffers`).
pub fn autoscaler_asked(key: &GangKey, fit: u32, quorum: u32, asked: u32) -> String {
    format!(
        "gang {key}: {fit} of {quorum} members fit on the nodes that exist; waiting for the \
         nodes the cluster autoscaler is asked for, for the whole gang (a CapacityBuffer of \
         {asked} members), holding nothing meanwhile"
    )
}

/// The members of a gathered gang short of room ask for more than every NodePool's limit
/// leaves.
#[allow(clippy::too_many_arguments)]
pub fn beyond_node_pools(
    key: &GangKey,
    short: u32,
    resource: &str,
    need: &str,
    pool: &str,
    room: &str,
    limit: &str,
    pools: usize,
) -> String {
    format!(
        "gang {key}: {short} members do not fit on the nodes that exist and need {resource} \
         {need}, more than any NodePool may add (of {pools}, NodePool {pool} has {room} left \
         of its limit {resource} {limit}); no node is asked for, the gang waits for room, \
         holding nothing"
    )
}

/// A gathered gang short of room whose members no NodePool's nodes could take.
pub fn no_node_pool_admits(key: &GangKey, short: u32, why: &[String]) -> String {
    format!(
        "gang {key}: {short} members do not fit on the nodes that exist, and no NodePool may add \
         a node they could use ({}); no node is asked for, the gang waits for room, holding \
         nothing",
        why.join("; ")
    )
}

/// The autoscaler was asked for room for a gathered gang and it did not come in time.
pub fn autoscaler_gave_up(
    key: &GangKey,
    fit: u32,
    quorum: u32,
    bound: std::time::Duration,
) -> String {
    format!(
        "gang {key}: {fit} of {quorum} members fit; the nodes asked of the cluster autoscaler \
         for the whole gang did not come within {}, so they are no longer asked for (its \
         CapacityBuffer is deleted); the gang waits for room, holding nothing",
        humantime::format_duration(bound)
    )
}

pub fn gathered_for_preemption(key: &GangKey) -> String {
    format!(
        "gang {key}: fits only if pods of lower priority are preempted; its gates are removed \
         so kube-scheduler can preempt for it, whole gang or nothing"
    )
}

/// No member declares the gang's size and members may still be arriving.
pub fn quorum_undecided(key: &GangKey, existing: u32, window: Duration) -> String {
    format!(
        "gang {key}: no member declares the gang's size; its quorum is the members that \
         exist once none has appeared for {} ({existing} so far)",
        humantime::format_duration(window)
    )
}

/// Event when the creation window ends while room is held for members not created yet (of a
/// task below its minimum, when that is what is missing).
pub fn window_over(key: &GangKey, facts: &GangCounts, window: Duration) -> String {
    let (what, existing, needed) = match &facts.task_missing_members {
        Some(t) => (format!("members of task {}", t.task), t.existing, t.min),
        None => ("members".to_string(), facts.existing, facts.quorum),
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

/// Logged with a `Retry` notice for a member let through whose gathered gang is seated again.
pub const RETRY_GATHERED: &str =
    "its gathered gang holds a seat for it again; asking kube-scheduler to retry the pod";

/// Logged with a `Retry` notice for a pod refused while a node it was offered was unknown.
pub const RETRY_AFTER_NODE_ARRIVED: &str =
    "a node muster did not know when it refused the pod arrived in its cache; asking \
     kube-scheduler to retry the pod";

/// Logged with a `Retry` notice for a pod whose preemption was refused because the watch had
/// not delivered it yet.
pub const RETRY_SEEN: &str =
    "muster has now seen the pod its preemption was refused for; asking kube-scheduler to retry it";

/// `GangWaiting` Event on a preemptor whose nomination made its gang's plan a hold.
pub fn holding(key: &GangKey, nodes: &[String], planned: &[String]) -> String {
    let planned = if planned.is_empty() {
        String::new()
    } else {
        format!(
            "; room planned on {} (pods of lower priority still run there: held once they are gone; the members planned there may preempt them)",
            planned.join(", ")
        )
    };
    format!(
        "gang {key}: room held on {} while the victims of this pod's preemption terminate{planned}; the gang binds together when they are gone",
        nodes.join(", ")
    )
}

/// Notice (not an Event) when a gang's creation window closed after the pod was refused.
pub const RETRY_AFTER_WINDOW: &str =
    "the gang's creation window closed; asking kube-scheduler to retry the pod";

/// Who holds a seat kept for a member not created yet (see [`host_port_held`]).
pub const MEMBER_NOT_CREATED_YET: &str = "a member not created yet";

/// Filter reason for a node where a gang's seat holds a host port the pod asks for.
pub fn host_port_held(
    port: &impl fmt::Display,
    gang: &impl fmt::Display,
    member: &impl fmt::Display,
) -> String {
    format!("host port {port} is reserved here for gang {gang} (the seat of {member})")
}

/// Filter reason for a node whose free devices a seat holds (DynamicResources).
pub fn devices_held(gang: &impl fmt::Display, member: &impl fmt::Display) -> String {
    format!(
        "the devices this pod's claims need here are reserved for gang {gang} (the seat of {member})"
    )
}

/// Filter reason for a node without room; says so when gang seats take part of it.
pub fn no_room(shortfall: &impl fmt::Display, seats_here: bool) -> String {
    if seats_here {
        format!("{shortfall} (some of it is reserved for gangs)")
    } else {
        shortfall.to_string()
    }
}

/// Answer of a bind call whose member is seated but whose gang is below quorum (or one of its
/// tasks below its minimum).
pub fn waiting_for_quorum(key: &GangKey, facts: &GangCounts) -> String {
    let (have, quorum, existing) = (
        facts.with_nodes + facts.confirmed_seats,
        facts.quorum,
        facts.existing,
    );
    let mut message = format!("gang {key} waiting for quorum: {have}/{quorum} members have nodes");
    if let Some(t) = &facts.short_task {
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
    facts: &GangCounts,
) -> String {
    format!(
        "gang {key}: binding member {pod} to node {node} failed for good: {error}; \
         {}/{} members have nodes; its room on {node} is held until the gang's timeout \
         while kube-scheduler retries it",
        facts.with_nodes, facts.quorum
    )
}

/// A seat's node lost room before its gang's quorum was bound: nothing was bound.
pub fn seat_lost_room(key: &GangKey, node: &NodeName, shortfall: &impl fmt::Display) -> String {
    format!(
        "gang {key}: node {node} no longer has room for the members seated there ({shortfall}); \
         nothing was bound, those members are planned again"
    )
}

/// kube-scheduler preempted a running member without muster's say (muster away, or its answer
/// late): the rest of the gang is evicted so it is disrupted whole.
pub fn preempted_without_muster(key: &GangKey, victim: &PodRef, others: usize) -> String {
    let rest = if others == 1 { "member" } else { "members" };
    format!(
        "gang {key}: member {victim} was preempted by kube-scheduler without muster's say \
         (muster was away or did not answer in time); its other {others} running {rest} are \
         evicted so the gang is disrupted whole, not left half running (disruption mode gang)"
    )
}

/// At quorum, a seat's node lacks room only for pods still being deleted there (a
/// preemption's victims, as muster's watch has them): the gang keeps its seats and waits.
pub fn waiting_for_leaving(key: &GangKey, node: &NodeName, leaving: usize) -> String {
    let pods = if leaving == 1 { "pod" } else { "pods" };
    format!(
        "gang {key}: every member has a seat; waiting for {leaving} {pods} being deleted on node \
         {node} to go, to make room for the members seated there"
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

/// kube-scheduler refused a member in a cycle that never reached muster (a filter muster does
/// not simulate): the gang holds nothing until that member or a node changes. `said` is
/// kube-scheduler's own message, quoted.
pub fn refused_by_scheduler(key: &GangKey, pod: &str, said: &str) -> String {
    format!(
        "gang {key}: kube-scheduler found no node for member {pod}: \"{said}\"; the gang holds \
         nothing until that member or a node changes"
    )
}

/// The `GangTimedOut` Event (naming the task below its minimum, if one is).
pub fn timed_out(
    key: &GangKey,
    timeout: Duration,
    facts: &GangCounts,
    backoff: Duration,
) -> String {
    let (had_nodes, quorum, existing) = (
        facts.with_nodes + facts.confirmed_seats,
        facts.quorum,
        facts.existing,
    );
    let mut missing = if existing < quorum {
        format!(" ({existing} of {quorum} members exist)")
    } else {
        String::new()
    };
    if let Some(t) = &facts.short_task {
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
    dropped: &[(String, String)],
) -> String {
    let dropped_text = dropped
        .iter()
        .map(|(node, why)| format!("{node}: {why}"))
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

/// Why a preemption candidate was dropped: the preemptor's gang could place only `fit` of
/// `quorum` members even with every lower-priority pod evicted.
pub fn dropped_gang_cannot_follow(pod: &PodInfo, fit: u32, quorum: u32) -> String {
    match pod.gang() {
        Some(m) => format!(
            "gang {} could place only {fit} of {quorum} members even with every lower-priority pod evicted",
            m.gang
        ),
        None => format!("only {fit} of {quorum} members could be placed"),
    }
}

/// Dropped: it would evict part of a running gang where other victims will do.
pub fn dropped_running_gang_victim(gang: &GangKey) -> String {
    format!("it would evict part of running gang {gang} where other victims will do")
}

/// Dropped: a victim's running gang has a priority not lower than the preemptor's.
pub fn dropped_gang_not_lower_priority(pod: &PodInfo, gang: &GangKey, priority: i32) -> String {
    format!(
        "running gang {gang} has priority {priority}, not lower than the preemptor's {}",
        pod.priority
    )
}

/// Dropped: another candidate disrupts fewer pods.
pub const DROPPED_DISRUPTS_MORE: &str = "another node disrupts fewer pods";

/// Dropped: the preemptor's gang is confined to one topology domain, and another domain needs
/// fewer evictions.
pub fn dropped_domain_evicts_more(pod: &PodInfo, victims: usize, best: usize) -> String {
    let who = match pod.gang() {
        Some(m) => format!("gang {}", m.gang),
        None => "the gang".to_string(),
    };
    format!(
        "{who} would evict {victims} pods inside this node's topology domain; another domain needs only {best}"
    )
}

/// Dropped: the watch has not delivered the preemptor yet.
pub const DROPPED_NOT_SEEN_YET: &str = "muster has not seen this pod yet, so it cannot judge its gang (it asks for a retry once it has)";

/// Dropped: the preemptor's gang declares no member count and members may still arrive.
pub fn dropped_quorum_undecided(pod: &PodInfo, existing: u32) -> String {
    format!(
        "{}: no member declares the member count, and members may still be arriving ({existing} so far)",
        gang_of(pod)
    )
}

/// Dropped: the preemptor's members name a PodGroup that does not exist.
pub fn dropped_pod_group_missing(pod: &PodInfo, api: PodGroupApi) -> String {
    format!(
        "{}: its {api} does not exist (yet); the gang is placed nowhere until it does",
        gang_of(pod)
    )
}

/// Dropped: the preemptor's gang lacks members and its creation window is over.
pub fn dropped_members_missing(pod: &PodInfo, existing: u32, quorum: u32) -> String {
    format!(
        "{} has {existing} of {quorum} members and its creation window is over",
        gang_of(pod)
    )
}

/// Dropped: another member of the preemptor's gang preempted a moment ago.
pub fn dropped_sibling_preempting(pod: &PodInfo) -> String {
    format!(
        "another member of {} is preempting for the whole gang; this one waits for the room planned for it",
        gang_of(pod)
    )
}

/// Dropped: the preemptor's earlier preemption is still under way on another node.
pub fn dropped_preemption_under_way(pod: &PodInfo, nodes: &[String]) -> String {
    let on = match nodes {
        [one] => format!("node {one}"),
        more => format!("nodes {}", more.join(", ")),
    };
    format!(
        "the preemption for {} on {on} is under way (its victims are still there, or the room they freed waits for it); it preempts nowhere else meanwhile",
        pod.display_name()
    )
}

/// Dropped: the preemptor's gang is backing off after its quorum timeout.
pub fn dropped_backing_off(pod: &PodInfo, left: Duration) -> String {
    format!(
        "{} is backing off for {}s after its quorum timeout",
        gang_of(pod),
        left.as_secs().max(1)
    )
}

/// Dropped: the request's pod UID is another pod's (`actual`) in muster's cache.
pub fn dropped_not_the_pod(pod: &PodInfo, actual: &str) -> String {
    format!(
        "uid {} is {actual} in muster's cache, not this pod",
        pod.uid
    )
}

/// Dropped: a victim is not on the candidate node as muster's cache has it (`on`: where it
/// is; `None`: muster does not know the pod).
pub fn dropped_victim_not_on_node(victim: &str, on: Option<&str>) -> String {
    match on {
        None => format!("victim {victim} is on no node in muster's cache"),
        Some(on) => format!("victim {victim} is on node {on}, not this one"),
    }
}

/// Dropped: a victim's priority, as cached, is not lower than the preemptor's.
pub fn dropped_victim_not_lower_priority(pod: &PodInfo, victim: &str, priority: i32) -> String {
    format!(
        "victim {victim} has priority {priority}, not lower than the preemptor's {}",
        pod.priority
    )
}

/// Dropped: the preemptor's gang's quorum is more than its `nodes` nodes could ever hold
/// (`at_most` members).
pub fn dropped_beyond_cluster(pod: &PodInfo, quorum: u32, nodes: usize, at_most: u64) -> String {
    format!(
        "{}: quorum {quorum} is more than the cluster could ever hold (at most {at_most} on its \
         {nodes} nodes)",
        gang_of(pod)
    )
}

/// Dropped: with its victims gone, the node's room is still held by another gang's seats.
pub fn dropped_held_for_gang(gang: &GangKey) -> String {
    format!("the room its victims free is held for gang {gang}")
}

/// A candidate where seats keep what the preemptor needs whatever is evicted: `reason` is
/// [`host_port_held`] or [`devices_held`].
pub fn dropped_seats_hold(reason: &str) -> String {
    format!("evicting there would not help: {reason}")
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

/// A gang whose quorum must be inside one domain of `label` would fit in none even with every
/// lower-priority pod evicted: the best domain (`best`) would hold `fit` of `quorum` then.
pub fn domain_beyond_preemption(
    key: &GangKey,
    label: &str,
    quorum: u32,
    fit: u32,
    best: &str,
) -> String {
    // The label's name (`rack` of `topology.kubernetes.io/rack`) for the domain's kind.
    let kind = label.rsplit('/').next().unwrap_or(label);
    format!(
        "gang {key} needs {quorum} members in one {label}; even after evicting lower-priority \
         pods the best {kind} fits {fit} ({best})"
    )
}

/// A PodGroup's status while its gang waits with no refusal to quote yet.
pub fn podgroup_waiting(
    namespace: &str,
    name: &str,
    with_nodes: u32,
    live: u32,
    quorum: u32,
) -> String {
    let exist = if live == 1 { "exists" } else { "exist" };
    format!(
        "gang {namespace}/{name} waiting: {with_nodes} of {quorum} members have nodes, {live} {exist}"
    )
}

/// The condition on a Volcano PodGroup muster does not enqueue: its `minResources` exceed
/// the cluster's free allocatable in sum.
pub fn podgroup_not_enqueued(
    key: &GangKey,
    short: &crate::model::inputs::resources::InsufficientResource,
) -> String {
    format!(
        "gang {key}: spec.minResources do not fit the cluster's free allocatable in sum \
         ({short}); the PodGroup stays Pending, holds nothing, and is checked again"
    )
}

/// A PodGroup's status once its gang is placed.
pub fn podgroup_placed(namespace: &str, name: &str, scheduled: u32, quorum: u32) -> String {
    format!("gang {namespace}/{name}: {scheduled} of {quorum} members have nodes")
}

/// Event on the members of a gang found partly bound when muster started deciding (after a
/// restart or a take-over), whose remaining members have room held now.
pub fn partly_bound_finishing(
    key: &GangKey,
    bound: u32,
    quorum: u32,
    seats: &[(PodRef, NodeName)],
) -> String {
    let seats: Vec<String> = seats
        .iter()
        .map(|(p, n)| format!("{} on {n}", p.name))
        .collect();
    format!(
        "gang {key} was found partly bound when muster started deciding ({bound} of {quorum} \
         members bound): room is held for the rest before anything else is decided ({}); they \
         are bound as kube-scheduler tries them again",
        seats.join(", ")
    )
}

/// Warning on the members of a gang found partly bound whose remaining members cannot be
/// placed: `why` says what stopped them; `evicted` whether its bound members are evicted
/// (disruption mode `gang`) or keep running (mode `pod`).
pub fn partly_bound_stuck(
    key: &GangKey,
    bound: u32,
    quorum: u32,
    why: &str,
    evicted: bool,
) -> String {
    let then = if evicted {
        "its bound members are evicted so that the gang can start again whole (disruption mode gang)"
    } else {
        "its bound members keep running (disruption mode pod); the rest are bound when room appears"
    };
    format!(
        "gang {key} is partly bound ({bound} of {quorum} members bound) and the rest cannot be \
         placed: {why}; {then}"
    )
}

/// Why a gang found partly bound gave up the room held for its remaining members.
pub fn partly_bound_timed_out(timeout: Duration) -> String {
    format!(
        "its remaining members were not bound within its timeout of {}s",
        timeout.as_secs()
    )
}

/// A gang whose quorum must be inside one domain of `label` fits in none: the best domain
/// (`best`, if any has a node the member asking may use) holds `fit` of `quorum`.
pub fn domain_short(
    key: &GangKey,
    label: &str,
    quorum: u32,
    fit: u32,
    best: Option<&str>,
    domains: usize,
) -> String {
    match best {
        Some(best) => format!(
            "gang {key} needs {quorum} members in one {label}; the best {label} ({best}) fits {fit} \
             (of {domains} domains)"
        ),
        None => format!(
            "gang {key} needs {quorum} members in one {label}; no node with that label can take \
             this member ({domains} domains)"
        ),
    }
}

/// Members of gang `key` ask for different topologies (`values`: `key="what"` each).
pub fn topology_disagreement(key: &GangKey, values: &[String]) -> String {
    format!(
        "gang {key}: members ask for different topologies: {}; give every member the same \
         topology key, and nothing is held meanwhile",
        values.join(", ")
    )
}

/// Gang `key`'s Volcano PodGroup asks for a hard network topology, which names HyperNode
/// tiers muster cannot read.
pub fn volcano_hypernodes(key: &GangKey, tier: &str) -> String {
    format!(
        "gang {key}: its Volcano PodGroup sets spec.networkTopology mode hard ({tier}), whose \
         HyperNode tiers muster cannot read; add muster.dev/topology-required: <node label of \
         that tier> to the members, or use mode soft; nothing is held meanwhile"
    )
}

/// A node refused to a member of a gang confined to domain `value` of `label`.
pub fn outside_domain(label: &str, value: &str) -> String {
    format!("node is outside its gang's {label} {value}")
}

/// The bind of `pod`, a member of gang `key` held to `value` of `label`, names `node` outside
/// it (chosen before the gang took that domain): refused, and the member is scheduled again.
pub fn bind_outside_domain(
    key: &GangKey,
    pod: &str,
    node: &str,
    label: &str,
    value: &str,
) -> String {
    format!(
        "gang {key} is held to {label} {value}, and node {node} chosen for {pod} is outside \
         it; the pod is scheduled again and offered nodes there"
    )
}

/// `message` about a gang, with the domain of `label` it is in.
pub fn in_domain(message: &str, label: &str, value: &str) -> String {
    format!("{message}; all in {label} {value}")
}

/// A confirmed seat of gang `key` on `node`, which is no longer in the gang's domain `value` of
/// `label`: nothing is bound, and the members seated there are planned again.
pub fn seat_outside_domain(key: &GangKey, node: &str, label: &str, value: &str) -> String {
    format!(
        "gang {key}: node {node} is no longer in its {label} {value}; nothing was bound, and \
         the members seated there are placed again"
    )
}

/// Gang `key` (topology required or preferred) gives up its seats in `from` of `label` and is
/// placed again in `to`, one domain that holds its whole quorum of the members as they are now:
/// its seated members' held bind calls answer with this, and they ask again.
pub fn gang_moves_domain(key: &GangKey, label: &str, from: &str, to: &str, quorum: u32) -> String {
    format!(
        "gang {key} moves from {label} {from} to {to}, which holds all {quorum} members as \
         they are now ({from} held room sized for members not created yet); its seats in \
         {from} are released and its seated members are scheduled again"
    )
}

/// A bind call of `pod` held on its seat on `from` finds the seat moved to `to`: its gang was
/// placed again while the call waited. The call answers with this; kube-scheduler schedules the
/// pod again and muster's filter offers it `to`.
pub fn held_seat_moved(key: &GangKey, pod: &str, from: &str, to: &str) -> String {
    format!(
        "gang {key} was placed again while the bind call of {pod} waited on node {from}: its \
         seat is now on node {to}; the pod is scheduled again and offered node {to}"
    )
}

/// A bind call held on its seat finds the pod's gang without that seat, and no reason told.
pub fn seats_released_before_quorum(key: &GangKey) -> String {
    format!("gang {key} released its seats before reaching quorum")
}

/// A bind of `pod` on `from`, chosen by kube-scheduler before its gang was planned anew with
/// the pod's seat on `to`, in another topology domain.
pub fn seat_moved_after_filter(key: &GangKey, pod: &str, from: &str, to: &str) -> String {
    format!(
        "gang {key} was placed again after node {from} was chosen for {pod}: its seat is now on \
         node {to}, in another topology domain; the pod is scheduled again and offered node {to}"
    )
}
