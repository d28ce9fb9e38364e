//! PodGroup watch events and API discovery: a gang's definition changed, so its spec is
//! decided again and its waiting members hear why they wait, or to retry.

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::pod_group::{PodGroupApi, PodGroupDef, PodGroupIndex};
use crate::model::messages;
use crate::model::notice::NoticeKind;
use crate::model::table::GangTable;

impl GangTable {
    /// A PodGroup was created or changed.
    pub fn apply_pod_group(&mut self, def: PodGroupDef) {
        let key = def.key.clone();
        self.pod_groups.insert(def);
        self.pod_group_changed(&key);
    }

    /// A PodGroup was deleted.
    pub fn remove_pod_group(&mut self, api: PodGroupApi, key: &GangKey) {
        if self.pod_groups.remove(api, key) {
            self.pod_group_changed(key);
        }
    }

    /// A re-list of `api`'s PodGroups completed: forgets those it did not list. Returns how many
    /// of that API remain.
    pub fn retain_pod_groups(
        &mut self,
        api: PodGroupApi,
        keep: impl Fn(&GangKey) -> bool,
    ) -> usize {
        let gone: Vec<GangKey> = self
            .pod_groups
            .keys(api)
            .filter(|k| !keep(k))
            .cloned()
            .collect();
        for key in &gone {
            self.remove_pod_group(api, key);
        }
        self.pod_groups.count(api)
    }

    /// Whether the cluster serves `api` (found through discovery; a CRD may be installed or
    /// removed while muster runs). A pod naming a PodGroup of an API the cluster does not serve
    /// is a gang by its keys alone, as before PodGroups were read.
    pub fn set_pod_group_api_served(&mut self, api: PodGroupApi, served: bool) {
        if self.pod_groups.set_served(api, served) {
            let keys: Vec<GangKey> = self.gangs.keys().cloned().collect();
            for key in &keys {
                self.pod_group_changed(key);
            }
        }
    }

    pub fn pod_groups(&self) -> &PodGroupIndex {
        &self.pod_groups
    }

    /// The definition of gang `key` changed: its spec is decided again. A gang that holds
    /// seats planned for what it no longer needs gives them all up and waits (the next member's
    /// call plans it again): its PodGroup was deleted (it waits for it again, holding nothing),
    /// or changed its quorum or per-task minimums. A gang that waited for its PodGroup and can
    /// now proceed has its members asked to retry (kube-scheduler does not retry a pod for a
    /// PodGroup's creation). Members already bound stay bound: muster never unbinds a pod, so
    /// a placed gang whose PodGroup is deleted keeps running, and only its new members wait.
    fn pod_group_changed(&mut self, key: &GangKey) {
        let Some(before) = self.gangs.get(key).map(|g| g.spec().clone()) else {
            return;
        };
        self.refresh_spec(key);
        let after = self.gangs[key].spec().clone();
        // Its waiting members hear of the change: why they wait now, or to retry.
        let (kind, message) = match (before.is_decided(), after.awaited_pod_group()) {
            (true, Some((api, _))) => (NoticeKind::Waiting, messages::pod_group_missing(key, api)),
            (false, None) => (NoticeKind::Retry, messages::RETRY_POD_GROUP.to_string()),
            _ => return self.finish_pod_group_change(key),
        };
        self.tell(key, kind, &message, |p| p.is_pending());
        if let Some(g) = self.gangs.get_mut(key) {
            if kind == NoticeKind::Waiting {
                g.note_waiting(message);
            } else {
                g.stop_waiting();
            }
        }
        self.finish_pod_group_change(key);
    }

    fn finish_pod_group_change(&mut self, key: &GangKey) {
        self.tell_pod_group_conflict(key);
        self.refresh_placed(key);
    }
}
