//! muster owns its gate: a pod behind [`GATHER_GATE`] that is in no gang is let go.
//!
//! The gatherer walks gangs, so a gated pod outside every gang would wait forever: its gang
//! keys were removed after creation (labels and annotations are mutable), its scheduler does
//! not call muster (`GangTable::apply_pod` keeps it out of every gang), or it was created with
//! the gate but no keys. Such a pod is released as a plain pod (its gate removed, no
//! nomination), told why once with a Warning Event. A pod whose keys are *invalid* (two groups,
//! an empty name, a malformed topology key) keeps its gate, and its `InvalidGangKeys` Event says
//! so: it is meant to be a gang member, and released alone it could bind part of a gang
//! (never-half); the user fixes the keys (annotations and labels can be edited) or deletes it.

use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::table::GangTable;

use super::{gather_gate_index, Gatherer, Ungate};

impl Gatherer {
    /// The gates to remove this round: every pending pod behind muster's gate in no gang,
    /// except those whose removal was written and not shown by the watch yet, or is being
    /// written.
    pub(super) fn release_outside_gangs(&mut self, table: &mut GangTable) -> Vec<Ungate> {
        let mut out = Vec::new();
        let mut told = Vec::new();
        for uid in &table.gated_outside_gangs {
            if self.released.contains_key(uid) || self.writing.pods.contains(uid) {
                continue;
            }
            let Some(p) = table.pods.get(uid) else {
                continue;
            };
            let Some(gate_index) = gather_gate_index(&p.info) else {
                continue;
            };
            let pod = PodRef::of(&p.info);
            if self.told_outside.insert(uid.clone()) {
                let message = if p.info.gang_keys_ignored {
                    messages::gate_released_other_scheduler(p.info.scheduler_name())
                } else {
                    messages::gate_released_no_keys()
                };
                told.push(Notice {
                    pod: pod.clone(),
                    kind: NoticeKind::GateReleased,
                    message,
                });
            }
            out.push(Ungate { pod, gate_index });
        }
        table.notices.extend(told);
        if self.told_outside.len() > MAX_TOLD {
            self.told_outside.retain(|u| table.pods.get(u).is_some());
        }
        out
    }
}

/// Pods remembered as told at most (those gone are forgotten past it).
const MAX_TOLD: usize = 10_000;

#[cfg(test)]
#[path = "orphans/tests.rs"]
mod tests;
