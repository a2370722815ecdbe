//! The run summary, computed by one piece of code for every world (DESIGN.md "Results").
//!
//! A run yields a per-job table (one row per measured job, in completion order), a per-task
//! table (CPU received and entitled per closed client or thread) and a few counters only the
//! world can keep (busy time per CPU, the measured window, events). [`summarize`] turns those
//! into the [`Summary`], the class table and the task table. The simulator does not store the
//! per-job table unless asked: it streams each job into the same [`Summarizer`] as it
//! completes, so its summary equals `summarize` of its table with its counters key by key
//! (the HdrHistogram's 3 significant digits take over from exact quantiles past 4M jobs, in
//! both). Arrivals, completions and the time jobs spend in the system inside the window are
//! counters too: the simulator counts them as events happen (unfinished and warm-up jobs
//! included); a world that cannot gives none, and `summarize` takes them from the table,
//! which agrees when every job that arrived in the window also completed in it.

use serde::{Deserialize, Serialize};

use crate::balance::{balance, Balance, LoadSamples};
use crate::output::{lag1, t_quantile, Interval, MeanSeries, SeriesStats};
use crate::stats::{jain, Moments, Quantiles};

/// The quantiles every summary reports.
pub const PERCENTILES: [f64; 3] = [0.5, 0.95, 0.99];

/// One measured job, as the summary sees it. Counts are f64 so that a world that could not
/// read them says NaN.
#[derive(Clone, Copy, Debug)]
pub struct JobRow {
    /// The task (closed client, thread) that submitted it; negative: a one-job task.
    pub client: i64,
    pub class: u32,
    pub arrival: f64,
    pub completion: f64,
    pub size: f64,
    /// Time runnable but not running (NaN: not measured).
    pub wait: f64,
    pub response: f64,
    /// Response over size (NaN: no size known).
    pub slowdown: f64,
    pub context_switches: f64,
    pub migrations: f64,
}

/// The per-job table, column by column (handed to numpy/pandas without copies per row).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
    pub context_switches: Vec<f64>,
    pub migrations: Vec<f64>,
}

impl JobTable {
    /// An empty table with room for `rows` rows (no copies while it fills to that many).
    pub fn with_capacity(rows: usize) -> JobTable {
        JobTable {
            job: Vec::with_capacity(rows),
            client: Vec::with_capacity(rows),
            class: Vec::with_capacity(rows),
            cpu: Vec::with_capacity(rows),
            arrival: Vec::with_capacity(rows),
            first_run: Vec::with_capacity(rows),
            completion: Vec::with_capacity(rows),
            size: Vec::with_capacity(rows),
            wait: Vec::with_capacity(rows),
            response: Vec::with_capacity(rows),
            slowdown: Vec::with_capacity(rows),
            context_switches: Vec::with_capacity(rows),
            migrations: Vec::with_capacity(rows),
        }
    }

    /// The table without the room it reserved and did not use (a run cut short by its time
    /// measures fewer jobs than it asked for). Growth alone leaves at most twice the rows,
    /// and is kept: trimming it would copy a long run's whole table.
    pub fn trimmed(mut self) -> JobTable {
        if self.job.capacity() > 2 * self.len() {
            self.job.shrink_to_fit();
            self.client.shrink_to_fit();
            self.class.shrink_to_fit();
            self.cpu.shrink_to_fit();
            self.arrival.shrink_to_fit();
            self.first_run.shrink_to_fit();
            self.completion.shrink_to_fit();
            self.size.shrink_to_fit();
            self.wait.shrink_to_fit();
            self.response.shrink_to_fit();
            self.slowdown.shrink_to_fit();
            self.context_switches.shrink_to_fit();
            self.migrations.shrink_to_fit();
        }
        self
    }

    pub fn len(&self) -> usize {
        self.response.len()
    }

    pub fn is_empty(&self) -> bool {
        self.response.is_empty()
    }

    pub fn row(&self, i: usize) -> JobRow {
        JobRow {
            client: self.client[i],
            class: self.class[i],
            arrival: self.arrival[i],
            completion: self.completion[i],
            size: self.size[i],
            wait: self.wait[i],
            response: self.response[i],
            slowdown: self.slowdown[i],
            context_switches: self.context_switches[i],
            migrations: self.migrations[i],
        }
    }
}

/// What a world measured of each task: CPU received and entitled over the interval its shares
/// are taken over (the contended one: the simulator's and the os world's).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TaskInput {
    pub task: u32,
    pub class: String,
    pub service: f64,
    pub entitled: f64,
    pub migrations: f64,
    /// The CPU it ran on last (-1: none or unknown).
    pub cpu: i32,
}

/// Per task: its jobs' mean response, and the CPU share it received over the measured
/// interval against the share its weight or tickets entitle it to among the tasks runnable at
/// each instant (each task at most one CPU).
#[derive(Clone, Debug, Serialize)]
pub struct TaskRow {
    pub task: u32,
    pub class: String,
    pub jobs: u64,
    pub response_mean: f64,
    pub migrations: f64,
    pub cpu: i32,
    pub service: f64,
    pub share: f64,
    pub entitled: f64,
    pub share_ratio: f64,
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
    /// 95% intervals as the summary's, from the class's own jobs in completion order (a
    /// subsequence of a stationary run is stationary); NaN where the summary's are, and for
    /// a class a one-class run was not told of.
    #[serde(serialize_with = "pair_as_list")]
    pub response_mean_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub response_p50_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub response_p95_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub response_p99_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub wait_mean_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub slowdown_mean_ci: [f64; 2],
    /// The class's batches passed the lag-1 test (the summary's `ci_uncorrelated`).
    pub ci_uncorrelated: bool,
}

