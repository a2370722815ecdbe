//! What a run yields: the per-job table and the run summary (DESIGN.md "Results").

use hdrhistogram::Histogram;
use serde::Serialize;

/// Exact quantiles from stored values up to `EXACT_LIMIT` values; beyond that an HdrHistogram
/// (3 significant digits) keeps memory bounded for runs of any length.
#[derive(Default)]
pub struct Quantiles {
    values: Vec<f64>,
    hist: Option<Histogram<u64>>,
}

const EXACT_LIMIT: usize = 4_000_000;
/// HdrHistogram records integers: values are kept in units of 1e-6.
const SCALE: f64 = 1e6;
/// Largest value the histogram tracks exactly (in units of 1e-6: 1e12 time units); larger
/// values are recorded as this one.
const HIGHEST: u64 = 1_000_000_000_000_000_000;

impl Quantiles {
    pub fn record(&mut self, v: f64) {
        if let Some(h) = &mut self.hist {
            h.saturating_record((v * SCALE).round().max(0.0) as u64);
            return;
        }
        self.values.push(v);
        if self.values.len() >= EXACT_LIMIT {
            // Bounds given explicitly: `Histogram::new` starts small, and saturating records
            // would clamp to its initial range instead of growing it.
            let mut h = Histogram::<u64>::new_with_bounds(1, HIGHEST, 3).expect("valid bounds");
            for v in self.values.drain(..) {
                h.saturating_record((v * SCALE).round().max(0.0) as u64);
            }
            self.values.shrink_to_fit();
            self.hist = Some(h);
        }
    }

    /// Quantiles at each of `ps` (in 0..=1); NaN when empty. Exact values use the lower
    /// empirical quantile (the ceil(p n)-th smallest).
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
        ps.iter()
            .map(|p| {
                let k = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
                *self.values.select_nth_unstable_by(k, f64::total_cmp).1
            })
            .collect()
    }
}

/// Running mean and variance (Welford), and the maximum.
#[derive(Clone, Copy, Default)]
pub struct Moments {
    pub n: u64,
    pub mean: f64,
    m2: f64,
    pub max: f64,
}

impl Moments {
    pub fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
        if x > self.max {
            self.max = x;
        }
    }
    pub fn std(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
    /// Jain's fairness index (sum x)^2 / (n sum x^2) = 1 / (1 + cv^2), cv with divisor n.
    pub fn jain(&self) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let var_n = self.m2 / self.n as f64;
        self.mean * self.mean / (self.mean * self.mean + var_n)
    }
    pub fn mean_or_nan(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.mean
        }
    }
}

/// The per-job table, column by column (handed to numpy/pandas without copies per row).
#[derive(Default, Serialize)]
pub struct JobTable {
    pub job: Vec<u64>,
    pub client: Vec<i64>,
    pub class: Vec<u32>,
    pub cpu: Vec<i32>,
    pub arrival: Vec<f64>,
    pub first_run: Vec<f64>,
    pub completion: Vec<f64>,
    pub size: Vec<f64>,
    pub wait: Vec<f64>,
    pub response: Vec<f64>,
    pub slowdown: Vec<f64>,
    pub context_switches: Vec<u32>,
    pub migrations: Vec<u32>,
}

/// One stretch of a job on a CPU.
#[derive(Clone, Debug, Serialize)]
pub struct Segment {
    pub cpu: u32,
    pub job: u64,
    pub task: i64,
    pub start: f64,
    pub end: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClassRow {
    pub class: String,
    pub jobs: u64,
    pub response_mean: f64,
    pub response_p50: f64,
    pub response_p95: f64,
    pub response_p99: f64,
    pub wait_mean: f64,
    pub slowdown_mean: f64,
}

/// Per task (client, thread): its jobs' mean response, its migrations, the CPU it ended on,
/// and the CPU share it received over the measured interval against the share its weight or
/// tickets entitle it to among the tasks runnable at each instant (each task at most one CPU).
#[derive(Clone, Debug, Serialize)]
pub struct TaskRow {
    pub task: u32,
    pub class: String,
    pub jobs: u64,
    pub response_mean: f64,
    pub migrations: u64,
    pub cpu: i32,
    pub service: f64,
    pub share: f64,
    pub entitled: f64,
    pub share_ratio: f64,
}

/// Load distribution of one runqueue (`cpu` = -1 for the global queue): the share of the
/// measured time it held `runnable` jobs (queued or running), and the share of the measured
/// completions that happened on it while it held that many (the completing job included).
#[derive(Clone, Debug, Serialize)]
pub struct LoadRow {
    pub cpu: i32,
    pub runnable: u32,
    pub time_share: f64,
    pub completion_share: f64,
}

/// Runnable jobs of one runqueue at one sampling instant (key `load_sample`).
#[derive(Clone, Debug, Serialize)]
pub struct LoadSample {
    pub time: f64,
    pub cpu: i32,
    pub runnable: u32,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub policy: String,
    pub jobs: u64,
    pub cpus: u32,
    pub seed: u64,
    pub response_mean: f64,
    pub response_p50: f64,
    pub response_p95: f64,
    pub response_p99: f64,
    pub response_std: f64,
    pub response_max: f64,
    pub wait_mean: f64,
    pub wait_p50: f64,
    pub wait_p95: f64,
    pub wait_p99: f64,
    pub wait_std: f64,
    pub slowdown_mean: f64,
    pub slowdown_p99: f64,
    pub throughput: f64,
    pub utilization: f64,
    pub utilization_per_cpu: Vec<f64>,
    pub context_switches: u64,
    pub migrations: u64,
    /// Time-averaged runnable jobs (queued or running) of each runqueue.
    pub runnable_mean_per_cpu: Vec<f64>,
    /// Coefficient of variation of the tasks' mean responses (closed workloads; NaN otherwise).
    pub task_response_cv: f64,
    pub jain_slowdown: f64,
    /// Jain's index over per-task share / entitlement (closed workloads; NaN otherwise).
    pub jain_share: f64,
    pub offered_load: f64,
    pub arrival_rate: f64,
    /// Time-averaged number of jobs in the system over the measured interval.
    pub mean_in_system: f64,
    pub measure_start: f64,
    pub measure_end: f64,
    pub sim_time: f64,
    /// CPU time spent on work, over the whole run (conservation: equals work_served).
    pub busy_time: f64,
    /// Work completed plus work done on jobs still present at the end.
    pub work_served: f64,
    pub overhead_time: f64,
    pub warmup_jobs: u64,
    pub unfinished: u64,
    /// Events processed: arrivals, ends of runs (completion, slice, burst), fluid
    /// completions, timers (think, I/O, samples) and balancing passes.
    pub events: u64,
    /// Mean response of each batch of measured jobs, in completion order (key `batches`).
    pub response_batch_means: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
