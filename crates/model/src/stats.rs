//! The arithmetic of every summary: running moments, quantiles and Jain's index, one
//! definition each. The simulator streams into them; the server and os worlds feed them their
//! per-job tables; the results agree to the last bit because the code is the same.

use hdrhistogram::Histogram;

/// Running mean and variance (Welford), and the maximum.
#[derive(Clone, Copy, Debug, Default)]
pub struct Moments {
    pub n: u64,
    pub mean: f64,
    m2: f64,
    pub max: f64,
}

impl Moments {
    #[inline]
    pub fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
        if self.n == 1 || x > self.max {
            self.max = x;
        }
    }

    /// Sample standard deviation (divisor n - 1); NaN for fewer than two values.
    pub fn std(&self) -> f64 {
        if self.n < 2 {
            f64::NAN
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }

    /// Jain's fairness index (sum x)^2 / (n sum x^2) = 1 / (1 + cv^2), cv with divisor n.
    /// NaN for no values, or when every value is 0 (nothing was shared).
    pub fn jain(&self) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let var_n = self.m2 / self.n as f64;
        let square = self.mean * self.mean;
        if square + var_n == 0.0 {
            return f64::NAN;
        }
        square / (square + var_n)
    }

    pub fn mean_or_nan(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.mean
        }
    }

    pub fn max_or_nan(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.max
        }
    }
}

/// Jain's index of the finite values (see [`Moments::jain`]).
pub fn jain(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut m = Moments::default();
    values
        .into_iter()
        .filter(|x| x.is_finite())
        .for_each(|x| m.add(x));
    m.jain()
}

/// Exact quantiles from stored values up to `EXACT_LIMIT` values; beyond that an HdrHistogram
/// (3 significant digits) keeps memory bounded for runs of any length.
#[derive(Default)]
pub struct Quantiles {
    values: Vec<f64>,
    hist: Option<Histogram<u64>>,
}

pub const EXACT_LIMIT: usize = 4_000_000;
/// HdrHistogram records integers: values are kept in units of 1e-6.
pub(crate) const SCALE: f64 = 1e6;

/// The histogram count of a scaled value: `x.round().max(0.0) as u64` for every x (NaN and
/// infinities included), without a call to libm's `round`, which x86-64 without SSE4.1 makes
/// for every recorded value (five per simulated job).
#[inline]
pub(crate) fn count_of(x: f64) -> u64 {
    // NaN, zeros and negatives: 0, as round() then max(0.0) gives.
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    // From 2^52 on every f64 is whole (and the cast saturates, as it does after round()).
    if x >= 4_503_599_627_370_496.0 {
        return x as u64;
    }
    let whole = x as u64;
    // Exact below 2^52; round() takes halves away from zero.
    let fraction = x - whole as f64;
    whole + u64::from(fraction >= 0.5)
}
/// Largest value the histogram tracks exactly (in units of 1e-6: 1e12 time units); larger
/// values are recorded as this one.
pub(crate) const HIGHEST: u64 = 1_000_000_000_000_000_000;

impl Quantiles {
    #[inline(always)]
    pub fn record(&mut self, v: f64) {
        if let Some(h) = &mut self.hist {
            h.saturating_record(count_of(v * SCALE));
            return;
        }
        self.values.push(v);
        if self.values.len() >= EXACT_LIMIT {
            self.spill_to_histogram();
        }
    }

    /// Past `EXACT_LIMIT` values: from now on an HdrHistogram holds them.
    #[cold]
    #[inline(never)]
    fn spill_to_histogram(&mut self) {
        // Bounds given explicitly: `Histogram::new` starts small, and saturating records
        // would clamp to its initial range instead of growing it.
        let mut h = Histogram::<u64>::new_with_bounds(1, HIGHEST, 3).expect("valid bounds");
        for v in self.values.drain(..) {
            h.saturating_record(count_of(v * SCALE));
        }
        self.values.shrink_to_fit();
        self.hist = Some(h);
    }

