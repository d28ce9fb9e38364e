use std::time::Duration;

use super::*;

// ---------------------------------------------------------------- competing gangs

#[test]
fn two_gangs_never_each_hold_half_of_what_both_need() {
    // Room for two 1000m pods. Gangs A and B each need two.
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("a{i}")).cpu(1000).gang("a", 2).build())
        .collect();
    let b: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("b{i}")).cpu(1000).gang("b", 2).build())
        .collect();
    w.add(&[&a[0], &a[1], &b[0], &b[1]]);
    // Interleaved, as kube-scheduler would: a0 binds, then b0 tries, then a1.
    wait_message(&w.bind(&a[0], "n1"));
    let (ok, reasons) = w.filter(&b[0]);
    assert!(ok.is_empty());
    assert_eq!(reasons, vec!["gang ml/b: 0 of 2 members fit"]);
    assert!(matches!(w.bind(&b[0], "n2"), BindDecision::Reject(_)));
    let d = w.bind(&a[1], "n2");
    assert_eq!(names(&d), vec!["a0@n1", "a1@n2"]);
    w.confirm(&d);
    assert_eq!(w.state("a"), "placed");
    assert_eq!(w.state("b"), "waiting");

    // Delete gang A: B fits.
    w.table.remove_pod(&a[0].uid);
    w.table.remove_pod(&a[1].uid);
    assert_eq!(w.filter(&b[0]).0.len(), 1);
}

#[test]
fn older_gang_goes_first_but_a_gang_that_cannot_fit_blocks_nobody() {
    let mut w = World::new(&[node("n1", 1000)]);
    let old: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("old{i}"))
                .cpu(500)
                .created(1)
                .gang("old", 2)
                .build()
        })
        .collect();
    let young: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("young{i}"))
                .cpu(500)
                .created(2)
                .gang("young", 2)
                .build()
        })
        .collect();
    let huge: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("huge{i}"))
                .cpu(5000)
                .created(0)
                .gang("huge", 2)
                .build()
        })
        .collect();
    w.add(&[&old[0], &old[1], &young[0], &young[1], &huge[0], &huge[1]]);
    // All three are being tried by the scheduler.
    w.filter(&huge[0]);
    w.filter(&old[0]);
    let (ok, reasons) = w.filter(&young[0]);
    assert!(ok.is_empty(), "the older gang that fits is served first");
    assert_eq!(reasons, vec!["gang ml/young: 0 of 2 members fit"]);
    assert_eq!(
        w.filter(&old[1]).0,
        vec!["n1"],
        "huge (oldest) cannot fit and does not block old"
    );

    // Once the older gang stops competing (no attempts within the window), young may go.
    w.advance(ModelConfig::default().active_window + Duration::from_secs(1));
    w.filter(&huge[0]);
    assert_eq!(w.filter(&young[0]).0, vec!["n1"]);
}

#[test]
fn higher_priority_gang_goes_before_an_older_one() {
    let mut w = World::new(&[node("n1", 1000)]);
    let low: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("low{i}"))
                .cpu(500)
                .created(1)
                .gang("low", 2)
                .build()
        })
        .collect();
    let high: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("high{i}"))
                .cpu(500)
                .created(5)
                .priority(100)
                .gang("high", 2)
                .build()
        })
        .collect();
    w.add(&[&low[0], &low[1], &high[0], &high[1]]);
    w.filter(&high[0]);
    assert!(w.filter(&low[0]).0.is_empty());
    assert_eq!(w.filter(&high[1]).0, vec!["n1"]);
}

#[test]
fn plain_pods_cannot_take_seats_reserved_for_a_gang() {
    let mut w = World::new(&[node("n1", 1000)]);
    let g: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("g{i}")).cpu(400).gang("g", 2).build())
        .collect();
    w.add(&[&g[0], &g[1]]);
    wait_message(&w.bind(&g[0], "n1"));
    let plain = pod("plain").cpu(300).build();
    w.add(&[&plain]);
    let (ok, reasons) = w.filter(&plain);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec!["insufficient cpu: requested 300m, free 200m (some of it is reserved for gangs)"]
    );
    assert!(matches!(
        w.bind(&plain, "n1"),
        BindDecision::Reject(BindRejection::NoRoom { .. })
    ));
    let small = pod("small").cpu(200).build();
    w.add(&[&small]);
    assert_eq!(w.filter(&small).0, vec!["n1"]);
}

/// DynamicResources for the competing gangs ahead: an older gang that needs every GPU of n1
/// and n2 (4 each) is planned before a younger one with the same claims, so the younger one
/// is not planned onto the devices the older one needs (there is CPU enough for both).
#[test]
fn dynamic_resources_a_gang_ahead_takes_the_devices_its_claims_need() {
    let mut w = World::new(&[node("n1", 8000), node("n2", 8000)]);
    dra_devices(&mut w.table, &["n1", "n2"]);
    let member = |w: &mut World, name: &str, created: i64| {
        let gang = &name[..name.len() - 1];
        let p = pod(name).cpu(100).created(created).gang(gang, 2).build();
        with_dra_claim(&mut w.table, p)
    };
    let old = [member(&mut w, "old0", 1), member(&mut w, "old1", 1)];
    let young = [member(&mut w, "young0", 2), member(&mut w, "young1", 2)];
    w.add(&[&old[0], &old[1], &young[0], &young[1]]);
    w.filter(&old[0]);
    let (ok, reasons) = w.filter(&young[0]);
    assert!(
        ok.is_empty(),
        "the older gang's devices are not offered: {ok:?}"
    );
    assert_eq!(
        reasons,
        vec!["gang ml/young: 2 members need 4 devices of class gpu.example.com each; nodes with 4 free: 2; devices of class gpu.example.com are reserved for 1 gang ahead of this one"]
    );
    assert_eq!(w.filter(&old[0]).0.len(), 1, "the older gang fits");

    // Once the older gang stops competing, the younger one may go.
    w.advance(ModelConfig::default().active_window + Duration::from_secs(1));
    assert_eq!(w.filter(&young[0]).0.len(), 1);
}
