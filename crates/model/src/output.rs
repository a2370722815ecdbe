//! Output analysis of one run, for every world: where the warm-up ends, and 95% intervals of
//! the mean and of quantiles from observations that are correlated (each job's response
//! depends on the jobs before it).
//!
//! - **Warm-up**: MSER-5 (White 1997; Franklin and White 2008, as in JMT): cut the series into
//!   batches of 5, and truncate the `d` first batches that minimise the squared standard error
//!   of the mean of the rest, `sum_{j>d} (z_j - mean_d)^2 / (k - d)^2`, searching `d` in the
//!   first half of the series (past it the statistic is too noisy to mean anything). A
//!   minimum in the last fifth of that range means the transient may not be over: the
//!   series is too short to tell (`valid = false`).
//! - **Interval of the mean**: batch means whose batch size grows until batches are
//!   uncorrelated (after Law and Carson 1979, and Fishman's LBATCH). The series is kept as at
//!   most [`MAX_GROUPS`] group means (pairs merge when full, so memory is bounded for runs of
//!   any length). The batch size is the smallest at which at least [`TEST_BATCHES`] batches
//!   show no lag-1 autocorrelation (one-sided test at 5%); the interval then uses batches
//!   [`SPREAD`] times longer, whose correlation is smaller still, and Student's t with
//!   `batches - 1` degrees of freedom, adjusted for the skewness of the batch means (Willink
//!   2005, as in Skart: Tafazzoli, Steiger and Wilson 2011). Response times are skewed to the
//!   right, so a run whose mean is low by chance also has a small spread; the plain t interval
//!   then misses below (M/D/1 PS at load 0.9: 31 of 38 misses). The skewness is estimated on
//!   the 80-160 tested batches and scaled to the interval's longer batches (`1/sqrt(spread)`,
//!   as for a mean of independent batches). Too short a run for that: the interval is
//!   computed from the batches there are, unadjusted, and marked not `uncorrelated`.
//! - **Interval of a quantile**: sectioning (Asmussen and Glynn 2007, IV.5): the same quantile
//!   in each of `k` consecutive sections, `q +- t_{k-1} s_k / sqrt(k)`, centred on the
//!   quantile of the whole run. Sections are [`QUANTILE_SECTIONS`] times as long as the mean's
//!   batches: a tail is exceeded in rare long busy periods, so its indicator stays correlated
//!   far longer than the response itself (M/M/1 at load 0.9 over 300,000 jobs: sections as long
//!   as the mean's batches covered the p99 in 85% of runs, four times as long in 93.5%).
//!   Sections are HdrHistograms with 2 significant digits (a section's quantile within 1%,
//!   usually far inside the spread between sections; 27 KB each), merged in pairs like the
//!   groups. Where the sections agree to within that resolution (a far tail, p99.9 of 20,000
//!   responses: every section in one bucket), the interval is not narrower than it: its half-
//!   width is at least [`SECTION_RESOLUTION`] of the quantile (half the widest bucket); a
//!   section holding fewer than 4,096 values keeps them as a list instead, and its quantiles
//!   are read from a histogram of the same counts.

use hdrhistogram::Histogram;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::stats::{count_of, Moments, HIGHEST, SCALE};

/// Coverage of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Group means kept of a series; when full, neighbours merge in pairs.
pub const MAX_GROUPS: usize = 1024;
/// Groups per quantile section (sections = groups / 16, at most 64).
const GROUPS_PER_SECTION: usize = 16;
/// Batches at which the lag-1 autocorrelation is tested.
pub const TEST_BATCHES: usize = 80;
/// The interval's batches are this many times longer than the tested size.
pub const SPREAD: usize = 16;
/// Fewest batches an interval is computed from.
pub const MIN_BATCHES: usize = 10;
/// A quantile's sections are at least this many times as long as the mean's batches.
pub const QUANTILE_SECTIONS: u64 = 4;
/// Half the widest relative bucket of a section's histogram (2 significant digits: 256
/// sub-buckets, a bucket at most 1/128 of its values): the least half-width of a quantile's
/// interval, relative to the quantile.
pub const SECTION_RESOLUTION: f64 = 1.0 / 256.0;

/// Where the warm-up of a series ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Truncation {
    /// Observations to discard (a multiple of 5).
    pub discard: usize,
    /// False when the minimum lies at the end of the searched half: too short to tell.
    pub valid: bool,
}

