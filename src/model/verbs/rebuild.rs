//! The table a replica decides from when it takes over as leader: built from the cluster as a
//! restart builds it, so a takeover needs no state handed over from the old leader.

use crate::model::table::GangTable;

impl GangTable {
    /// A fresh table holding the same nodes, pods, PodGroups (and the PodGroup APIs the
    /// cluster serves) and DRA objects, as last watched, and nothing muster
    /// decided: no seats, no assumed bindings, no timeouts or back-offs. This is exactly what a
    /// restarted muster believes once its watches have listed (derived); gangs waiting for
    /// quorum take their seats again as kube-scheduler retries their members.
    pub fn rebuilt(&self) -> GangTable {
        let mut fresh = GangTable::new(self.config.clone());
        // PodGroups first, so each gang's spec is decided from its PodGroup as it forms.
        fresh.pod_groups = self.pod_groups.clone();
        // The DRA objects as last watched: their watches do not list again at a take-over,
        // so a table without them would leave every gang with claims holding nothing.
        fresh.devices = self.devices.clone();
        for (_, entry) in self.ledger.iter() {
            fresh.apply_node(entry.info().clone());
        }
        for uid in self.pods.uids() {
            if let Some(entry) = self.pods.get(uid) {
                fresh.apply_pod(entry.info.clone());
            }
        }
        // The watches already reported these once (bad keys, disagreeing quorums).
        fresh.notices.take();
        fresh
    }
}

#[cfg(test)]
mod tests;