/// What only the world can measure; everything else comes from the tables.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    pub policy: String,
    pub seed: u64,
    pub cpus: u32,
    /// The measured interval (ms).
    pub measure_start: f64,
    pub measure_end: f64,
    /// Busy time of each CPU over `busy_span` ms: utilisation = busy / span.
    pub busy_per_cpu: Vec<f64>,
    pub busy_span: f64,
    /// CPU time spent on work over the whole run, and the work served (conservation).
    pub busy_time: f64,
    pub work_served: f64,
    pub overhead_time: f64,
    pub runnable_mean_per_cpu: Vec<f64>,
    pub offered_load: f64,
    /// Length of the run (ms).
    pub sim_time: f64,
    pub warmup_jobs: u64,
    pub unfinished: u64,
    /// Events the world processed (the simulator's; None where a world counts none).
    pub events: Option<u64>,
    /// Batch means: measured jobs per batch (0: none).
    pub batch_size: u64,
    /// Counts a world keeps as events happen; None: counted from the per-job table.
    pub arrivals_in_window: Option<u64>,
    pub completions_in_window: Option<u64>,
    /// Integral of the number of jobs present over the measured interval; None: the measured
    /// jobs' time inside the interval, from the table.
    pub in_system_area: Option<f64>,
    /// Target relative half-width of the mean response's 95% interval (None: not asked).
    pub precision: Option<f64>,
    /// Runnable jobs per CPU sampled over the run (per-CPU runqueues; None: not sampled).
    pub load_samples: Option<LoadSamples>,
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
    pub context_switches: f64,
    pub migrations: f64,
    /// Time-averaged runnable jobs (queued or running) of each runqueue.
    pub runnable_mean_per_cpu: Vec<f64>,
    /// Coefficient of variation of the tasks' mean responses (NaN without two tasks).
    pub task_response_cv: f64,
    pub jain_slowdown: f64,
    /// Jain's index over per-task share / entitlement (NaN without tasks).
    pub jain_share: f64,
    pub offered_load: f64,
    pub arrival_rate: f64,
    /// Time-averaged number of jobs in the system over the measured interval.
    pub mean_in_system: f64,
    pub measure_start: f64,
    pub measure_end: f64,
    /// The measured interval's length (`measure_end - measure_start`): from the first
    /// measured arrival to the last completion, or to `time`. A batch's completion time.
    pub makespan: f64,
    pub sim_time: f64,
    /// CPU time spent on work, over the whole run (conservation: equals work_served).
    pub busy_time: f64,
    /// Work completed plus work done on jobs still present at the end.
    pub work_served: f64,
    pub overhead_time: f64,
    pub warmup_jobs: u64,
    /// When the warm-up ended: the arrival of the first measured job (ms).
    pub warmup_time: f64,
    pub unfinished: u64,
    pub events: Option<u64>,
    /// Mean response of each batch of measured jobs, in completion order (key `batches`).
    pub response_batch_means: Vec<f64>,
    /// 95% intervals `[low, high]` of one run (docs/statistics.md): batch means for the
    /// means, sectioning for the quantiles.
    #[serde(serialize_with = "pair_as_list")]
    pub response_mean_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub response_p50_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub response_p95_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub response_p99_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub wait_mean_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub wait_p50_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub wait_p95_ci: [f64; 2],
    #[serde(serialize_with = "pair_as_list")]
    pub wait_p99_ci: [f64; 2],
    /// The mean slowdown's 95% interval: batch means of the slowdowns, as the response's.
    #[serde(serialize_with = "pair_as_list")]
    pub slowdown_mean_ci: [f64; 2],
    /// The throughput's 95% interval: batch means of the times between measured completions
    /// (in completion order), whose interval `[low, high]` of the mean gap `g` makes
    /// `throughput x [g / high, g / low]`.
    #[serde(serialize_with = "pair_as_list")]
    pub throughput_ci: [f64; 2],
    /// The batches behind the mean response's interval: how many, jobs in each, and whether
    /// batches of a tested size showed no autocorrelation (false: too few jobs to tell).
    pub ci_batches: u64,
    pub ci_batch_size: u64,
    pub ci_uncorrelated: bool,
    /// Every measured job was its task's only one (a batch of one-shot processes). Such a
    /// run is one sample of a transient, not a stationary series: its jobs in completion
    /// order trend (FCFS's 1st ends at s, its Nth at N·s), so batch means and sections would
    /// give an interval of nothing. Its intervals are NaN; only replications give one.
    pub one_shot_batch: bool,
    /// Half-width of the mean response's interval over the mean (the run's precision).
    pub response_mean_precision: f64,
    /// The precision asked for (key `precision`; NaN: none), and whether the run reached
    /// it (null when none was asked).
    pub precision: f64,
    pub precision_reached: Option<bool>,
    /// From sampled runnable jobs per CPU (`crate::balance`; NaN or empty without samples):
    /// the split before a pinned start was lifted, over the second half after it, the time
    /// from the release to the first balanced split (Linux.1.a), and the share of samples
    /// after the release that were balanced.
    pub load_distribution_start: Vec<f64>,
    pub load_distribution: Vec<f64>,
    pub time_to_balance: f64,
    pub balanced_fraction: f64,
    /// When the contended interval ended (ms), the one that shares are taken over: the first
    /// persistent task to finish its jobs ends it, else the measured interval's end; and why
    /// (`contended_end`). Set by the simulator's closed runs, which track shares as they run;
    /// absent elsewhere (the os world gives the same keys from its own counters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contended_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contended_end: Option<String>,
}

/// Student's t over `means` (batches of the run's jobs, every job in one), centred on the run's
/// `mean`; `uncorrelated` where the means pass the lag-1 test (at least 3 of them).
fn interval_of_batch_means(means: &[f64], mean: f64, size: u64) -> Interval {
    let k = means.len();
    let m = means.iter().sum::<f64>() / k as f64;
    let var = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (k - 1) as f64;
    let half = t_quantile(k - 1) * (var / k as f64).sqrt();
    Interval {
        low: mean - half,
        high: mean + half,
        batches: k,
        batch_size: size,
        uncorrelated: lag1(means) < 1.645 / (k as f64).sqrt(),
    }
}

/// An interval `[low, high]` as a list, like every other list of the summary (serde writes a
/// fixed-size array as a tuple, which Python would receive as one).
fn pair_as_list<S: serde::Serializer>(pair: &[f64; 2], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(pair)
}

