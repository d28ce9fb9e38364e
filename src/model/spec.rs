//! A gang's spec: what its members declare about the gang as a whole — the quorum, the
//! timeout, the priority and age that order competing gangs.
//!
//! This is the one place the quorum is decided. Today it comes from the members' own keys
//! (the largest `minAvailable` declared, else every member that exists); a gang definition
//! from another source (a PodGroup, per-task minimums) replaces [`GangSpec::of_members`] here.

use std::collections::BTreeSet;
use std::time::Duration;

use super::objects::PodInfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GangSpec {
    /// Members that must have nodes before any is bound.
    pub quorum: u32,
    /// Some member declares the quorum; without it, the quorum is every member that exists,
    /// which is final only once members stopped appearing (the creation window).
    pub declared: bool,
    /// Per-gang override of the quorum timeout (the largest any member declares).
    pub timeout: Option<Duration>,
    /// The highest priority among members.
    pub priority: i32,
    /// The oldest member's creation time, in seconds since the epoch.
    pub created: i64,
}

impl Default for GangSpec {
    /// The spec of a gang with no members: no quorum, and last in every order.
    fn default() -> Self {
        GangSpec {
            quorum: 0,
            declared: false,
            timeout: None,
            priority: i32::MIN,
            created: i64::MAX,
        }
    }
}

impl GangSpec {
    /// The spec the members declare. Members that disagree on the quorum: the largest wins
    /// (see [`conflicting_quorums`] for telling them). Without any quorum key, the gang is
    /// every member that exists.
    pub fn of_members<'a>(members: impl IntoIterator<Item = &'a PodInfo>) -> GangSpec {
        let mut spec = GangSpec::default();
        let mut count = 0u32;
        let mut declared: Option<u32> = None;
        for p in members {
            count += 1;
            spec.priority = spec.priority.max(p.priority);
            spec.created = spec.created.min(p.created);
            if let Some(m) = p.gang() {
                if let Some(q) = m.min_available {
                    declared = Some(declared.map_or(q, |d| d.max(q)));
                }
                if let Some(t) = m.timeout {
                    spec.timeout = Some(spec.timeout.map_or(t, |d: Duration| d.max(t)));
                }
            }
        }
        if count > 0 {
            spec.quorum = declared.unwrap_or(count).max(1);
            spec.declared = declared.is_some();
        }
        spec
    }

    pub fn timeout_or(&self, default: Duration) -> Duration {
        self.timeout.unwrap_or(default)
    }
}

/// The distinct quorums members declare, smallest first, when they declare more than one.
pub fn conflicting_quorums<'a>(members: impl IntoIterator<Item = &'a PodInfo>) -> Option<Vec<u32>> {
    let values: BTreeSet<u32> = members
        .into_iter()
        .filter_map(|p| p.gang().and_then(|m| m.min_available))
        .collect();
    (values.len() >= 2).then(|| values.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::membership::GANG_TIMEOUT;
    use crate::testkit::pod;

    #[test]
    fn the_largest_declared_quorum_wins_and_the_conflict_is_named() {
        let members = [
            pod("a").gang("g", 2).build(),
            pod("b").gang("g", 3).build(),
            pod("c").gang("g", 3).build(),
        ];
        assert_eq!(GangSpec::of_members(&members).quorum, 3);
        assert!(GangSpec::of_members(&members).declared);
        assert_eq!(conflicting_quorums(&members), Some(vec![2, 3]));
        assert_eq!(conflicting_quorums(&members[1..]), None);
    }

    #[test]
    fn without_a_quorum_key_every_existing_member_is_needed() {
        let members = [
            pod("a").annotation("muster.dev/group", "g").build(),
            pod("b").annotation("muster.dev/group", "g").build(),
        ];
        assert_eq!(GangSpec::of_members(&members).quorum, 2);
        assert!(!GangSpec::of_members(&members).declared);
        assert_eq!(GangSpec::of_members(&members[..1]).quorum, 1);
        assert_eq!(
            GangSpec::of_members(std::iter::empty()),
            GangSpec::default()
        );
        assert_eq!(GangSpec::default().quorum, 0);
    }

    #[test]
    fn priority_age_and_timeout_come_from_the_most_demanding_member() {
        let members = [
            pod("a").gang("g", 2).priority(5).created(20).build(),
            pod("b")
                .gang("g", 2)
                .priority(100)
                .created(30)
                .annotation(GANG_TIMEOUT, "20s")
                .build(),
            pod("c")
                .gang("g", 2)
                .created(10)
                .annotation(GANG_TIMEOUT, "5s")
                .build(),
        ];
        let spec = GangSpec::of_members(&members);
        assert_eq!(spec.priority, 100);
        assert_eq!(spec.created, 10);
        assert_eq!(spec.timeout, Some(Duration::from_secs(20)));
        assert_eq!(
            spec.timeout_or(Duration::from_secs(60)),
            Duration::from_secs(20)
        );
        assert_eq!(
            GangSpec::of_members(&members[..1]).timeout_or(Duration::from_secs(60)),
            Duration::from_secs(60)
        );
    }
}