/// MSER-5 truncation of `series` (observations in the order they were produced).
pub fn mser5(series: &[f64]) -> Truncation {
    let k = series.len() / 5;
    if k < 10 {
        return Truncation {
            discard: 0,
            valid: false,
        };
    }
    let z: Vec<f64> = series
        .chunks_exact(5)
        .map(|c| c.iter().sum::<f64>() / 5.0)
        .collect();
    // Suffix sums: the statistic for every d in one pass from the end.
    let (mut s1, mut s2) = (0.0, 0.0);
    let mut best = (f64::INFINITY, 0);
    let mut stats = vec![f64::INFINITY; k];
    for d in (0..k).rev() {
        s1 += z[d];
        s2 += z[d] * z[d];
        let m = (k - d) as f64;
        if k - d >= 5 {
            stats[d] = ((s2 - s1 * s1 / m) / (m * m)).max(0.0);
        }
    }
    let half = k / 2;
    for (d, &s) in stats.iter().enumerate().take(half + 1) {
        if s < best.0 {
            best = (s, d);
        }
    }
    Truncation {
        discard: best.1 * 5,
        valid: best.1 * 5 < half * 4,
    }
}

/// Student's t quantile at `CONFIDENCE`, two-sided, with `df` degrees of freedom.
pub fn t_quantile(df: usize) -> f64 {
    StudentsT::new(0.0, 1.0, df.max(1) as f64)
        .map(|t| t.inverse_cdf(0.5 + CONFIDENCE / 2.0))
        .unwrap_or(f64::NAN)
}

/// Lag-1 autocorrelation of `x` (NaN for fewer than 3 values or no variation).
pub fn lag1(x: &[f64]) -> f64 {
    if x.len() < 3 {
        return f64::NAN;
    }
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    let mut num = 0.0;
    let mut den = 0.0;
    for i in 0..x.len() {
        let d = x[i] - mean;
        den += d * d;
        if i + 1 < x.len() {
            num += d * (x[i + 1] - mean);
        }
    }
    if den > 0.0 {
        num / den
    } else {
        f64::NAN
    }
}

/// Sample skewness of `x` (0 without variation).
fn skewness(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let (m2, m3) = x.iter().fold((0.0, 0.0), |(a, b), &v| {
        let d = v - mean;
        (a + d * d, b + d * d * d)
    });
    let (m2, m3) = (m2 / n, m3 / n);
    if m2 > 0.0 {
        m3 / m2.powf(1.5)
    } else {
        0.0
    }
}

/// Willink's (2005) skewness-adjusted t: the interval of a mean of `k` values whose skewness
/// is `skew` is `[mean - g(t) s / sqrt(k), mean - g(-t) s / sqrt(k)]`.
fn willink(z: f64, skew: f64, k: usize) -> f64 {
    let beta = skew / (6.0 * (k as f64).sqrt());
    if beta.abs() < 1e-12 {
        return z;
    }
    ((1.0 + 6.0 * beta * (z - beta)).cbrt() - 1.0) / (2.0 * beta)
}

fn merge_pairs(means: &[f64]) -> Vec<f64> {
    means.chunks_exact(2).map(|p| (p[0] + p[1]) / 2.0).collect()
}

/// A 95% interval and how it was obtained.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
    /// Batches (sections) it comes from, and observations in each.
    pub batches: usize,
    pub batch_size: u64,
    /// Whether batches of a tested size showed no lag-1 autocorrelation.
    pub uncorrelated: bool,
}

impl Interval {
    pub const NONE: Interval = Interval {
        low: f64::NAN,
        high: f64::NAN,
        batches: 0,
        batch_size: 0,
        uncorrelated: false,
    };

    pub fn half_width(&self) -> f64 {
        (self.high - self.low) / 2.0
    }

    pub fn pair(&self) -> [f64; 2] {
        [self.low, self.high]
    }

    /// The interval cut to values the quantity can take (`floor` and above: a response time
    /// or a wait is never negative). Cutting away values the quantity cannot take keeps the
    /// coverage; a short run's interval would otherwise reach below 0.
    pub fn at_least(mut self, floor: f64) -> Interval {
        // A NaN bound stays NaN: `f64::max` would turn it into `floor`.
        if self.low < floor {
            self.low = floor;
        }
        self
    }
}