/// The unit of every key of a [`Summary`], as tables, JSON (`units`) and plots print it. Times
/// and work are in ms in every world; "jobs" is a time-averaged number of jobs.
pub const SUMMARY_UNITS: &[(&str, &str)] = &[
    ("policy", "text"),
    ("jobs", "count"),
    ("cpus", "count"),
    ("seed", "text"),
    ("response_mean", "ms"),
    ("response_p50", "ms"),
    ("response_p95", "ms"),
    ("response_p99", "ms"),
    ("response_std", "ms"),
    ("response_max", "ms"),
    ("wait_mean", "ms"),
    ("wait_p50", "ms"),
    ("wait_p95", "ms"),
    ("wait_p99", "ms"),
    ("wait_std", "ms"),
    ("slowdown_mean", "ratio"),
    ("slowdown_p99", "ratio"),
    ("throughput", "jobs/ms"),
    ("utilization", "ratio"),
    ("utilization_per_cpu", "ratio"),
    ("context_switches", "count"),
    ("migrations", "count"),
    ("runnable_mean_per_cpu", "jobs"),
    ("task_response_cv", "ratio"),
    ("jain_slowdown", "ratio"),
    ("jain_share", "ratio"),
    ("offered_load", "ratio"),
    ("arrival_rate", "jobs/ms"),
    ("mean_in_system", "jobs"),
    ("measure_start", "ms"),
    ("measure_end", "ms"),
    ("makespan", "ms"),
    ("sim_time", "ms"),
    ("busy_time", "ms"),
    ("work_served", "ms"),
    ("overhead_time", "ms"),
    ("warmup_jobs", "count"),
    ("warmup_time", "ms"),
    ("unfinished", "count"),
    ("events", "count"),
    ("response_batch_means", "ms"),
    ("response_mean_ci", "ms"),
    ("response_p50_ci", "ms"),
    ("response_p95_ci", "ms"),
    ("response_p99_ci", "ms"),
    ("wait_mean_ci", "ms"),
    ("wait_p50_ci", "ms"),
    ("wait_p95_ci", "ms"),
    ("wait_p99_ci", "ms"),
    ("slowdown_mean_ci", "ratio"),
    ("throughput_ci", "jobs/ms"),
    ("ci_batches", "count"),
    ("ci_batch_size", "count"),
    ("ci_uncorrelated", "bool"),
    ("one_shot_batch", "bool"),
    ("response_mean_precision", "ratio"),
    ("precision", "ratio"),
    ("precision_reached", "bool"),
    ("load_distribution_start", "jobs"),
    ("load_distribution", "jobs"),
    ("time_to_balance", "ms"),
    ("balanced_fraction", "ratio"),
    ("contended_ms", "ms"),
    ("contended_end", "text"),
];

/// Per class: moments, and quantiles and the series of the intervals when there is more than
/// one class.
#[derive(Default)]
struct ClassStats {
    response: Moments,
    wait: Moments,
    slowdown: Moments,
    quantiles: Quantiles,
    response_series: SeriesStats,
    wait_series: MeanSeries,
    slowdown_series: MeanSeries,
}

/// A class's 95% intervals: response mean, p50, p95, p99, wait mean, slowdown mean.
#[derive(Clone, Copy)]
struct ClassIntervals {
    intervals: [Interval; 6],
}

impl ClassIntervals {
    const NONE: ClassIntervals = ClassIntervals {
        intervals: [Interval::NONE; 6],
    };
}

impl ClassStats {
    /// The intervals of a class's own series, as `finish` takes the summary's; `q` its
    /// response quantiles.
    fn intervals(&self, q: &[f64]) -> ClassIntervals {
        let rq: Vec<Interval> = self
            .response_series
            .quantile_intervals(&PERCENTILES, q)
            .into_iter()
            .map(|iv| iv.at_least(0.0))
            .collect();
        ClassIntervals {
            intervals: [
                self.response_series
                    .mean_interval(self.response.mean_or_nan())
                    .at_least(0.0),
                rq[0],
                rq[1],
                rq[2],
                self.wait_series
                    .mean_interval(self.wait.mean_or_nan())
                    .at_least(0.0),
                self.slowdown_series
                    .mean_interval(self.slowdown.mean_or_nan())
                    .at_least(0.0),
            ],
        }
    }
}

/// The streaming half of the summary: one `add` per measured job, in completion order.
pub struct Summarizer {
    response: Moments,
    wait: Moments,
    slowdown: Moments,
    q_response: Quantiles,
    q_wait: Quantiles,
    q_slowdown: Quantiles,
    classes: Vec<ClassStats>,
    class_names: Vec<String>,
    /// Per-class quantiles are kept only when there are several classes.
    multi: bool,
    /// Every job so far was of class 0 in a run of one class: class 0's moments are the
    /// overall ones, taken at the end instead of computed twice per job.
    only_class_0: bool,
    /// Per task (closed client): its measured jobs and their mean response.
    tasks: Vec<(u64, f64)>,
    context_switches: f64,
    migrations: f64,
    counted_switches: bool,
    counted_migrations: bool,
    batch_size: u64,
    /// The first this many batches hold one job more (`in_batches`: jobs not divisible by
    /// the batches).
    batch_extra: u64,
    batch: Moments,
    batch_means: Vec<f64>,
    response_series: SeriesStats,
    wait_series: SeriesStats,
    slowdown_series: MeanSeries,
    /// The times between measured completions, in completion order (`add_completion`).
    gaps: MeanSeries,
    first_completion: f64,
    last_completion: f64,
    completions: u64,
}

#[inline]
fn add_finite(m: &mut Moments, q: Option<&mut Quantiles>, x: f64) {
    if x.is_finite() {
        m.add(x);
        if let Some(q) = q {
            q.record(x);
        }
    }
}

