use super::*;
use crate::model::inputs::objects::{Taint, Toleration, TolerationOperator};
use crate::model::inputs::terms::NodeSelectorTerm;
use crate::model::rules::fixtures::{node, pod, PodRulesBuilder};

#[test]
fn node_admits_applies_cordon_taints_and_selector() {
    let mut n = node("n1");
    n.labels.insert("pool".into(), "a".into());
    let mut p = pod("p");
    assert!(node_admits(&n, &p));
    p.node_selector = vec![("pool".into(), "b".into())];
    assert!(!node_admits(&n, &p), "nodeSelector");
    p.node_selector.clear();
    let pool_b = NodeSelectorTerm::parse([("pool", "In", &["b".to_string()][..])], []);
    let mut affine = PodRulesBuilder::default()
        .node_affinity(vec![pool_b])
        .on(p.clone());
    assert!(!node_admits(&n, &affine), "required node affinity");
    n.labels.insert("pool".into(), "b".into());
    assert!(node_admits(&n, &affine));
    affine.node_selector = vec![("pool".into(), "a".into())];
    assert!(
        !node_admits(&n, &affine),
        "nodeSelector and affinity both hold"
    );
    n.taints.push(Taint {
        key: "gpu".into(),
        value: String::new(),
        effect: "NoSchedule".into(),
    });
    assert!(!node_admits(&n, &p), "untolerated taint");
    p.add_toleration(Toleration {
        key: String::new(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: String::new(),
    });
    n.unschedulable = true;
    assert!(
        node_admits(&n, &p),
        "tolerating everything tolerates the cordon too (NodeUnschedulable)"
    );
}
