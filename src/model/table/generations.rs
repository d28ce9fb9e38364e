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
//! The same holds for a job deleted and submitted again under the same name while its old pods
//! are not marked deleted yet (the garbage collector deletes them after the job): JobSet marks
//! each pod with its JobSet's uid (`jobset.sigs.k8s.io/jobset-uid`), and pods of another
//! incarnation created later than the current one's first pod are a newer generation (in whole
//! seconds: a pod created in the same second is older, so that of two incarnations exactly one
//! is the gang).
//!
//! The newest generation is the latest any pod of the gang has shown while the gang exists;
//! if every member of it goes before the older pods do, those are members again (the gang's
//! pods decide, as everywhere in the table).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::model::inputs::membership::{
    GangKey, Membership, MembershipError, GENERATION, JOBSET_UID,
};
use crate::model::inputs::objects::{PodInfo, PodUid};

/// Per gang with a generation above 0, an incarnation, or superseded pods: its newest
/// generation and the pods of older ones. Gangs whose pods carry no generation have no entry.
#[derive(Default)]
pub struct Generations {
    by_gang: HashMap<GangKey, Generation>,
}

#[derive(Default)]
struct Generation {
    newest: u64,
    /// The incarnation of the newest generation's pods (JobSet's uid), and the earliest
    /// creation time among them: a pod of another incarnation created before it is older.
    incarnation: Option<(Arc<str>, i64)>,
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
    /// How the generation of a pod of `m` created at `created` compares with its gang's newest:
    /// another incarnation (the job deleted and submitted again) is newer if the pod was
    /// created later than the newest incarnation's first pod, else older; within one
    /// incarnation, the generation number decides.
    fn compare(&self, m: &Membership, created: i64) -> Ordering {
        let Some(g) = self.by_gang.get(&m.gang) else {
            return m.generation.cmp(&0);
        };
        match (&m.incarnation, &g.incarnation) {
            // Strictly later only: creation times are whole seconds, and a job deleted and
            // submitted again within the second ties with it. Counting a tie as newer made
            // each incarnation newer than the other (an update of an old pod put its
            // incarnation back on top, with the new pods still members): both were one gang,
            // placed, and the new pods were let through one by one beside the old ones
            // (never-half; seen in the e2e test of a JobSet submitted again). On a tie the
            // incarnation muster holds stays the gang, and the other waits until it is gone.
            (Some(mine), Some((theirs, first))) if mine != theirs => {
                if created > *first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            _ => m.generation.cmp(&g.newest),
        }
    }

    /// Whether a member of `m` created at `created` is of an older generation than its gang's
    /// newest (it is to be superseded).
    pub fn is_older(&self, m: &Membership, created: i64) -> bool {
        self.compare(m, created) == Ordering::Less
    }

    /// Reads `info`'s generation against its gang's newest; a pod of an older one has its
    /// membership replaced by [`MembershipError::Superseded`] (which keeps what it said).
    pub fn sort(&mut self, info: &mut PodInfo) -> Standing {
        let Ok(Some(m)) = &info.membership else {
            return Standing::Member;
        };
        match self.compare(m, info.created) {
            Ordering::Equal => {
                if let Some(mine) = &m.incarnation {
                    let g = self.by_gang.entry(m.gang.clone()).or_default();
                    match &mut g.incarnation {
                        Some((_, first)) => *first = (*first).min(info.created),
                        None => g.incarnation = Some((mine.clone(), info.created)),
                    }
                }
                Standing::Member
            }
            Ordering::Greater => {
                let g = self.by_gang.entry(m.gang.clone()).or_default();
                g.newest = m.generation;
                g.incarnation = match (g.incarnation.take(), &m.incarnation) {
                    (Some((same, first)), Some(mine)) if same == *mine => {
                        Some((same, first.min(info.created)))
                    }
                    (_, mine) => mine.clone().map(|i| (i, info.created)),
                };
                g.superseded.remove(&info.uid);
                Standing::Newer
            }
            Ordering::Less => {
                let g = self.by_gang.entry(m.gang.clone()).or_default();
                g.superseded.insert(info.uid.clone());
                let why = match (&m.incarnation, &g.incarnation) {
                    (Some(mine), Some((theirs, first)))
                        if mine != theirs && info.created < *first =>
                    {
                        format!(
                            "{JOBSET_UID} {mine}: its gang {} is made by a later JobSet now \
                             ({JOBSET_UID} {theirs})",
                            m.gang
                        )
                    }
                    // A tie in whole seconds: which JobSet is the later one cannot be told,
                    // and the one muster holds stays the gang until its pods are gone.
                    (Some(mine), Some((theirs, _))) if mine != theirs => format!(
                        "{JOBSET_UID} {mine}: its gang {} is held by the pods of another \
                         JobSet ({JOBSET_UID} {theirs}) created in the same second (whole \
                         seconds cannot tell which JobSet is later; this pod is a member again \
                         once they are gone)",
                        m.gang
                    ),
                    _ => format!(
                        "{} {}: its gang {} is at generation {} now",
                        m.generation_key.unwrap_or(GENERATION),
                        m.generation,
                        m.gang,
                        g.newest
                    ),
                };
                let Ok(Some(m)) = std::mem::replace(&mut info.membership, Ok(None)) else {
                    unreachable!("matched above")
                };
                info.membership = Err(MembershipError::Superseded {
                    superseded: Box::new(m),
                    why,
                });
                Standing::Superseded
            }
        }
    }

    /// No gang has a generation or a superseded pod (the model check's end state).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_gang.is_empty()
    }

    /// The newest generation of `key` seen so far (0 for a gang without generations).
    #[cfg(test)]
    pub fn newest(&self, key: &GangKey) -> u64 {
        self.by_gang.get(key).map_or(0, |g| g.newest)
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
