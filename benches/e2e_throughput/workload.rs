//! The workload: deterministic gang and plain-pod shapes from the parameters, the creation
//! order, and the Kubernetes objects (the same pods in every configuration).

use k8s_openapi::api::core::v1::{Pod, PodSchedulingGroup};
use k8s_openapi::api::scheduling::v1beta1::{
    GangSchedulingPolicy, PodGroup, PodGroupSchedulingPolicy, PodGroupSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use muster_harness::k8s::{KeyScheme, PodBuilder};

use crate::params::{Mode, Params};

pub const NS: &str = "bench";

/// splitmix64: deterministic, good enough for workload shapes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

#[derive(Debug, Clone)]
pub struct PodPlan {
    pub name: String,
    pub gang: Option<usize>,
    pub cpu_milli: u32,
}

#[derive(Debug, Clone)]
pub struct GangPlan {
    pub name: String,
    /// Indices into `Workload::pods`; min-available = size.
    pub members: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct Workload {
    pub pods: Vec<PodPlan>,
    pub gangs: Vec<GangPlan>,
    /// Creation order (indices into `pods`).
    pub order: Vec<usize>,
    /// The topology workload's racks and blocks (`E2E_WORKLOAD=topology`).
    pub topology: Option<crate::topology::Layout>,
    /// The DRA workload's device counts (`E2E_WORKLOAD=dra`).
    pub dra: Option<crate::dra::Devices>,
}

impl Workload {
    pub fn plain(&self) -> usize {
        self.pods.iter().filter(|p| p.gang.is_none()).count()
    }

    pub fn gang_size_range(&self) -> (usize, usize) {
        let sizes = self.gangs.iter().map(|g| g.members.len());
        (sizes.clone().min().unwrap_or(0), sizes.max().unwrap_or(0))
    }
}

/// Gang sizes uniform in gang_min..=gang_max (min-available = size), ~plain_percent plain pods,
/// pods of 100m–500m cpu; creation interleaves up to `open_units` gangs/plain pods at a time.
pub fn build_workload(p: &Params) -> Workload {
    let mut rng = Rng(p.seed);
    let plain_target = (p.pods * p.plain_percent + 50) / 100;
    let mut left = p.pods - plain_target.min(p.pods);
    let mut sizes = Vec::new();
    while left >= p.gang_min {
        let mut s = rng.range(p.gang_min, p.gang_max.min(left));
        let rest = left - s;
        if rest > 0 && rest < p.gang_min {
            // The remainder could not form a gang: grow this one, or shrink it to leave one.
            if s + rest <= p.gang_max {
                s += rest;
            } else if s >= 2 * p.gang_min - rest {
                s -= p.gang_min - rest;
            }
        }
        sizes.push(s);
        left -= s;
    }
    let plain = p.pods - sizes.iter().sum::<usize>();

    let cpu = |rng: &mut Rng| {
        let lo = p.cpu_min.div_ceil(10) as usize;
        let hi = (p.cpu_max / 10).max(lo as u32) as usize;
        (rng.range(lo, hi) * 10) as u32
    };
    let mut pods = Vec::with_capacity(p.pods);
    let mut gangs = Vec::with_capacity(sizes.len());
    for (g, &s) in sizes.iter().enumerate() {
        let name = format!("g{g:04}");
        let mut members = Vec::with_capacity(s);
        for m in 0..s {
            members.push(pods.len());
            pods.push(PodPlan {
                name: format!("{name}-{m:02}"),
                gang: Some(g),
                cpu_milli: cpu(&mut rng),
            });
        }
        gangs.push(GangPlan { name, members });
    }
    // Units: a gang (its members in order) or one plain pod.
    let mut units: Vec<Vec<usize>> = gangs.iter().map(|g| g.members.clone()).collect();
    for j in 0..plain {
        units.push(vec![pods.len()]);
        pods.push(PodPlan {
            name: format!("p{j:05}"),
            gang: None,
            cpu_milli: cpu(&mut rng),
        });
    }
    for i in (1..units.len()).rev() {
        let j = rng.range(0, i);
        units.swap(i, j);
    }
    // Interleave: keep `open_units` units open, emit the next pod of a random open one.
    let mut order = Vec::with_capacity(pods.len());
    let mut queue = units.into_iter();
    let mut open: Vec<(Vec<usize>, usize)> = Vec::new();
    loop {
        while open.len() < p.open_units.max(1) {
            match queue.next() {
                Some(u) => open.push((u, 0)),
                None => break,
            }
        }
        if open.is_empty() {
            break;
        }
        let k = rng.range(0, open.len() - 1);
        let (u, next) = &mut open[k];
        order.push(u[*next]);
        *next += 1;
        if *next == u.len() {
            open.swap_remove(k);
        }
    }
    Workload {
        pods,
        gangs,
        order,
        topology: p.topology,
        dra: p.dra,
    }
}

pub fn pod_object(w: &Workload, i: usize, mode: Mode) -> Pod {
    let plan = &w.pods[i];
    let mut b = PodBuilder::new(NS, &plan.name)
        .cpu(&format!("{}m", plan.cpu_milli))
        .memory("256Mi");
    // The same gang keys in every configuration: vanilla ignores them, native reads only
    // spec.schedulingGroup.
    if let Some(g) = plan.gang {
        let gang = &w.gangs[g];
        b = b.gang(KeyScheme::Muster, &gang.name, gang.members.len() as u32);
        if let Some(l) = &w.topology {
            b = l.annotate(g, b);
        }
    }
    let mut pod = b.build();
    if w.dra.is_some() && plan.gang.is_some() {
        crate::dra::attach(&mut pod);
    }
    if mode == Mode::MusterSecond && plan.gang.is_some() {
        if let Some(spec) = pod.spec.as_mut() {
            spec.scheduler_name = Some(crate::params::SECOND_SCHEDULER_NAME.into());
        }
    }
    if mode == Mode::Native {
        if let (Some(g), Some(spec)) = (plan.gang, pod.spec.as_mut()) {
            spec.scheduling_group = Some(PodSchedulingGroup {
                pod_group_name: Some(w.gangs[g].name.clone()),
            });
        }
    }
    pod
}

pub fn pod_group_object(g: &GangPlan) -> PodGroup {
    PodGroup {
        metadata: ObjectMeta {
            name: Some(g.name.clone()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: PodGroupSpec {
            scheduling_policy: PodGroupSchedulingPolicy {
                gang: Some(GangSchedulingPolicy {
                    min_count: g.members.len() as i32,
                }),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

// `cargo test` also builds this module into the `harness = false` bench, where tests do not
// run and their helpers go unused; `e2e_throughput_units` runs them.
#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;

    /// The smoke's parameters (these tests assume no E2E_* variables are set).
    fn smoke() -> Params {
        Params::from_env(true).unwrap()
    }

    fn millicores(cpu: &str) -> usize {
        match cpu.strip_suffix('m') {
            Some(m) => m.parse().unwrap(),
            None => cpu.parse::<usize>().unwrap() * 1000,
        }
    }

    #[test]
    fn every_pod_is_created_once_and_a_gangs_members_in_order() {
        for p in [smoke(), Params::from_env(false).unwrap()] {
            let w = build_workload(&p);
            assert_eq!(w.pods.len(), p.pods);
            let mut seen = w.order.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..p.pods).collect::<Vec<_>>());
            for g in &w.gangs {
                assert!((p.gang_min..=p.gang_max).contains(&g.members.len()));
                let at: Vec<usize> = g
                    .members
                    .iter()
                    .map(|m| w.order.iter().position(|o| o == m).unwrap())
                    .collect();
                assert!(at.windows(2).all(|x| x[0] < x[1]), "{}: {at:?}", g.name);
            }
            let plain = w.plain() as f64 / p.pods as f64;
            assert!(
                (plain - p.plain_percent as f64 / 100.0).abs() < 0.1,
                "{plain}"
            );
            assert_eq!(build_workload(&p).order, w.order, "deterministic");
        }
    }

    /// What makes the smoke's "no partial gang" and "no overcommit" checks able to fail.
    #[test]
    fn the_smoke_workload_contends_for_every_slot() {
        let p = smoke();
        let w = build_workload(&p);
        let slot = p.cpu_min as usize;
        assert_eq!(p.cpu_min, p.cpu_max, "one pod size: any packing completes");
        let slots_per_node = millicores(&p.node_cpu) / slot;
        let requested: usize = w.pods.iter().map(|x| x.cpu_milli as usize).sum();
        // Every slot of every node is taken in the end: a seat given twice overcommits a node.
        assert_eq!(requested, p.nodes * slots_per_node * slot);
        // Until the late nodes come, at most half the pods can have a node: some must wait,
        // and a scheduler that binds members one by one leaves gangs partly bound...
        let early_slots = (p.nodes - p.late_nodes) * slots_per_node;
        assert!(2 * early_slots <= p.pods, "{early_slots} early slots");
        let (smallest, largest) = w.gang_size_range();
        assert!(smallest > 1 && w.gangs.len() >= 4, "several gangs compete");
        assert!(largest > slots_per_node, "a gang needs more than one node");
        assert!(
            w.gangs
                .iter()
                .any(|g| g.members.len() % slots_per_node != 0),
            "gang sizes leave fragments of nodes"
        );
        // ...for longer than the grace the check allows, by several once-a-second samples.
        assert!(p.late_nodes_after >= p.grace + std::time::Duration::from_secs(3));
        // And the smoke stays short.
        assert!(p.timeout <= std::time::Duration::from_secs(60));
    }
}
