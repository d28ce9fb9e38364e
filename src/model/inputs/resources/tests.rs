use super::*;

fn gpu(n: i64) -> Resources {
    let mut r = Resources::cpu(100);
    r.pods = 1;
    r.set_extended("nvidia.com/gpu", n);
    r
}

#[test]
fn arithmetic_keeps_extended_sorted_and_drops_zeroes() {
    let mut a = gpu(2);
    a.set_extended("example.com/fpga", 1);
    assert_eq!(a.extended[0].0.as_ref(), "example.com/fpga");
    a.sub(&gpu(2));
    assert_eq!(a.extended.len(), 1, "{a:?}");
    assert_eq!(a.cpu_milli, 0);
    a.add(&gpu(3));
    assert_eq!(a.extended("nvidia.com/gpu"), 3);
}

#[test]
fn shortfall_names_the_first_missing_resource() {
    let mut free =
        Resources::from_quantities([("cpu", "1"), ("memory", "1Gi"), ("pods", "10")]).unwrap();
    assert_eq!(free.shortfall(&Resources::cpu(500)), None);
    let short = free.shortfall(&gpu(1)).unwrap();
    assert_eq!(
        short.to_string(),
        "insufficient nvidia.com/gpu: requested 1, free 0"
    );
    free.set_extended("nvidia.com/gpu", 4);
    assert!(gpu(4).fits_in(&free));
    assert!(!gpu(5).fits_in(&free));
    let short = free.shortfall(&Resources::cpu(1001)).unwrap();
    assert_eq!(
        short.to_string(),
        "insufficient cpu: requested 1001m, free 1000m"
    );
}

#[test]
fn shortfall_against_counts_credit_and_taken() {
    let alloc = Resources::cpu(1000);
    let used = Resources::cpu(600);
    let seat = Resources::cpu(300);
    assert!(shortfall_against(&Resources::cpu(200), &alloc, None, &[&used, &seat]).is_some());
    assert!(shortfall_against(&Resources::cpu(100), &alloc, None, &[&used, &seat]).is_none());
    // Our own seat is credited back: 1000 + 300 - 600 - 300 = 400.
    assert!(
        shortfall_against(&Resources::cpu(400), &alloc, Some(&seat), &[&used, &seat]).is_none()
    );
}

#[test]
fn zero_requests_fit_even_on_an_exhausted_node() {
    let free = Resources::default();
    assert!(Resources::default().fits_in(&free));
}
