//! A gang's generations: which of its pods are its members when its job restarted.
//!
//! Job controllers that restart a gang by recreating its pods mark each pod with the attempt it
//! was made for (JobSet's `jobset.sigs.k8s.io/restart-attempt`, Volcano's
//! `volcano.sh/job-version`, or muster's own `muster.dev/generation`). The old pods may still be
//! live, even bound, when the new ones arrive: JobSet's default `Recreate` deletes the old Jobs
//! and creates the new ones, and the garbage collector marks their pods deleted only later.
//! Counted as members, the old pods would make the first new pod a member of a placed gang,
//! bound at once while the rest of its generation does not exist (never-half). So a gang is its
//! newest generation: a pod of an older one is *superseded* — not a member, holding nothing and
//! never placed (it keeps muster's gate, as a pod with keys muster cannot use does), while the
//! room it uses where it is bound is counted like any pod's (holds-nothing is about seats, not
//! pods that run).
//!
//! The newest generation is the largest any pod of the gang has shown while the gang exists;
//! if every member of it goes before the older pods do, those are members again (the gang's
//! pods decide, as everywhere in the table).

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use crate::model::inputs::membership::{GangKey, MembershipError};
use crate::model::inputs::objects::{PodInfo, PodUid};

/// Per gang with a generation above 0 or superseded pods: its newest generation and the pods
/// of older ones. Gangs whose pods carry no generation have no entry.
#[derive(Default)]
pub struct Generations {
    by_gang: HashMap<GangKey, Generation>,
}

#[derive(Default)]
struct Generation {
    newest: u64,
    superseded: BTreeSet<PodUid>,
}

/// Where a pod's generation puts it in its gang.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Of the gang's newest generation (or in no gang).
    Member,
    /// Newer than every pod of its gang so far: the gang's older members are superseded now.
    Newer,
    /// Of an older generation: its membership was replaced by [`MembershipError::Superseded`].
    Superseded,
}

impl Generations {
    /// No gang has a generation or a superseded pod (the model check's end state).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_gang.is_empty()
    }

    /// The newest generation of `key` seen so far (0 for a gang without generations).
    pub fn newest(&self, key: &GangKey) -> u64 {
        self.by_gang.get(key).map_or(0, |g| g.newest)
    }

    /// Reads `info`'s generation against its gang's newest; a pod of an older one has its
    /// membership replaced by [`MembershipError::Superseded`] (which keeps what it said).
    pub fn sort(&mut self, info: &mut PodInfo) -> Standing {
        let Ok(Some(m)) = &info.membership else {
            return Standing::Member;
        };
        let newest = self.newest(&m.gang);
        match m.generation.cmp(&newest) {
            std::cmp::Ordering::Equal => Standing::Member,
            std::cmp::Ordering::Greater => {
                let g = self.by_gang.entry(m.gang.clone()).or_default();
                g.newest = m.generation;
                g.superseded.remove(&info.uid);
                Standing::Newer
            }
            std::cmp::Ordering::Less => {
                self.by_gang
                    .entry(m.gang.clone())
                    .or_default()
                    .superseded
                    .insert(info.uid.clone());
                let Ok(Some(m)) = std::mem::replace(&mut info.membership, Ok(None)) else {
                    unreachable!("matched above")
                };
                info.membership = Err(MembershipError::Superseded {
                    superseded: Box::new(m),
                    newest,
                });
                Standing::Superseded
            }
        }
    }

    /// `info` (as stored before an update, or deleted) is no longer where it was: a superseded
    /// pod leaves its gang's list.
    pub fn forget(&mut self, info: &PodInfo) {
        if let Err(MembershipError::Superseded { superseded, .. }) = &info.membership {
            if let Some(g) = self.by_gang.get_mut(&superseded.gang) {
                g.superseded.remove(&info.uid);
            }
        }
    }

    /// The gang `key` has no member left: forgets its generations and returns its superseded
    /// pods, which are its members again.
    pub fn gang_gone(&mut self, key: &GangKey) -> BTreeSet<PodUid> {
        self.by_gang
            .remove(key)
            .map(|g| g.superseded)
            .unwrap_or_default()
    }

    /// The membership a superseded pod's keys give, to make it a member again.
    pub fn restored(mut info: PodInfo) -> PodInfo {
        info.membership = match info.membership {
            Err(MembershipError::Superseded { superseded, .. }) => Ok(Some(*superseded)),
            other => other,
        };
        info
    }
}

#[cfg(test)]
mod tests;