    /// Quantiles at each of `ps` (in 0..=1); NaN when empty. Exact values use the lower
    /// empirical quantile: the ceil(p n)-th smallest (numpy's `inverted_cdf`).
    pub fn quantiles(&mut self, ps: &[f64]) -> Vec<f64> {
        if let Some(h) = &self.hist {
            return ps
                .iter()
                .map(|p| h.value_at_quantile(*p) as f64 / SCALE)
                .collect();
        }
        let n = self.values.len();
        if n == 0 {
            return vec![f64::NAN; ps.len()];
        }
        let rank = |p: f64| ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        // Ranks in ascending order: after selecting rank k, every value at or above k's place
        // is >= it, so the next rank (the same or larger) is selected among those alone.
        let mut order: Vec<usize> = (0..ps.len()).collect();
        order.sort_by_key(|&i| rank(ps[i]));
        let mut out = vec![f64::NAN; ps.len()];
        let mut lo = 0;
        for i in order {
            let k = rank(ps[i]);
            out[i] = *self.values[lo..]
                .select_nth_unstable_by(k - lo, f64::total_cmp)
                .1;
            lo = k;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_of_is_round_then_max_then_cast() {
        let reference = |x: f64| x.round().max(0.0) as u64;
        let mut edges = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            -0.5,
            -0.4,
            0.49999999999999994,
            1e-300,
            -1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9_007_199_254_740_993.0,
            1.8446744073709552e19,
            1e30,
            f64::MAX,
            f64::MIN_POSITIVE,
        ];
        // Halves and their neighbours, and a spread of magnitudes.
        for k in 0..2000u64 {
            let h = k as f64 + 0.5;
            edges.extend([
                h,
                f64::from_bits(h.to_bits() - 1),
                f64::from_bits(h.to_bits() + 1),
            ]);
        }
        let mut z = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            z = z
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            edges.push(f64::from_bits(z >> 2) * if z & 1 == 0 { 1.0 } else { -1.0 });
            edges.push((z >> 11) as f64 / (1u64 << 20) as f64);
        }
        for x in edges {
            assert_eq!(count_of(x), reference(x), "x = {x:e}");
        }
    }

    #[test]
    fn quantiles_stay_right_after_switching_to_the_histogram() {
        // Past EXACT_LIMIT values the quantiles come from an HdrHistogram with 3 significant
        // digits: values i / 1000 for i = 1..=5M have p50 = 2500 and p99 = 4950 exactly.
        let mut q = Quantiles::default();
        let n = 5_000_000;
        for i in 1..=n {
            q.record(i as f64 / 1000.0);
        }
        let got = q.quantiles(&[0.5, 0.99]);
        assert!((got[0] / 2500.0 - 1.0).abs() < 1e-3, "{got:?}");
        assert!((got[1] / 4950.0 - 1.0).abs() < 1e-3, "{got:?}");
    }

    #[test]
    fn exact_quantiles_are_the_lower_empirical_ones() {
        let mut q = Quantiles::default();
        for v in [5.0, 1.0, 4.0, 2.0, 3.0] {
            q.record(v);
        }
        assert_eq!(
            q.quantiles(&[0.2, 0.5, 0.99, 1.0]),
            vec![1.0, 3.0, 5.0, 5.0]
        );
        // Any order of ranks, repeated ranks: the same values.
        assert_eq!(
            q.quantiles(&[1.0, 0.2, 0.99, 0.5]),
            vec![5.0, 1.0, 5.0, 3.0]
        );
        let mut big = Quantiles::default();
        let values: Vec<f64> = (0..1001).map(|i| ((i * 7919) % 1001) as f64).collect();
        values.iter().for_each(|&v| big.record(v));
        assert_eq!(big.quantiles(&[0.99, 0.5, 0.95]), vec![990.0, 500.0, 950.0]);
    }

    #[test]
    fn moments_and_jain_by_hand() {
        let mut m = Moments::default();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            m.add(x);
        }
        // Mean 5, population variance 4, sample variance 32/7.
        assert_eq!(m.mean, 5.0);
        assert!((m.std() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert!((m.jain() - 25.0 / 29.0).abs() < 1e-12);
        assert_eq!(m.max, 9.0);
        assert!(Moments::default().std().is_nan());
        assert!(jain([0.0, 0.0]).is_nan());
        assert!(jain([]).is_nan());
        assert_eq!(jain([3.0, f64::NAN, 3.0]), 1.0);
        let mut neg = Moments::default();
        neg.add(-2.0);
        assert_eq!(neg.max, -2.0);
    }
}