impl Summarizer {
    /// `jobs` measured jobs in `batches` batch means (key `batches`), whose sizes differ by
    /// one at most: jobs not divisible by the batches go one each to the first batches, so
    /// that every job is in a batch and there are `batches` means.
    pub fn in_batches(class_names: Vec<String>, batches: u64, jobs: u64) -> Summarizer {
        let mut s = Summarizer::new(class_names, jobs.checked_div(batches).unwrap_or(0));
        s.batch_extra = jobs.checked_rem(batches).unwrap_or(0);
        s
    }

    /// `class_names` indexed by `JobRow::class`; `batch_size` measured jobs per batch mean
    /// (0: none).
    pub fn new(class_names: Vec<String>, batch_size: u64) -> Summarizer {
        Summarizer {
            response: Moments::default(),
            wait: Moments::default(),
            slowdown: Moments::default(),
            q_response: Quantiles::default(),
            q_wait: Quantiles::default(),
            q_slowdown: Quantiles::default(),
            classes: class_names.iter().map(|_| ClassStats::default()).collect(),
            multi: class_names.len() > 1,
            only_class_0: class_names.len() <= 1,
            class_names,
            tasks: Vec::new(),
            context_switches: 0.0,
            migrations: 0.0,
            counted_switches: false,
            counted_migrations: false,
            batch_size,
            batch_extra: 0,
            batch: Moments::default(),
            batch_means: Vec::new(),
            response_series: SeriesStats::default(),
            wait_series: SeriesStats::default(),
            slowdown_series: MeanSeries::default(),
            gaps: MeanSeries::default(),
            first_completion: f64::NAN,
            last_completion: f64::NAN,
            completions: 0,
        }
    }

    /// A measured job's completion time, in completion order (`add` may take its rows in
    /// another order: a table's). Its gaps give the throughput's interval.
    #[inline]
    pub fn add_completion(&mut self, t: f64) {
        if self.completions == 0 {
            self.first_completion = t;
        } else {
            self.gaps.add(t - self.last_completion);
        }
        self.last_completion = t;
        self.completions += 1;
    }

    /// The throughput's interval: the mean gap's `[low, high]` turned into rates and scaled to
    /// `throughput` (whose window may be a little longer than the completions' span).
    fn throughput_interval(&self, throughput: f64) -> [f64; 2] {
        if self.completions < 2 {
            return [f64::NAN; 2];
        }
        let gap = (self.last_completion - self.first_completion) / (self.completions - 1) as f64;
        let iv = self.gaps.mean_interval(gap);
        if gap > 0.0 && iv.low > 0.0 {
            [throughput * gap / iv.high, throughput * gap / iv.low]
        } else {
            [f64::NAN; 2]
        }
    }

    #[inline]
    pub fn add(&mut self, j: &JobRow) {
        if self.only_class_0 && j.class != 0 {
            self.class_0_from_overall();
            self.only_class_0 = false;
        }
        self.response.add(j.response);
        self.q_response.record(j.response);
        self.response_series.add(j.response);
        // One test for the common row (every column known; NaN or inf poisons the sum), so
        // that the simulator pays for the server's unknown columns only when it has them.
        let known = (j.wait + j.slowdown + j.context_switches + j.migrations).is_finite();
        if known {
            self.wait.add(j.wait);
            self.q_wait.record(j.wait);
            self.wait_series.add(j.wait);
            self.slowdown.add(j.slowdown);
            self.q_slowdown.record(j.slowdown);
            self.slowdown_series.add(j.slowdown);
            self.context_switches += j.context_switches;
            self.migrations += j.migrations;
            self.counted_switches = true;
            self.counted_migrations = true;
        } else {
            if j.wait.is_finite() {
                self.wait_series.add(j.wait);
            }
            if j.slowdown.is_finite() {
                self.slowdown_series.add(j.slowdown);
            }
            add_finite(&mut self.wait, Some(&mut self.q_wait), j.wait);
            add_finite(&mut self.slowdown, Some(&mut self.q_slowdown), j.slowdown);
            if j.context_switches.is_finite() {
                self.context_switches += j.context_switches;
                self.counted_switches = true;
            }
            if j.migrations.is_finite() {
                self.migrations += j.migrations;
                self.counted_migrations = true;
            }
        }
        if self.batch_size > 0 {
            self.batch.add(j.response);
            let leading = (self.batch_means.len() as u64) < self.batch_extra;
            if self.batch.n == self.batch_size + u64::from(leading) {
                self.batch_means.push(self.batch.mean);
                self.batch = Moments::default();
            }
        }
        if !self.only_class_0 {
            let c = j.class as usize;
            if c >= self.classes.len() {
                self.classes.resize_with(c + 1, ClassStats::default);
            }
            let cs = &mut self.classes[c];
            cs.response.add(j.response);
            if known {
                cs.wait.add(j.wait);
                cs.slowdown.add(j.slowdown);
            } else {
                add_finite(&mut cs.wait, None, j.wait);
                add_finite(&mut cs.slowdown, None, j.slowdown);
            }
            if self.multi {
                cs.quantiles.record(j.response);
                cs.response_series.add(j.response);
                if j.wait.is_finite() {
                    cs.wait_series.add(j.wait);
                }
                if j.slowdown.is_finite() {
                    cs.slowdown_series.add(j.slowdown);
                }
            }
        }
        if j.client >= 0 {
            let t = j.client as usize;
            if t >= self.tasks.len() {
                self.tasks.resize(t + 1, (0, 0.0));
            }
            let (n, mean) = &mut self.tasks[t];
            *n += 1;
            *mean += (j.response - *mean) / *n as f64;
        }
    }

    /// Whether every measured job was its task's only one (see `Summary::one_shot_batch`).
    fn one_shot_batch(&self) -> bool {
        let in_tasks: u64 = self.tasks.iter().map(|&(n, _)| n).sum();
        self.response.n > 0 && in_tasks == self.response.n && self.tasks.iter().all(|t| t.0 <= 1)
    }

    /// Class 0's moments while every job was of class 0: the overall ones (the same adds in
    /// the same order, so the same bits).
    fn class_0_from_overall(&mut self) {
        if self.response.n == 0 {
            return;
        }
        if self.classes.is_empty() {
            self.classes.push(ClassStats::default());
        }
        let c = &mut self.classes[0];
        (c.response, c.wait, c.slowdown) = (self.response, self.wait, self.slowdown);
    }

