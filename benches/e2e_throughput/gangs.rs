//! Per gang: the guarantee checked while a run is sampled (no gang stays partly bound), and
//! the times reported once it is over.

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

/// For each gang whose members were all created and all bound, in `gangs` order: its
/// placement time (last member created → last member bound; zero if the last binding came
/// first) and its spread (first → last binding), in seconds. Indexed by pod.
pub fn whole_gang_times(
    gangs: &[GangPlan],
    bound_at: &[Option<Instant>],
    created_at: &[Option<Instant>],
) -> (Vec<f64>, Vec<f64>) {
    let mut placement = Vec::new();
    let mut spread = Vec::new();
    for gang in gangs {
        let bound: Option<Vec<Instant>> = gang.members.iter().map(|&i| bound_at[i]).collect();
        let created: Option<Vec<Instant>> = gang.members.iter().map(|&i| created_at[i]).collect();
        if let (Some(bound), Some(created)) = (bound, created) {
            let last_bound = *bound.iter().max().expect("a gang has members");
            let first_bound = *bound.iter().min().expect("a gang has members");
            let last_created = *created.iter().max().expect("a gang has members");
            placement.push(
                last_bound
                    .saturating_duration_since(last_created)
                    .as_secs_f64(),
            );
            spread.push(last_bound.duration_since(first_bound).as_secs_f64());
        }
    }
    (placement, spread)
}

// `cargo test` also builds this module into the `harness = false` bench, where tests do not
// run and their helpers go unused; `e2e_throughput_units` runs them.
#[cfg(test)]
#[allow(dead_code, unused_imports)]
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

    #[test]
    fn placement_and_spread_of_whole_gangs_only() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let gangs = [gang(&[0, 1]), gang(&[2, 3]), gang(&[4, 5])];
        let created = [
            Some(t0),
            Some(t0 + s(1)),
            Some(t0),
            Some(t0),
            Some(t0),
            Some(t0 + s(5)),
        ];
        let bound = [
            Some(t0 + s(3)), // gang 0: last created at 1, bound at 2 and 3
            Some(t0 + s(2)),
            Some(t0 + s(1)), // gang 1: one member never bound
            None,
            Some(t0 + s(1)), // gang 2: its last binding is seen before its last create returns
            Some(t0 + s(4)),
        ];
        let (placement, spread) = whole_gang_times(&gangs, &bound, &created);
        assert_eq!(placement, vec![2.0, 0.0]);
        assert_eq!(spread, vec![1.0, 3.0]);
    }
}
