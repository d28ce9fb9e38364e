//! From the desired status and the object's current one to the `status` a merge patch writes —
//! or nothing, when the object already shows it. Pure, so every rule is a unit test:
//! - a condition whose status did not change keeps its `lastTransitionTime`;
//! - conditions of other types (other writers') are kept as they are;
//! - Kubernetes' `PodGroupInitiallyScheduled` is terminal once `True` (kube-scheduler's
//!   `updatePodGroupCondition` never takes it back to `False`, and neither does muster);
//! - Volcano's `Inqueue` is never taken back to `Pending` (its scheduler's `jobStatus` does not,
//!   and its job controller creates pods only past `Pending`);
//! - a Volcano PodGroup without members is enqueued (or given its reason) only while its phase
//!   is `Pending` or empty;
//! - scheduler-plugins' `scheduleStartTime` is set once, when the phase first leaves `Pending`.
//!
//! A JSON merge patch replaces a list whole, so `conditions` is written as the full merged list.

use serde_json::{json, Map, Value};

use crate::model::pod_group_status::{
    Condition, DesiredStatus, VolcanoPhase, KUBERNETES_INITIALLY_SCHEDULED,
};

/// The `status` to write over `current` (the object's `status`, `Value::Null` if none), or
/// `None` when it already shows `desired`. `now` is RFC 3339 (`2026-12-01T17:00:00Z`);
/// `generation` is the object's `metadata.generation` (Kubernetes' `observedGeneration`).
pub fn status_patch(
    current: &Value,
    desired: &DesiredStatus,
    now: &str,
    generation: Option<i64>,
) -> Option<Value> {
    let mut next = current.as_object().cloned().unwrap_or_default();
    match desired {
        DesiredStatus::Volcano {
            phase,
            running,
            succeeded,
            failed,
            conditions,
        } => {
            // As Volcano's scheduler (`jobStatus`): a gang below quorum that is already
            // `Inqueue` stays so, never back to `Pending` — Volcano's job controller creates and
            // replaces a job's pods only while its PodGroup is past `Pending`.
            let keep_inqueue = *phase == VolcanoPhase::Pending && current["phase"] == "Inqueue";
            if !keep_inqueue {
                next.insert("phase".into(), json!(phase.as_str()));
            }
            set_count(&mut next, "running", *running);
            set_count(&mut next, "succeeded", *succeeded);
            set_count(&mut next, "failed", *failed);
            let merged = merge_conditions(current, conditions, now, |c, _| volcano_condition(c));
            next.insert("conditions".into(), Value::Array(merged));
        }
        DesiredStatus::SchedulerPlugins {
            phase,
            scheduled,
            running,
            succeeded,
            failed,
        } => {
            next.insert("phase".into(), json!(phase.as_str()));
            set_count(&mut next, "scheduled", *scheduled);
            set_count(&mut next, "running", *running);
            set_count(&mut next, "succeeded", *succeeded);
            set_count(&mut next, "failed", *failed);
            if phase.as_str() != "Pending" && !next.contains_key("scheduleStartTime") {
                next.insert("scheduleStartTime".into(), json!(now));
            }
        }
        DesiredStatus::VolcanoEnqueue { condition } => {
            // Only a PodGroup no one has moved past `Pending` (Volcano's scheduler, an earlier
            // round, or a finished job whose pods are gone: `Completed`) is touched.
            let phase = current["phase"].as_str().unwrap_or("");
            if !(phase.is_empty() || phase == VolcanoPhase::Pending.as_str()) {
                return None;
            }
            match condition {
                None => {
                    next.insert("phase".into(), json!(VolcanoPhase::Inqueue.as_str()));
                }
                Some(c) => {
                    next.insert("phase".into(), json!(VolcanoPhase::Pending.as_str()));
                    let merged = merge_conditions(current, std::slice::from_ref(c), now, |c, _| {
                        volcano_condition(c)
                    });
                    next.insert("conditions".into(), Value::Array(merged));
                }
            }
        }
        DesiredStatus::Kubernetes { condition } => {
            let existing = find(current, condition.type_);
            let terminal = condition.type_ == KUBERNETES_INITIALLY_SCHEDULED
                && existing.is_some_and(|e| e.get("status") == Some(&json!("True")));
            if !terminal {
                let merged =
                    merge_conditions(current, std::slice::from_ref(condition), now, |c, _| {
                        let mut v = volcano_condition(c);
                        if let Some(g) = generation {
                            v["observedGeneration"] = json!(g);
                        }
                        v
                    });
                next.insert("conditions".into(), Value::Array(merged));
            }
        }
    }
    let next = Value::Object(next);
    let unchanged = match current {
        Value::Null => next == json!({}),
        c => *c == next,
    };
    (!unchanged).then_some(next)
}