/// The batch structure chosen for a series: `batches` means of `size` observations each.
#[derive(Clone, Debug)]
struct Batches {
    means: Vec<f64>,
    size: u64,
    uncorrelated: bool,
    /// Skewness of these batch means, estimated on the tested batches (0 when untested).
    skew: f64,
}

/// One measure's series kept for its mean's interval alone (batch means), in bounded memory:
/// observations in groups, neighbouring groups merged in pairs when there are too many.
#[derive(Clone)]
pub struct MeanSeries {
    group: u64,
    open_sum: f64,
    open_n: u64,
    groups: Vec<f64>,
}

impl Default for MeanSeries {
    fn default() -> Self {
        MeanSeries {
            group: 1,
            open_sum: 0.0,
            open_n: 0,
            groups: Vec::new(),
        }
    }
}

/// One measure's series (response or wait of every measured job, in completion order),
/// kept in bounded memory for its mean's and its quantiles' intervals.
#[derive(Default)]
pub struct SeriesStats {
    mean: MeanSeries,
    sections: Vec<Section>,
}

fn new_histogram() -> Histogram<u32> {
    Histogram::new_with_bounds(1, HIGHEST, 2).expect("valid bounds")
}

/// A section's observations, in the histogram's units. A histogram costs 27 KB to create, to
/// copy and to merge, while a short run's sections hold a few hundred values each (a
/// 20,000-job run has 64 of them per series): a section keeps its values in a list until it
/// holds about a histogram's worth. Its quantiles are the same either way, since they are
/// read from a histogram with the same counts.
#[derive(Clone)]
enum Section {
    Values(Vec<u64>),
    Histogram(Histogram<u32>),
}

/// Values a section lists before it becomes a histogram (32 KB, a histogram's size).
const SECTION_VALUES: usize = 4096;

impl Section {
    fn new() -> Section {
        Section::Values(Vec::new())
    }

    #[inline]
    fn record(&mut self, v: u64) {
        match self {
            Section::Values(values) => {
                values.push(v);
                if values.len() >= SECTION_VALUES {
                    self.spill();
                }
            }
            Section::Histogram(h) => h.saturating_record(v),
        }
    }

    #[cold]
    #[inline(never)]
    fn spill(&mut self) {
        if let Section::Values(values) = self {
            let mut h = new_histogram();
            values.iter().for_each(|&v| h.saturating_record(v));
            *self = Section::Histogram(h);
        }
    }

    /// This section followed by `next`, as one section.
    fn merge(mut self, next: Section) -> Section {
        match (&mut self, next) {
            (Section::Values(a), Section::Values(b)) if a.len() + b.len() < SECTION_VALUES => {
                a.extend_from_slice(&b);
                return self;
            }
            (Section::Values(_), next) => {
                self.spill();
                return self.merge(next);
            }
            (Section::Histogram(a), Section::Values(b)) => {
                b.iter().for_each(|&v| a.saturating_record(v));
            }
            (Section::Histogram(a), Section::Histogram(b)) => {
                a.add(&b).expect("same bounds");
            }
        }
        self
    }

    #[cfg(test)]
    fn len(&self) -> u64 {
        match self {
            Section::Values(values) => values.len() as u64,
            Section::Histogram(h) => h.len(),
        }
    }

    /// The values at quantiles `ps`; a listed section is counted into `scratch` first.
    fn quantiles(&self, ps: &[f64], scratch: &mut Option<Histogram<u32>>) -> Vec<u64> {
        let h = match self {
            Section::Values(values) => {
                let h = scratch.get_or_insert_with(new_histogram);
                h.reset();
                values.iter().for_each(|&v| h.saturating_record(v));
                h
            }
            Section::Histogram(h) => h,
        };
        ps.iter().map(|&p| h.value_at_quantile(p)).collect()
    }
}

impl MeanSeries {
    /// Adds an observation; true when the groups were just merged in pairs.
    #[inline]
    pub fn add(&mut self, x: f64) -> bool {
        self.open_sum += x;
        self.open_n += 1;
        self.open_n == self.group && self.close_group()
    }

    #[inline]
    fn close_group(&mut self) -> bool {
        self.groups.push(self.open_sum / self.group as f64);
        self.open_sum = 0.0;
        self.open_n = 0;
        if self.groups.len() == MAX_GROUPS {
            self.halve();
            return true;
        }
        false
    }

