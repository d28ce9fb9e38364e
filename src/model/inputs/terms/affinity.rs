//! A required pod affinity or anti-affinity term (`podAffinityTerm`), with the namespaces it
//! considers resolved as kube-scheduler's `getNamespacesFromPodAffinityTerm` does. Which pods
//! it matches, and the InterPodAffinity filter, are `rules::inter_pod_affinity`.

use super::labels::LabelSelector;

/// One required `podAffinityTerm`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodAffinityTerm {
    pub selector: LabelSelector,
    /// Namespaces whose pods the term considers; the owning pod's own namespace when the term
    /// names neither `namespaces` nor a `namespaceSelector`.
    pub namespaces: Vec<String>,
    /// `Nothing` when absent; `{}` selects every namespace.
    pub namespace_selector: LabelSelector,
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Builds a term of a pod in `own_namespace` (`getNamespacesFromPodAffinityTerm`).
    pub fn new(
        own_namespace: &str,
        selector: LabelSelector,
        namespaces: Vec<String>,
        namespace_selector: Option<LabelSelector>,
        topology_key: &str,
    ) -> Self {
        let namespaces = if namespaces.is_empty() && namespace_selector.is_none() {
            vec![own_namespace.to_string()]
        } else {
            namespaces
        };
        PodAffinityTerm {
            selector,
            namespaces,
            namespace_selector: namespace_selector.unwrap_or(LabelSelector::Nothing),
            topology_key: topology_key.to_string(),
        }
    }
}
