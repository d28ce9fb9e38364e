//! Pure statistics over the samples: nearest-rank percentiles and scheduler_perf's
//! per-second throughput.

/// One sample of the once-a-second sampler.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds since the first pod was created.
    pub t: f64,
    /// Pods seen bound so far.
    pub bound: usize,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Dist {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// Nearest-rank percentiles (scheduler_perf: `sorted[ceil(n*p/100)-1]`).
pub fn dist(mut v: Vec<f64>) -> Option<Dist> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let at = |p: usize| v[((n * p).div_ceil(100)).clamp(1, n) - 1];
    Some(Dist {
        n,
        p50: at(50),
        p90: at(90),
        p99: at(99),
        max: v[n - 1],
        mean: v.iter().sum::<f64>() / n as f64,
    })
}

/// scheduler_perf's throughput collector on our samples: skip until something is bound, skip
/// the first sample, merge intervals in which nothing got bound into the next non-empty one.
pub fn throughput_samples(samples: &[Sample]) -> Vec<f64> {
    let mut out = Vec::new();
    let mut started = false;
    let (mut last_n, mut last_t, mut skipped) = (0usize, 0f64, 0usize);
    for s in samples {
        if s.bound == 0 {
            continue;
        }
        if !started {
            started = true;
            last_n = s.bound;
            last_t = s.t;
            continue;
        }
        let new = s.bound - last_n;
        if new == 0 {
            skipped += 1;
            continue;
        }
        let tput = new as f64 / (s.t - last_t);
        out.extend(std::iter::repeat_n(tput, skipped + 1));
        last_n = s.bound;
        last_t = s.t;
        skipped = 0;
    }
    out
}

/// The lower median of `items` by `key` (of an even count, the smaller middle one; equal keys
/// keep their order): the run the report shows for a configuration that ran several rounds.
pub fn lower_median_by<T>(mut items: Vec<T>, key: impl Fn(&T) -> f64) -> Option<T> {
    if items.is_empty() {
        return None;
    }
    items.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let middle = (items.len() - 1) / 2;
    Some(items.swap_remove(middle))
}

// `cargo test` also builds this module into the `harness = false` bench, where tests do not
// run and their helpers go unused; `e2e_throughput_units` runs them.
#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;

    fn samples(points: &[(f64, usize)]) -> Vec<Sample> {
        points
            .iter()
            .map(|&(t, bound)| Sample { t, bound })
            .collect()
    }

    /// scheduler_perf (test/integration/scheduler_perf, `DataItem` percentiles):
    /// `sorted[ceil(n*p/100)-1]`, no interpolation.
    #[test]
    fn percentiles_are_nearest_rank_as_in_scheduler_perf() {
        // 1..=100 in a scrambled order.
        let v: Vec<f64> = (0..100).map(|i| ((i * 37) % 100 + 1) as f64).collect();
        let d = dist(v).unwrap();
        assert_eq!(d.n, 100);
        assert_eq!((d.p50, d.p90, d.p99, d.max), (50.0, 90.0, 99.0, 100.0));
        assert!((d.mean - 50.5).abs() < 1e-9, "{}", d.mean);

        let d = dist(vec![3.0, 1.0, 2.0]).unwrap();
        // ceil(3*50/100) = 2 → the 2nd smallest; ceil(3*90/100) = 3 → the largest.
        assert_eq!((d.p50, d.p90, d.p99, d.max), (2.0, 3.0, 3.0, 3.0));

        let d = dist(vec![7.0]).unwrap();
        assert_eq!((d.n, d.p50, d.p99, d.mean), (1, 7.0, 7.0, 7.0));
    }

    #[test]
    fn no_values_have_no_percentiles() {
        assert!(dist(Vec::new()).is_none());
    }

    /// scheduler_perf's throughputCollector: samples before the first bound pod and the first
    /// non-empty sample are skipped; each later interval gives pods bound / seconds.
    #[test]
    fn throughput_starts_after_the_first_sample_with_pods_bound() {
        let s = samples(&[(1.0, 0), (2.0, 0), (3.0, 5), (4.0, 15), (5.0, 35)]);
        assert_eq!(throughput_samples(&s), vec![10.0, 20.0]);
        assert!(throughput_samples(&samples(&[(1.0, 0), (2.0, 4)])).is_empty());
    }

    /// An interval in which nothing got bound is not a zero: its time goes to the next
    /// interval that bound something, and that rate is recorded once per interval it covers.
    #[test]
    fn throughput_spreads_empty_intervals_over_the_next_rate() {
        let s = samples(&[(1.0, 10), (2.0, 10), (3.0, 10), (4.0, 40), (5.0, 41)]);
        assert_eq!(throughput_samples(&s), vec![10.0, 10.0, 10.0, 1.0]);
        // Trailing empty intervals are dropped: there is no next rate to give them.
        let s = samples(&[(1.0, 10), (2.0, 20), (3.0, 20)]);
        assert_eq!(throughput_samples(&s), vec![10.0]);
    }

    #[test]
    fn the_median_run_is_the_lower_middle_one() {
        let key = |x: &(char, f64)| x.1;
        let odd = vec![('a', 3.0), ('b', 1.0), ('c', 2.0)];
        assert_eq!(lower_median_by(odd, key), Some(('c', 2.0)));
        let even = vec![('a', 4.0), ('b', 1.0), ('c', 3.0), ('d', 2.0)];
        assert_eq!(lower_median_by(even, key), Some(('d', 2.0)));
        let ties = vec![('a', 1.0), ('b', 1.0), ('c', 1.0)];
        assert_eq!(lower_median_by(ties, key), Some(('b', 1.0)));
        assert_eq!(lower_median_by(Vec::<(char, f64)>::new(), key), None);
    }
}