    /// The measured jobs so far.
    pub fn jobs(&self) -> u64 {
        self.response.n
    }

    /// The mean response so far.
    pub fn response_mean(&self) -> f64 {
        self.response.mean_or_nan()
    }

    /// The 95% interval of the mean response so far (see [`crate::output`]).
    pub fn response_mean_interval(&self) -> Interval {
        self.response_series
            .mean_interval(self.response.mean_or_nan())
    }

    /// The summary, the class table and the task table. `counters` must have every count
    /// resolved (see [`summarize`] for a world that has none of its own).
    pub fn finish(
        mut self,
        counters: &Counters,
        tasks: &[TaskInput],
    ) -> (Summary, Vec<ClassRow>, Vec<TaskRow>) {
        if self.only_class_0 {
            self.class_0_from_overall();
        }
        let c = counters;
        let window = c.measure_end - c.measure_start;
        let per_window = |x: f64| if window > 0.0 { x / window } else { f64::NAN };
        let qr = self.q_response.quantiles(&PERCENTILES);
        let qw = self.q_wait.quantiles(&PERCENTILES);
        let one_shot_batch = self.one_shot_batch();
        if one_shot_batch {
            // No series to take an interval of: every interval below comes out NaN.
            self.response_series = SeriesStats::default();
            self.wait_series = SeriesStats::default();
            self.slowdown_series = MeanSeries::default();
            self.gaps = MeanSeries::default();
        }
        // Batches the run was asked for (key `batches`) give the mean's interval, as an
        // experiment file's statistics take it: one key, one interval in every interface.
        let rmean = if self.batch_size > 0 && self.batch_means.len() >= 2 && !one_shot_batch {
            interval_of_batch_means(
                &self.batch_means,
                self.response.mean_or_nan(),
                self.batch_size,
            )
        } else {
            self.response_series
                .mean_interval(self.response.mean_or_nan())
        };
        // The precision is the estimator's spread, taken before the intervals are cut at 0.
        let response_mean_precision = rmean.half_width() / self.response.mean_or_nan().abs();
        let rmean = rmean.at_least(0.0);
        let cut_at_zero = |ivs: Vec<Interval>| -> Vec<Interval> {
            ivs.into_iter().map(|iv| iv.at_least(0.0)).collect()
        };
        let rq = cut_at_zero(self.response_series.quantile_intervals(&PERCENTILES, &qr));
        let wmean = self
            .wait_series
            .mean_interval(self.wait.mean_or_nan())
            .at_least(0.0);
        let wq = cut_at_zero(self.wait_series.quantile_intervals(&PERCENTILES, &qw));
        let smean = self
            .slowdown_series
            .mean_interval(self.slowdown.mean_or_nan())
            .at_least(0.0);
        let throughput = per_window(c.completions_in_window.unwrap_or(0) as f64);
        let precision = c.precision.unwrap_or(f64::NAN);
        let precision_reached = c
            .precision
            .map(|p| rmean.uncorrelated && response_mean_precision <= p);
        let qs = self.q_slowdown.quantiles(&[0.99]);
        let settled = c
            .load_samples
            .as_ref()
            .and_then(balance)
            .unwrap_or(Balance {
                load_distribution_start: Vec::new(),
                load_distribution: Vec::new(),
                time_to_balance: f64::NAN,
                balanced_fraction: f64::NAN,
            });
        let utilization_per_cpu: Vec<f64> = c
            .busy_per_cpu
            .iter()
            .map(|b| {
                if c.busy_span > 0.0 {
                    b / c.busy_span
                } else {
                    f64::NAN
                }
            })
            .collect();
        let utilization = if utilization_per_cpu.is_empty() {
            f64::NAN
        } else {
            utilization_per_cpu.iter().sum::<f64>() / utilization_per_cpu.len() as f64
        };
        let task_rows = self.task_rows(tasks);
        let mut task_means = Moments::default();
        for &(n, mean) in &self.tasks {
            if n > 0 {
                task_means.add(mean);
            }
        }
        let task_response_cv = if task_means.n >= 2 {
            task_means.std() / task_means.mean
        } else {
            f64::NAN
        };
        let jain_share = if task_rows.is_empty() {
            f64::NAN
        } else {
            jain(task_rows.iter().map(|t| t.share_ratio))
        };
        // Sums over the measured jobs: NaN where no job was measured (a time-bounded run
        // whose jobs outlast it), not 0 beside tasks that switched hundreds of times.
        let count = |counted: bool, x: f64| if counted { x } else { f64::NAN };
        let multi = self.multi;
        // A one-class run's class 0 is the whole run; a class it was not told of has no series.
        let whole_run = ClassIntervals {
            intervals: [rmean, rq[0], rq[1], rq[2], wmean, smean],
        };
        let classes = self
            .classes
            .iter_mut()
            .enumerate()
            .map(|(i, s)| {
                let q = if multi {
                    s.quantiles.quantiles(&PERCENTILES)
                } else {
                    qr.clone()
                };
                let ci = if one_shot_batch {
                    ClassIntervals::NONE
                } else if multi {
                    s.intervals(&q)
                } else if i == 0 && s.response.n == self.response.n {
                    whole_run
                } else {
                    ClassIntervals::NONE
                };
                ClassRow {
                    class: self
                        .class_names
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| i.to_string()),
                    jobs: s.response.n,
                    response_mean: s.response.mean_or_nan(),
                    response_p50: q[0],
                    response_p95: q[1],
                    response_p99: q[2],
                    wait_mean: s.wait.mean_or_nan(),
                    slowdown_mean: s.slowdown.mean_or_nan(),
                    response_mean_ci: ci.intervals[0].pair(),
                    response_p50_ci: ci.intervals[1].pair(),
                    response_p95_ci: ci.intervals[2].pair(),
                    response_p99_ci: ci.intervals[3].pair(),
                    wait_mean_ci: ci.intervals[4].pair(),
                    slowdown_mean_ci: ci.intervals[5].pair(),
                    ci_uncorrelated: ci.intervals[0].uncorrelated,
                }
            })
            .collect();
        let summary = Summary {
            policy: c.policy.clone(),
            jobs: self.response.n,
            cpus: c.cpus,
            seed: c.seed,
            response_mean: self.response.mean_or_nan(),
            response_p50: qr[0],
            response_p95: qr[1],
            response_p99: qr[2],
            response_std: self.response.std(),
            response_max: self.response.max_or_nan(),
            wait_mean: self.wait.mean_or_nan(),
            wait_p50: qw[0],
            wait_p95: qw[1],
            wait_p99: qw[2],
            wait_std: self.wait.std(),
            slowdown_mean: self.slowdown.mean_or_nan(),
            slowdown_p99: qs[0],
            throughput,
            utilization,
            utilization_per_cpu,
            context_switches: count(self.counted_switches, self.context_switches),
            migrations: count(self.counted_migrations, self.migrations),
            runnable_mean_per_cpu: c.runnable_mean_per_cpu.clone(),
            task_response_cv,
            jain_slowdown: self.slowdown.jain(),
            jain_share,
            offered_load: c.offered_load,
            arrival_rate: per_window(c.arrivals_in_window.unwrap_or(0) as f64),
            mean_in_system: per_window(c.in_system_area.unwrap_or(f64::NAN)),
            measure_start: c.measure_start,
            measure_end: c.measure_end,
            makespan: if window.is_finite() && window >= 0.0 {
                window
            } else {
                f64::NAN
            },
            sim_time: c.sim_time,
            busy_time: c.busy_time,
            work_served: c.work_served,
            overhead_time: c.overhead_time,
            warmup_jobs: c.warmup_jobs,
            warmup_time: c.measure_start,
            unfinished: c.unfinished,
            events: c.events,
            // A last, partial batch (a run cut short of its jobs by `time`) is left out.
            response_batch_means: std::mem::take(&mut self.batch_means),
            response_mean_ci: rmean.pair(),
            response_p50_ci: rq[0].pair(),
            response_p95_ci: rq[1].pair(),
            response_p99_ci: rq[2].pair(),
            wait_mean_ci: wmean.pair(),
            wait_p50_ci: wq[0].pair(),
            wait_p95_ci: wq[1].pair(),
            wait_p99_ci: wq[2].pair(),
            slowdown_mean_ci: smean.pair(),
            throughput_ci: self.throughput_interval(throughput),
            ci_batches: rmean.batches as u64,
            ci_batch_size: rmean.batch_size,
            ci_uncorrelated: rmean.uncorrelated,
            one_shot_batch,
            response_mean_precision,
            precision,
            precision_reached,
            load_distribution_start: settled.load_distribution_start,
            load_distribution: settled.load_distribution,
            time_to_balance: settled.time_to_balance,
            balanced_fraction: settled.balanced_fraction,
            contended_ms: None,
            contended_end: None,
        };
        (summary, classes, task_rows)
    }

    fn task_rows(&self, tasks: &[TaskInput]) -> Vec<TaskRow> {
        let total_service: f64 = tasks.iter().map(|t| t.service).sum();
        let total_entitled: f64 = tasks.iter().map(|t| t.entitled).sum();
        tasks
            .iter()
            .map(|t| {
                let (jobs, mean) = self.tasks.get(t.task as usize).copied().unwrap_or_default();
                let share = t.service / total_service;
                let entitled = t.entitled / total_entitled;
                TaskRow {
                    task: t.task,
                    class: t.class.clone(),
                    jobs,
                    response_mean: if jobs > 0 { mean } else { f64::NAN },
                    migrations: t.migrations,
                    cpu: t.cpu,
                    service: t.service,
                    share,
                    entitled,
                    share_ratio: share / entitled,
                }
            })
            .collect()
    }
}