/// `omitempty` counts: zero is absent.
fn set_count(status: &mut Map<String, Value>, field: &str, n: u32) {
    if n == 0 {
        status.remove(field);
    } else {
        status.insert(field.into(), json!(n));
    }
}

fn find<'a>(current: &'a Value, type_: &str) -> Option<&'a Value> {
    current
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// A condition without its `lastTransitionTime` (set by [`merge_conditions`]).
fn volcano_condition(c: &Condition) -> Value {
    let mut v = json!({
        "type": c.type_,
        "status": if c.status { "True" } else { "False" },
        "reason": c.reason,
    });
    if !c.message.is_empty() {
        v["message"] = json!(c.message);
    }
    v
}

/// The current conditions with each desired one put in (in place of its type's), keeping the
/// `lastTransitionTime` of a condition whose status did not change, and any field muster does
/// not set (`transitionID`) of an unchanged one.
fn merge_conditions(
    current: &Value,
    desired: &[Condition],
    now: &str,
    render: impl Fn(&Condition, &str) -> Value,
) -> Vec<Value> {
    let mut out: Vec<Value> = current
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in desired {
        let mut v = render(c, now);
        let at = out
            .iter()
            .position(|e| e.get("type").and_then(Value::as_str) == Some(c.type_));
        let same_status = at.is_some_and(|i| out[i].get("status") == v.get("status"));
        let since = match (at, same_status) {
            (Some(i), true) => out[i]
                .get("lastTransitionTime")
                .cloned()
                .unwrap_or_else(|| json!(now)),
            _ => json!(now),
        };
        v["lastTransitionTime"] = since;
        match at {
            Some(i) => {
                let same = ["status", "reason", "message", "observedGeneration"]
                    .iter()
                    .all(|f| out[i].get(*f) == v.get(*f));
                if !same {
                    out[i] = v;
                }
            }
            None => out.push(v),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pod_group_status::SchedulerPluginsPhase;

    const T0: &str = "2026-12-01T17:00:00Z";
    const T1: &str = "2026-12-01T17:05:00Z";

    fn waiting(message: &str) -> Condition {
        Condition {
            type_: "Unschedulable",
            status: true,
            reason: "NotEnoughResources",
            message: message.into(),
        }
    }

    fn volcano(phase: VolcanoPhase, conditions: Vec<Condition>) -> DesiredStatus {
        DesiredStatus::Volcano {
            phase,
            running: 0,
            succeeded: 0,
            failed: 0,
            conditions,
        }
    }

    #[test]
    fn volcano_status_first_write_sets_phase_and_condition() {
        let d = volcano(
            VolcanoPhase::Pending,
            vec![waiting("gang ml/a: 1 of 2 members fit")],
        );
        let s = status_patch(&Value::Null, &d, T0, None).expect("a write");
        assert_eq!(
            s,
            json!({
                "phase": "Pending",
                "conditions": [{
                    "type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                    "message": "gang ml/a: 1 of 2 members fit", "lastTransitionTime": T0,
                }],
            })
        );
        // Written once: the same desired status over it is no write.
        assert_eq!(status_patch(&s, &d, T1, None), None);
    }

    #[test]
    fn volcano_status_a_new_message_keeps_the_transition_time_and_other_writers_conditions() {
        let current = json!({
            "phase": "Pending",
            "conditions": [
                {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                 "message": "old", "lastTransitionTime": T0},
                {"type": "Other", "status": "True", "reason": "X", "lastTransitionTime": T0},
            ],
        });
        let d = volcano(VolcanoPhase::Pending, vec![waiting("new")]);
        let s = status_patch(&current, &d, T1, None).expect("a write");
        let c = s["conditions"].as_array().unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0]["message"], "new");
        assert_eq!(c[0]["lastTransitionTime"], T0);
        assert_eq!(c[1]["type"], "Other");
    }

    #[test]
    fn volcano_status_inqueue_is_never_taken_back_to_pending() {
        let current = json!({"phase": "Inqueue"});
        let d = volcano(VolcanoPhase::Pending, vec![waiting("w")]);
        let s = status_patch(&current, &d, T0, None).expect("the condition is new");
        assert_eq!(s["phase"], "Inqueue");
        let d = volcano(VolcanoPhase::Running, vec![]);
        let s = status_patch(&current, &d, T0, None).unwrap();
        assert_eq!(s["phase"], "Running");
    }

    #[test]
    fn volcano_status_counts_are_omitted_at_zero_like_omitempty() {
        let current = json!({"phase": "Running", "running": 2, "conditions": []});
        let d = volcano(VolcanoPhase::Running, vec![]);
        let s = status_patch(&current, &d, T1, None).expect("running went to 0");
        assert!(s.get("running").is_none());
    }

    #[test]
    fn scheduler_plugins_status_schedule_start_time_is_set_once() {
        let d = |phase| DesiredStatus::SchedulerPlugins {
            phase,
            scheduled: 0,
            running: 0,
            succeeded: 0,
            failed: 0,
        };
        let s = status_patch(&Value::Null, &d(SchedulerPluginsPhase::Pending), T0, None).unwrap();
        assert_eq!(s, json!({"phase": "Pending"}));
        let s = status_patch(&s, &d(SchedulerPluginsPhase::PreScheduling), T0, None).unwrap();
        assert_eq!(s["scheduleStartTime"], T0);
        let s2 = status_patch(&s, &d(SchedulerPluginsPhase::Scheduling), T1, None).unwrap();
        assert_eq!(s2["scheduleStartTime"], T0);
        assert_eq!(s2["phase"], "Scheduling");
    }

    #[test]
    fn kubernetes_status_initially_scheduled_is_terminal_once_true() {
        let cond = |status: bool, reason: &'static str| DesiredStatus::Kubernetes {
            condition: Condition {
                type_: KUBERNETES_INITIALLY_SCHEDULED,
                status,
                reason,
                message: "m".into(),
            },
        };
        let s = status_patch(&Value::Null, &cond(false, "Unschedulable"), T0, Some(3)).unwrap();
        assert_eq!(s["conditions"][0]["observedGeneration"], 3);
        assert_eq!(s["conditions"][0]["status"], "False");
        let s = status_patch(&s, &cond(true, "Scheduled"), T1, Some(3)).unwrap();
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["conditions"][0]["lastTransitionTime"], T1);
        // A gang that fell below quorum later: the condition stays True, nothing is written.
        assert_eq!(
            status_patch(&s, &cond(false, "Unschedulable"), T1, Some(3)),
            None
        );
    }

    #[test]
    fn volcano_enqueue_moves_pending_or_no_phase_to_inqueue_and_nothing_else() {
        let d = DesiredStatus::VolcanoEnqueue { condition: None };
        assert_eq!(
            status_patch(&Value::Null, &d, T0, None),
            Some(json!({"phase": "Inqueue"}))
        );
        assert_eq!(
            status_patch(&json!({"phase": "Pending"}), &d, T0, None),
            Some(json!({"phase": "Inqueue"}))
        );
        for past in ["Inqueue", "Running", "Completed", "Unknown"] {
            assert_eq!(
                status_patch(&json!({"phase": past}), &d, T0, None),
                None,
                "{past}"
            );
        }
    }

    #[test]
    fn volcano_not_enqueued_stays_pending_with_not_enough_resources() {
        let d = DesiredStatus::VolcanoEnqueue {
            condition: Some(waiting("gang ml/a: spec.minResources do not fit")),
        };
        let s = status_patch(&Value::Null, &d, T0, None).expect("a write");
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["conditions"][0]["reason"], "NotEnoughResources");
        assert_eq!(status_patch(&s, &d, T1, None), None);
        // Once Inqueue (whoever did it), never taken back to Pending.
        assert_eq!(
            status_patch(&json!({"phase": "Inqueue"}), &d, T1, None),
            None
        );
    }
}
