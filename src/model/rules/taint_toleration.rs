//! kube-scheduler's TaintToleration filter: a node's `NoSchedule` and `NoExecute` taints must
//! each be tolerated by one of the pod's tolerations (`PreferNoSchedule` never filters; the
//! cluster adapter drops those taints on reading).

use super::Reason;
use crate::model::inputs::objects::{NodeInfo, PodInfo, Taint, Toleration, TolerationOperator};

impl Toleration {
    /// `v1.Toleration.ToleratesTaint`: an empty effect matches every effect, an empty key every
    /// key; `Equal` (or no operator) compares values — also when the key is empty — and `Exists`
    /// ignores them. `Lt`/`Gt` never tolerate: their feature gate
    /// (`TaintTolerationComparisonOperators`, alpha) is off by default in v1.37.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if !self.effect.is_empty() && self.effect != taint.effect {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Equal => self.value == taint.value,
            TolerationOperator::Exists => true,
            TolerationOperator::Unsupported => false,
        }
    }
}

/// Whether some toleration of the list tolerates `taint` (`TolerationsTolerateTaint`).
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// The first of the node's `NoSchedule`/`NoExecute` taints the pod does not tolerate.
pub fn untolerated_taint<'n>(node: &'n NodeInfo, pod: &PodInfo) -> Option<&'n Taint> {
    node.taints
        .iter()
        .filter(|t| blocks_scheduling(t))
        .find(|t| !tolerated(&pod.tolerations, t))
}

/// `helper.DoNotScheduleTaintsFilterFunc`: only these effects keep a pod off a node.
fn blocks_scheduling(taint: &Taint) -> bool {
    taint.effect == "NoSchedule" || taint.effect == "NoExecute"
}

pub fn check(node: &NodeInfo, pod: &PodInfo) -> Result<(), Reason> {
    match untolerated_taint(node, pod) {
        Some(_) => Err(Reason::UntoleratedTaint),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
