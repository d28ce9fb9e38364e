//! The gang guarantee checked while a run is sampled: no gang stays partly bound.

use std::time::{Duration, Instant};

use crate::workload::GangPlan;

/// How many gangs have some but not all members bound, the first of them longer than `grace`
/// before `now` (`bound_at` is indexed by pod). The sampler adds this up once a second: a
/// scheduler that binds members one by one makes it grow while members wait for room.
pub fn gangs_partly_bound_beyond(
    gangs: &[GangPlan],
    bound_at: &[Option<Instant>],
    now: Instant,
    grace: Duration,
) -> usize {
    gangs
        .iter()
        .filter(|gang| {
            let times: Vec<Instant> = gang.members.iter().filter_map(|&i| bound_at[i]).collect();
            match times.iter().min() {
                Some(first) if times.len() < gang.members.len() => {
                    now.duration_since(*first) > grace
                }
                _ => false,
            }
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gang(members: &[usize]) -> GangPlan {
        GangPlan {
            name: format!("g{}", members[0]),
            members: members.to_vec(),
        }
    }

    #[test]
    fn only_gangs_partly_bound_for_longer_than_the_grace_count() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let grace = s(2);
        let gangs = [gang(&[0, 1]), gang(&[2, 3]), gang(&[4, 5]), gang(&[6, 7])];
        let bound_at = [
            Some(t0), // gang 0: half bound since t0
            None,
            Some(t0), // gang 1: whole
            Some(t0 + s(1)),
            None, // gang 2: nothing bound
            None,
            Some(t0 + s(2)), // gang 3: half bound since t0 + 2 s
            None,
        ];
        // Within the grace nothing counts; the grace is measured from the first binding.
        assert_eq!(
            gangs_partly_bound_beyond(&gangs, &bound_at, t0 + s(2), grace),
            0
        );
        assert_eq!(
            gangs_partly_bound_beyond(&gangs, &bound_at, t0 + s(3), grace),
            1
        );
        assert_eq!(
            gangs_partly_bound_beyond(&gangs, &bound_at, t0 + s(5), grace),
            2
        );
        // A whole gang never counts, however long ago its members were bound.
        let mut whole = bound_at;
        whole[1] = Some(t0 + s(9));
        whole[7] = Some(t0 + s(9));
        assert_eq!(
            gangs_partly_bound_beyond(&gangs, &whole, t0 + s(60), grace),
            0
        );
    }
}