    /// Full: neighbouring groups merge in pairs.
    #[cold]
    #[inline(never)]
    fn halve(&mut self) {
        self.groups = merge_pairs(&self.groups);
        self.group *= 2;
    }

    /// Observations in complete groups (the rest, fewer than one group, is left out of the
    /// intervals' batches).
    pub fn batched(&self) -> u64 {
        self.groups.len() as u64 * self.group
    }

    fn batches(&self) -> Batches {
        let mut means = self.groups.clone();
        let mut size = self.group;
        // The smallest size whose batches look uncorrelated, with enough batches to test.
        let mut uncorrelated = false;
        while means.len() >= TEST_BATCHES {
            if lag1(&means) < 1.645 / (means.len() as f64).sqrt() {
                uncorrelated = true;
                break;
            }
            means = merge_pairs(&means);
            size *= 2;
        }
        let mut skew = 0.0;
        if uncorrelated {
            let tested = skewness(&means);
            let mut spread = 1;
            while spread < SPREAD && means.len() / 2 >= MIN_BATCHES {
                means = merge_pairs(&means);
                size *= 2;
                spread *= 2;
            }
            skew = tested / (spread as f64).sqrt();
        } else {
            while means.len() > 2 * MIN_BATCHES {
                means = merge_pairs(&means);
                size *= 2;
            }
        }
        Batches {
            means,
            size,
            uncorrelated,
            skew,
        }
    }

    /// The 95% interval of the mean (batch means), centred on `mean`, the mean of every
    /// observation.
    pub fn mean_interval(&self, mean: f64) -> Interval {
        let b = self.batches();
        let k = b.means.len();
        if k < 2 {
            return Interval::NONE;
        }
        let mut m = Moments::default();
        b.means.iter().for_each(|&x| m.add(x));
        let t = t_quantile(k - 1);
        let se = m.std() / (k as f64).sqrt();
        Interval {
            low: mean - willink(t, b.skew, k) * se,
            high: mean - willink(-t, b.skew, k) * se,
            batches: k,
            batch_size: b.size,
            uncorrelated: b.uncorrelated && k >= MIN_BATCHES,
        }
    }
}

impl SeriesStats {
    #[inline(always)]
    pub fn add(&mut self, x: f64) {
        let s = self.mean.groups.len() / GROUPS_PER_SECTION;
        if s == self.sections.len() {
            self.sections.push(Section::new());
        }
        self.sections[s].record(count_of(x * SCALE));
        if self.mean.add(x) {
            self.merge_sections();
        }
    }

    /// The groups were merged in pairs: the sections are too.
    #[cold]
    #[inline(never)]
    fn merge_sections(&mut self) {
        let old = std::mem::take(&mut self.sections);
        let mut it = old.into_iter();
        while let (Some(a), Some(b)) = (it.next(), it.next()) {
            self.sections.push(a.merge(b));
        }
    }

    /// Observations in complete groups (see [`MeanSeries::batched`]).
    pub fn batched(&self) -> u64 {
        self.mean.batched()
    }

    /// The 95% interval of the mean (see [`MeanSeries::mean_interval`]).
    pub fn mean_interval(&self, mean: f64) -> Interval {
        self.mean.mean_interval(mean)
    }

    /// The 95% intervals of the quantiles `ps`, each centred on the whole run's value in
    /// `whole` (sectioning, with sections at least [`QUANTILE_SECTIONS`] times as long as the
    /// mean's batches).
    pub fn quantile_intervals(&self, ps: &[f64], whole: &[f64]) -> Vec<Interval> {
        let b = self.mean.batches();
        let complete = self.mean.groups.len() / GROUPS_PER_SECTION;
        let mut sections: Vec<Section> = self.sections[..complete].to_vec();
        let mut size = self.mean.group * GROUPS_PER_SECTION as u64;
        while size < QUANTILE_SECTIONS * b.size && sections.len() >= 2 {
            let mut merged = Vec::with_capacity(sections.len() / 2);
            let mut it = sections.into_iter();
            while let (Some(a), Some(c)) = (it.next(), it.next()) {
                merged.push(a.merge(c));
            }
            sections = merged;
            size *= 2;
        }
        let k = sections.len();
        let mut scratch = None;
        let per_section: Vec<Vec<u64>> = if k < 2 {
            Vec::new()
        } else {
            sections
                .iter()
                .map(|s| s.quantiles(ps, &mut scratch))
                .collect()
        };
        (0..ps.len())
            .zip(whole)
            .map(|(i, &q)| {
                if k < 2 {
                    return Interval::NONE;
                }
                let mut m = Moments::default();
                for values in &per_section {
                    m.add(values[i] as f64 / SCALE);
                }
                let half = (t_quantile(k - 1) * m.std() / (k as f64).sqrt())
                    .max(q.abs() * SECTION_RESOLUTION);
                Interval {
                    low: q - half,
                    high: q + half,
                    batches: k,
                    batch_size: size,
                    uncorrelated: b.uncorrelated && k >= MIN_BATCHES,
                }
            })
            .collect()
    }
}

