//! What two schedulers sharing the nodes cost (configuration (d), `muster-second`): neither sees
//! the other's plans, so each may bind into room the other has just taken. With the bench's fake
//! nodes nothing refuses such a binding; a kubelet would, at admission (`OutOfcpu`). This counts
//! the pods a kubelet admitting them in binding order would refuse.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use anyhow::{anyhow, Result};
use k8s_openapi::api::core::v1::Pod;
use muster_harness::k8s;

use crate::workload::Workload;

/// Pods a kubelet would refuse, and on how many nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals {
    pub pods: usize,
    pub nodes: usize,
}

/// `"4"`, `"3500m"`, `"0.5"` as millicores.
pub fn cpu_milli(quantity: &str) -> Result<u64> {
    let q = quantity.trim();
    let bad = || anyhow!("E2E_NODE_CPU={quantity:?} is not a CPU quantity");
    if let Some(m) = q.strip_suffix('m') {
        return m.parse().map_err(|_| bad());
    }
    let cores: f64 = q.parse().map_err(|_| bad())?;
    if !cores.is_finite() || cores < 0.0 {
        return Err(bad());
    }
    Ok((cores * 1000.0).round() as u64)
}

/// Per node, admits the workload's pods bound there in the order the bench saw them bound
/// (`bound_at`, indexed like `w.pods`) while their CPU fits `node_cpu_milli`; the rest are what
/// a kubelet would refuse. Pods outside the workload, or bound before the watch saw them, are
/// admitted first.
pub fn kubelet_refusals(
    w: &Workload,
    pods: &[Pod],
    bound_at: &[Option<Instant>],
    node_cpu_milli: u64,
) -> Refusals {
    let index: HashMap<&str, usize> = w
        .pods
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();
    let mut by_node: BTreeMap<&str, Vec<(Option<Instant>, u64)>> = BTreeMap::new();
    for p in pods {
        let (Some(node), Some(&i)) = (k8s::pod_node(p), index.get(k8s::pod_name(p))) else {
            continue;
        };
        by_node
            .entry(node)
            .or_default()
            .push((bound_at[i], u64::from(w.pods[i].cpu_milli)));
    }
    let mut out = Refusals::default();
    for list in by_node.values_mut() {
        // None (not seen bound) sorts first: admitted before the others.
        list.sort_by_key(|(at, _)| *at);
        let mut used = 0;
        let mut refused = 0;
        for (_, cpu) in list.iter() {
            if used + cpu <= node_cpu_milli {
                used += cpu;
            } else {
                refused += 1;
            }
        }
        if refused > 0 {
            out.pods += refused;
            out.nodes += 1;
        }
    }
    out
}

#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;
    use crate::workload::PodPlan;
    use std::time::Duration;

    fn pod(name: &str, node: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        if let Some(n) = node {
            p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
                node_name: Some(n.into()),
                ..Default::default()
            });
        }
        p
    }

    #[test]
    fn cpu_quantities() {
        assert_eq!(cpu_milli("4").unwrap(), 4000);
        assert_eq!(cpu_milli("3500m").unwrap(), 3500);
        assert_eq!(cpu_milli("0.5").unwrap(), 500);
        assert!(cpu_milli("four").is_err());
        assert!(cpu_milli("-1").is_err());
    }

    #[test]
    fn the_pods_bound_last_on_a_full_node_are_refused() {
        let plan = |name: &str, cpu| PodPlan {
            name: name.into(),
            gang: None,
            cpu_milli: cpu,
        };
        let w = Workload {
            pods: vec![
                plan("a", 600),
                plan("b", 600),
                plan("c", 300),
                plan("d", 900),
            ],
            gangs: vec![],
            order: vec![],
            topology: None,
            dra: None,
        };
        let t0 = Instant::now();
        let at = |s| Some(t0 + Duration::from_secs(s));
        // n1 (1000m): a at 1 s fits, b at 2 s does not, c at 3 s fits (900m used).
        // n2: d alone fits.
        let pods = [
            pod("a", Some("n1")),
            pod("b", Some("n1")),
            pod("c", Some("n1")),
            pod("d", Some("n2")),
            pod("x", Some("n2")),
            pod("unbound", None),
        ];
        let r = kubelet_refusals(&w, &pods, &[at(1), at(2), at(3), at(1)], 1000);
        assert_eq!(r, Refusals { pods: 1, nodes: 1 });
        let r = kubelet_refusals(&w, &pods, &[at(1), at(2), at(3), at(1)], 1500);
        assert_eq!(r, Refusals::default());
    }
}
