use super::*;

#[test]
fn diagnosis_reads_like_kube_scheduler() {
    let mut d = Diagnosis::default();
    d.record(Err(Reason::PodAntiAffinity));
    d.record(Err(Reason::PodAntiAffinity));
    d.record(Err(Reason::UntoleratedTaint));
    d.record(Ok(()));
    assert_eq!(
        d.to_string(),
        "1/4 nodes are available: 1 node(s) had untolerated taint(s), \
         2 node(s) didn't match pod anti-affinity rules."
    );
    assert_eq!(d.statically_possible(), 3);
    assert_eq!(Diagnosis::default().to_string(), "0/0 nodes are available.");
    assert_eq!(
        Reason::ExistingPodsAntiAffinity.plugin(),
        "InterPodAffinity"
    );
}