/// Quantiles `ps` of `values` (in the order they were measured: completion order) as the
/// summary gives p50-p99, the lower empirical quantile, with their 95% intervals by
/// sectioning, floored at 0 (a response is never negative). For quantiles the summary does
/// not carry (the load generator's p90, p99.9; the server world's p99.9): the same code.
pub fn quantiles_with_intervals(values: &[f64], ps: &[f64]) -> (Vec<f64>, Vec<[f64; 2]>) {
    let mut q = crate::stats::Quantiles::default();
    let mut series = SeriesStats::default();
    for &v in values {
        q.record(v);
        series.add(v);
    }
    let whole = q.quantiles(ps);
    let intervals = series
        .quantile_intervals(ps, &whole)
        .into_iter()
        .map(|iv| iv.at_least(0.0).pair())
        .collect();
    (whole, intervals)
}

/// The rule of a run until precise, in every world that runs one: at every 10% more measured
/// jobs, look at the mean response's interval; once it has been narrow enough (half-width at
/// most `target` times the mean, with uncorrelated batches) at two looks in a row, the run
/// stops. One look alone stops too often on an interval narrow by chance.
#[derive(Clone, Copy, Debug)]
pub struct UntilPrecise {
    pub target: f64,
    next: u64,
    narrow: u32,
}

impl UntilPrecise {
    /// A rule whose first look comes at `first_look` measured jobs.
    pub fn new(target: f64, first_look: u64) -> Self {
        UntilPrecise {
            target,
            next: first_look,
            narrow: 0,
        }
    }

    /// Whether a look is due at `n` measured jobs.
    #[inline]
    pub fn due(&self, n: u64) -> bool {
        n >= self.next
    }

    /// Looks at the interval of the mean `mean` at `n` measured jobs: true when the run is
    /// precise enough to stop.
    pub fn look(&mut self, n: u64, interval: &Interval, mean: f64) -> bool {
        let narrow = interval.uncorrelated && interval.half_width() <= self.target * mean.abs();
        self.narrow = if narrow { self.narrow + 1 } else { 0 };
        self.next = n + n.div_ceil(10).max(1);
        self.narrow >= 2
    }
}

/// A run until precise that sees nothing but its measured responses, one at a time (the load
/// generator, the os world's coordinator): the series, its mean and the rule.
pub struct PrecisionWatch {
    series: SeriesStats,
    moments: Moments,
    rule: UntilPrecise,
}

/// First look of a real world's run until precise when `jobs` does not say (the simulator's
/// is its default `jobs`).
pub const REAL_FIRST_LOOK: u64 = 1_000;

impl PrecisionWatch {
    /// A watch whose first look comes at `first_look` measured jobs, [`REAL_FIRST_LOOK`] when
    /// none is given.
    pub fn new(target: f64, first_look: Option<u64>) -> Self {
        PrecisionWatch {
            series: SeriesStats::default(),
            moments: Moments::default(),
            rule: UntilPrecise::new(target, first_look.unwrap_or(REAL_FIRST_LOOK).max(1)),
        }
    }

    /// Adds a measured response; true once the run is precise enough to stop.
    pub fn add(&mut self, x: f64) -> bool {
        self.series.add(x);
        self.moments.add(x);
        let n = self.moments.n;
        if !self.rule.due(n) {
            return false;
        }
        let mean = self.moments.mean;
        let interval = self.series.mean_interval(mean);
        self.rule.look(n, &interval, mean)
    }

    /// Measured responses seen so far.
    pub fn n(&self) -> u64 {
        self.moments.n
    }

    /// The mean's interval now, half-width over mean (NaN before two batches).
    pub fn precision(&self) -> f64 {
        let mean = self.moments.mean;
        self.series.mean_interval(mean).half_width() / mean.abs()
    }
}