/// The summary of a run from its per-job table (measured jobs, completion order), its task
/// table and its counters. Counts the world did not keep come from the table: arrivals and
/// completions inside the measured interval, and the time the measured jobs spent inside it
/// (Little's L, for a world without an exact count of the jobs present).
pub fn summarize(
    jobs: &JobTable,
    tasks: &[TaskInput],
    class_names: Vec<String>,
    counters: &Counters,
) -> (Summary, Vec<ClassRow>, Vec<TaskRow>) {
    let mut s = Summarizer::new(class_names, counters.batch_size);
    let mut c = counters.clone();
    let (start, end) = (c.measure_start, c.measure_end);
    let inside = |t: f64| t >= start && t <= end;
    let mut arrivals = 0;
    let mut completions = 0;
    let mut area = 0.0;
    for i in 0..jobs.len() {
        let row = jobs.row(i);
        s.add(&row);
        arrivals += u64::from(inside(row.arrival));
        completions += u64::from(inside(row.completion));
        area += (row.completion.min(end) - row.arrival.max(start)).max(0.0);
    }
    let mut ends: Vec<f64> = jobs
        .completion
        .iter()
        .copied()
        .filter(|t| t.is_finite())
        .collect();
    ends.sort_unstable_by(f64::total_cmp);
    ends.into_iter().for_each(|t| s.add_completion(t));
    // Without a measured job, a table's world has no measured interval of its own (the
    // run's wall time stands in): no rate, and no jobs present to count (they were 0, where
    // every process of a run that measured nothing was present throughout).
    let none = jobs.is_empty();
    c.arrivals_in_window.get_or_insert(arrivals);
    c.completions_in_window.get_or_insert(completions);
    c.in_system_area
        .get_or_insert(if none { f64::NAN } else { area });
    let mut summary = s.finish(&c, tasks);
    if none {
        summary.0.throughput = f64::NAN;
        summary.0.arrival_rate = f64::NAN;
    }
    summary
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_summary_key_has_a_unit() {
        // The keys written only when set (closed runs' contended interval) too.
        let value = serde_json::to_value(Summary {
            contended_ms: Some(1.0),
            contended_end: Some("time limit".into()),
            ..Summary::default()
        })
        .unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut declared: Vec<&str> = SUMMARY_UNITS.iter().map(|(k, _)| *k).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        declared.sort_unstable();
        assert_eq!(
            sorted, declared,
            "a Summary key without a unit, or a unit without a key"
        );
    }

    use super::*;

    fn table(rows: &[(i64, u32, f64, f64, f64, f64)]) -> JobTable {
        let mut t = JobTable::default();
        for (i, &(client, class, arrival, completion, size, wait)) in rows.iter().enumerate() {
            t.job.push(i as u64);
            t.client.push(client);
            t.class.push(class);
            t.cpu.push(0);
            t.arrival.push(arrival);
            t.first_run.push(arrival + wait);
            t.completion.push(completion);
            t.size.push(size);
            t.wait.push(wait);
            t.response.push(completion - arrival);
            t.slowdown.push((completion - arrival) / size);
            t.context_switches.push(1.0);
            t.migrations.push(f64::NAN);
        }
        t
    }

    #[test]
    fn one_class_takes_the_overall_moments_and_a_stray_class_splits_them() {
        // Class 0 of a one-class run is the overall mean to the bit; a job of another class
        // (a world that numbers classes it was not told of) splits them from then on.
        let rows: Vec<(i64, u32, f64, f64, f64, f64)> = (0..50)
            .map(|i| {
                let a = f64::from(i) * 0.7;
                (
                    i64::from(i % 3),
                    0,
                    a,
                    a + 1.0 + f64::from(i % 7) * 0.3,
                    1.0,
                    0.1,
                )
            })
            .collect();
        let counters = Counters {
            measure_start: 0.0,
            measure_end: 60.0,
            busy_per_cpu: vec![40.0],
            busy_span: 60.0,
            ..Default::default()
        };
        let one = |rows: &[(i64, u32, f64, f64, f64, f64)]| {
            summarize(&table(rows), &[], vec!["only".into()], &counters)
        };
        let (s, classes, _) = one(&rows);
        assert_eq!(classes.len(), 1);
        assert_eq!(classes[0].jobs, 50);
        assert_eq!(
            classes[0].response_mean.to_bits(),
            s.response_mean.to_bits()
        );
        assert_eq!(classes[0].wait_mean.to_bits(), s.wait_mean.to_bits());
        assert_eq!(
            classes[0].slowdown_mean.to_bits(),
            s.slowdown_mean.to_bits()
        );
        let mut stray = rows.clone();
        stray[20].1 = 1;
        let (s2, classes, _) = one(&stray);
        assert_eq!((classes[0].jobs, classes[1].jobs), (49, 1));
        let mean0 = rows
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 20)
            .map(|(_, r)| r.3 - r.2)
            .sum::<f64>()
            / 49.0;
        assert!((classes[0].response_mean - mean0).abs() < 1e-12);
        assert_eq!(classes[1].response_mean, stray[20].3 - stray[20].2);
        assert_eq!(s2.jobs, 50);
        // No job at all: no class row is invented.
        let (_, none, _) = summarize(&table(&[]), &[], vec![], &counters);
        assert!(none.is_empty());
    }

    #[test]
    fn a_class_has_the_intervals_of_its_jobs_alone() {
        // Two interleaved classes of 3,000 jobs each, with responses that differ by class and
        // drift within it: each class's intervals are those the summary gives a run of that
        // class's jobs alone, in the same order; a one-class run's class is the run.
        let rows: Vec<(i64, u32, f64, f64, f64, f64)> = (0..6000u32)
            .map(|i| {
                let a = f64::from(i);
                let class = i % 2;
                let response = 1.0 + f64::from(class) * 4.0 + f64::from((i * 7919) % 101) * 0.05;
                (-1, class, a, a + response, 1.0, response - 1.0)
            })
            .collect();
        let counters = Counters {
            measure_start: 0.0,
            measure_end: 6010.0,
            busy_per_cpu: vec![6000.0],
            busy_span: 6010.0,
            ..Default::default()
        };
        let (_, classes, _) =
            summarize(&table(&rows), &[], vec!["a".into(), "b".into()], &counters);
        for (c, row) in classes.iter().enumerate() {
            let alone: Vec<_> = rows
                .iter()
                .filter(|r| r.1 == c as u32)
                .map(|r| (r.0, 0, r.2, r.3, r.4, r.5))
                .collect();
            let (s, _, _) = summarize(&table(&alone), &[], vec!["a".into()], &counters);
            assert_eq!(row.jobs, 3000);
            assert_eq!(row.response_mean.to_bits(), s.response_mean.to_bits());
            assert_eq!(row.ci_uncorrelated, s.ci_uncorrelated);
            for (got, want) in [
                (row.response_mean_ci, s.response_mean_ci),
                (row.response_p50_ci, s.response_p50_ci),
                (row.response_p95_ci, s.response_p95_ci),
                (row.response_p99_ci, s.response_p99_ci),
                (row.wait_mean_ci, s.wait_mean_ci),
                (row.slowdown_mean_ci, s.slowdown_mean_ci),
            ] {
                assert!(got[0].is_finite() && got[0] < got[1], "{got:?}");
                assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits));
            }
        }
        // The classes' intervals do not overlap (means 2.5 and 6.5 ms), and a one-class run's
        // class has the run's own.
        assert!(classes[0].response_mean_ci[1] < classes[1].response_mean_ci[0]);
        let all_a: Vec<_> = rows.iter().map(|r| (r.0, 0, r.2, r.3, r.4, r.5)).collect();
        let (s, one, _) = summarize(&table(&all_a), &[], vec!["only".into()], &counters);
        assert!(s.response_p99_ci[0].is_finite());
        assert_eq!(one[0].response_p99_ci, s.response_p99_ci);
        assert_eq!(one[0].slowdown_mean_ci, s.slowdown_mean_ci);
    }

    #[test]
    fn a_hand_computed_summary() {
        // FCFS on one CPU: jobs of 2, 1, 3 arriving at 0, 1, 2 finish at 2, 3, 6.
        let jobs = table(&[
            (0, 0, 0.0, 2.0, 2.0, 0.0),
            (1, 1, 1.0, 3.0, 1.0, 1.0),
            (0, 0, 2.0, 6.0, 3.0, 1.0),
        ]);
        let tasks = [
            TaskInput {
                task: 0,
                class: "a".into(),
                service: 5.0,
                entitled: 3.0,
                migrations: 0.0,
                cpu: 0,
            },
            TaskInput {
                task: 1,
                class: "b".into(),
                service: 1.0,
                entitled: 3.0,
                migrations: 0.0,
                cpu: 0,
            },
        ];
        let counters = Counters {
            measure_start: 0.0,
            measure_end: 6.0,
            busy_per_cpu: vec![6.0],
            busy_span: 6.0,
            ..Default::default()
        };
        let (s, classes, t) = summarize(&jobs, &tasks, vec!["a".into(), "b".into()], &counters);
        // Responses 2, 2, 4: mean 8/3, sample std sqrt(4/3), p50 = 2nd smallest = 2.
        assert!((s.response_mean - 8.0 / 3.0).abs() < 1e-12);
        assert!((s.response_std - (4.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(
            (s.response_p50, s.response_p99, s.response_max),
            (2.0, 4.0, 4.0)
        );
        assert_eq!((s.wait_mean, s.wait_p50), (2.0 / 3.0, 1.0));
        // Slowdowns 1, 2, 4/3.
        assert!((s.slowdown_mean - 13.0 / 9.0).abs() < 1e-12);
        assert_eq!((s.throughput, s.arrival_rate), (0.5, 0.5));
        assert_eq!(s.makespan, 6.0);
        // Jobs present: 2 + 2 + 4 = 8 ms of presence over 6 ms.
        assert!((s.mean_in_system - 8.0 / 6.0).abs() < 1e-12);
        assert_eq!(s.utilization, 1.0);
        assert_eq!(s.context_switches, 3.0);
        assert!(s.migrations.is_nan());
        // Shares 5/6 and 1/6 against 1/2 each: ratios 5/3 and 1/3.
        assert!((t[0].share_ratio - 5.0 / 3.0).abs() < 1e-12);
        assert_eq!((t[0].jobs, t[0].response_mean), (2, 3.0));
        let expect = (5.0f64 / 3.0 + 1.0 / 3.0).powi(2) / (2.0 * (25.0 / 9.0 + 1.0 / 9.0));
        assert!((s.jain_share - expect).abs() < 1e-12);
        // Task means 3 and 2: CV = std(3, 2) / 2.5.
        assert!((s.task_response_cv - 0.5f64.sqrt() / 2.5).abs() < 1e-12);
        assert_eq!((classes[0].jobs, classes[1].response_p50), (2, 2.0));
        assert_eq!(classes[0].response_p99, 4.0);
    }

    #[test]
    fn a_one_shot_batch_has_no_interval_of_one_run() {
        // 400 processes of 20 ms, one job each, forked at once on one CPU under FCFS: the ith
        // ends at 20·i, so the mean is 20·401/2 = 4010 ms exactly. Batch means of that
        // ramp would give an interval around it; a one-shot batch gives none.
        let n = 400;
        let batch: Vec<(i64, u32, f64, f64, f64, f64)> = (0..n)
            .map(|i| (i, 0, 0.0, 20.0 * (i + 1) as f64, 20.0, 20.0 * i as f64))
            .collect();
        let counters = Counters {
            measure_start: 0.0,
            measure_end: 20.0 * n as f64,
            busy_per_cpu: vec![20.0 * n as f64],
            busy_span: 20.0 * n as f64,
            ..Default::default()
        };
        let (s, _, _) = summarize(&table(&batch), &[], vec!["0".into()], &counters);
        assert!(s.one_shot_batch);
        assert_eq!(s.response_mean, 4010.0);
        for ci in [
            s.response_mean_ci,
            s.response_p50_ci,
            s.response_p99_ci,
            s.wait_mean_ci,
            s.wait_p95_ci,
            s.slowdown_mean_ci,
            s.throughput_ci,
        ] {
            assert!(ci[0].is_nan() && ci[1].is_nan(), "{ci:?}");
        }
        assert_eq!((s.ci_batches, s.ci_batch_size), (0, 0));
        assert!(!s.ci_uncorrelated && s.response_mean_precision.is_nan());
        // The same jobs from 200 processes of two jobs each, or from an open stream (no
        // task), are a series: their intervals stay.
        let pairs: Vec<_> = batch
            .iter()
            .map(|r| (r.0 / 2, r.1, r.2, r.3, r.4, r.5))
            .collect();
        let open: Vec<_> = batch
            .iter()
            .map(|r| (-1, r.1, r.2, r.3, r.4, r.5))
            .collect();
        for rows in [pairs, open] {
            let (s, _, _) = summarize(&table(&rows), &[], vec!["0".into()], &counters);
            assert!(!s.one_shot_batch);
            assert!(s.response_mean_ci[0] < 4010.0 && 4010.0 < s.response_mean_ci[1]);
            assert!(s.ci_batches > 0);
        }
    }

    #[test]
    fn empty_tables_give_nan_not_panics() {
        let (s, classes, t) = summarize(
            &JobTable::default(),
            &[],
            vec!["0".into()],
            &Counters::default(),
        );
        assert_eq!(s.jobs, 0);
        assert!(s.response_mean.is_nan() && s.response_p99.is_nan() && s.jain_share.is_nan());
        // No measured job: no sum over them (0 was shown beside tasks that switched).
        assert!(s.context_switches.is_nan() && s.migrations.is_nan());
        assert_eq!(classes.len(), 1);
        assert!(t.is_empty());
        // No measured arrival: no measured interval, so no makespan (not minus infinity).
        let never = Counters {
            measure_start: f64::INFINITY,
            measure_end: 5.0,
            ..Default::default()
        };
        let (s, _, _) = summarize(&JobTable::default(), &[], vec!["0".into()], &never);
        assert!(s.makespan.is_nan());
    }
}