/// How many of `responses` (measured, in completion order) a real run until precise measures:
/// the count at which the rule (`PrecisionWatch`) met the precision, None when they never
/// meet it. A real world decides while its jobs run on; the ones that complete while it stops
/// are left out, so that its interval is the one the rule stopped on. (The simulator, which
/// can, stops its arrivals and finishes the jobs present, measured: a handful.)
pub fn precise_prefix(responses: &[f64], target: f64, first_look: Option<u64>) -> Option<usize> {
    let mut watch = PrecisionWatch::new(target, first_look);
    responses.iter().position(|&x| watch.add(x)).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn mser5_cuts_an_initial_transient() {
        // 500 observations decaying from 100 to the level 1, then 9,500 at level 1 +- noise.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let series: Vec<f64> = (0..10_000)
            .map(|i| 1.0 + 100.0 * (-(i as f64) / 100.0).exp() + rng.random::<f64>() - 0.5)
            .collect();
        let t = mser5(&series);
        assert!(t.valid);
        assert_eq!(t.discard % 5, 0);
        // The transient is below the noise (0.29 std) after ~ 100 ln(100 / 0.01) = 920.
        assert!((300..=1500).contains(&t.discard), "{t:?}");
        // A stationary series is not truncated much, and a short one is too short to tell.
        let flat: Vec<f64> = (0..10_000).map(|_| rng.random::<f64>()).collect();
        assert!(mser5(&flat).discard < 5_000 && mser5(&flat).valid);
        assert!(!mser5(&flat[..40]).valid);
        // Still decaying at the end: the best cut is as late as searched, which is reported.
        let slow: Vec<f64> = (0..1000)
            .map(|i| 100.0 * (-(i as f64) / 2000.0).exp() + rng.random::<f64>())
            .collect();
        let t = mser5(&slow);
        assert!(!t.valid && t.discard >= 400, "{t:?}");
    }

    #[test]
    fn an_interval_is_cut_at_the_least_value_and_keeps_a_nan() {
        let iv = Interval {
            low: -0.5,
            high: 3.0,
            batches: 3,
            batch_size: 8,
            uncorrelated: false,
        };
        assert_eq!(iv.at_least(0.0).pair(), [0.0, 3.0]);
        assert_eq!(iv.at_least(-1.0).pair(), [-0.5, 3.0]);
        assert!(Interval::NONE.at_least(0.0).low.is_nan());
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        assert!((t_quantile(1) - 12.706).abs() < 1e-3);
        assert!((t_quantile(9) - 2.262).abs() < 1e-3);
        assert!((t_quantile(1000) - 1.962).abs() < 1e-3);
    }

    #[test]
    fn willink_widens_the_interval_on_the_side_of_the_skew() {
        // No skew: Student's t. Skewness 1 over 10 batches (beta = 1 / (6 sqrt 10)), by hand:
        // g(2.262) = ((1 + 6 beta (2.262 - beta))^(1/3) - 1) / (2 beta) = 1.8325, g(-2.262) =
        // -3.3702: the interval reaches further above the mean than below it.
        assert_eq!(willink(2.262, 0.0, 10), 2.262);
        assert!((willink(2.262, 1.0, 10) - 1.8325).abs() < 1e-4);
        assert!((willink(-2.262, 1.0, 10) + 3.3702).abs() < 1e-4);
        assert!((skewness(&[0.0, 0.0, 0.0, 1.0]) - 1.1547).abs() < 1e-4);
        assert_eq!(skewness(&[2.0, 2.0, 2.0]), 0.0);
    }

    #[test]
    fn batch_means_cover_an_ar1_mean() {
        // AR(1) with phi = 0.9 and mean 5: correlated like a queue's responses. Over 400
        // series of 20,000, the 95% interval holds the mean in 92-98% of them (binomial
        // 95% +- 2.2 at 400).
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let (mut hits, mut found) = (0, 0);
        for _ in 0..400 {
            let mut s = SeriesStats::default();
            let mut m = Moments::default();
            let mut x = 5.0;
            for _ in 0..20_000 {
                let e: f64 = rng.random::<f64>() - 0.5;
                x = 5.0 + 0.9 * (x - 5.0) + e;
                s.add(x);
                m.add(x);
            }
            let iv = s.mean_interval(m.mean);
            assert!(iv.batches >= MIN_BATCHES, "{iv:?}");
            found += usize::from(iv.uncorrelated);
            if iv.low <= 5.0 && 5.0 <= iv.high {
                hits += 1;
            }
        }
        assert!((368..=392).contains(&hits), "{hits} of 400");
        // At 20,000 observations the test finds uncorrelated batches in most series (the
        // others get an interval from 10-20 long batches, marked as such).
        assert!(found >= 340, "{found} of 400");
    }

    #[test]
    fn until_precise_stops_at_the_second_narrow_look_in_a_row() {
        let iv = |half: f64, uncorrelated: bool| Interval {
            low: 10.0 - half,
            high: 10.0 + half,
            batches: 20,
            batch_size: 100,
            uncorrelated,
        };
        let mut rule = UntilPrecise::new(0.05, 1000);
        assert!(!rule.due(999) && rule.due(1000));
        // 0.4 <= 5% of 10: narrow; then wide (reset), narrow, narrow: stop.
        assert!(!rule.look(1000, &iv(0.4, true), 10.0));
        assert!(!rule.due(1099) && rule.due(1100));
        assert!(!rule.look(1100, &iv(0.6, true), 10.0));
        assert!(!rule.look(1210, &iv(0.5, true), 10.0));
        assert!(rule.look(1331, &iv(0.1, true), 10.0));
        // Correlated batches never count as narrow.
        let mut rule = UntilPrecise::new(0.05, 10);
        assert!(!rule.look(10, &iv(0.1, false), 10.0) && !rule.look(11, &iv(0.1, false), 10.0));
    }

    #[test]
    fn groups_stay_bounded_and_exact() {
        let mut s = SeriesStats::default();
        for i in 0..100_000 {
            s.add(i as f64);
        }
        assert!(s.mean.groups.len() < MAX_GROUPS);
        assert!(s.sections.len() <= MAX_GROUPS / GROUPS_PER_SECTION + 1);
        // Group means of consecutive integers: group g of size m has mean g m + (m - 1) / 2.
        let m = s.mean.group as f64;
        for (g, &v) in s.mean.groups.iter().enumerate() {
            assert_eq!(v, g as f64 * m + (m - 1.0) / 2.0);
        }
        let counted: u64 = s.sections.iter().map(|h| h.len()).sum();
        assert_eq!(counted, 100_000);
    }

    #[test]
    fn listed_sections_give_the_quantiles_of_histograms() {
        // The same series twice: once as the summary keeps it (sections listed while short),
        // once with every section a histogram from its first value (as before the lists).
        // Their quantile intervals agree to the bit, at lengths where the sections end listed
        // (15 of 64 values, 9 of 2,048) and histograms (9 of 32,768).
        let ps = [0.5, 0.95, 0.99];
        for n in [1_000, 20_000, 300_000] {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(n);
            let (mut listed, mut histograms) = (SeriesStats::default(), SeriesStats::default());
            for _ in 0..n {
                let x = -(1.0 - rng.random::<f64>()).ln();
                listed.add(x);
                histograms.add(x);
                histograms.sections.iter_mut().for_each(Section::spill);
            }
            assert!(histograms
                .sections
                .iter()
                .all(|s| matches!(s, Section::Histogram(_))));
            let whole = [10.0, 20.0, 30.0];
            let a = listed.quantile_intervals(&ps, &whole);
            let b = histograms.quantile_intervals(&ps, &whole);
            assert!(a[0].batches >= 2, "{n}: {:?}", a[0]);
            for (a, b) in a.iter().zip(&b) {
                assert_eq!(
                    (a.low, a.high, a.batches),
                    (b.low, b.high, b.batches),
                    "{n}"
                );
                assert!(a.high > a.low, "{n}: {a:?}");
            }
        }
    }

    #[test]
    fn a_quantiles_interval_is_not_narrower_than_the_sections_resolution() {
        // Every value 7.0: every section's quantile is one bucket's, the spread between
        // sections 0, and the interval was the point [7, 7]. It is 7 +- 7/256 now.
        let mut series = SeriesStats::default();
        for _ in 0..20_000 {
            series.add(7.0);
        }
        let iv = series.quantile_intervals(&[0.999], &[7.0])[0];
        assert!(iv.batches >= 2, "{iv:?}");
        assert!((iv.half_width() - 7.0 / 256.0).abs() < 1e-12, "{iv:?}");
        assert!(iv.low < 7.0 && 7.0 < iv.high);
    }
}
