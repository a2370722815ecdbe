//! Measurement while the run goes: the measured interval, jobs in the system, runnable jobs
//! per runqueue, CPU received and entitled per task, and each measured job streamed into the
//! model's summary (the same code that summarises any world's per-job table).

use schedlab_model::entitlement::Entitlement;
use schedlab_model::summary::{JobRow, JobTable, Summarizer};
use schedlab_policy::JobId;

use super::results::{LoadSample, Segment};
use super::{earliest, latest, Engine, Timer, LOAD_BINS, NONE};
use crate::spec::Config;

pub(super) struct Accounting {
    pub(super) measure_start: f64,
    pub(super) measure_end: f64,
    /// Jobs in the machine now (arrived, not yet completed).
    pub(super) in_system: u64,
    in_system_since: f64,
    pub(super) in_system_area: f64,
    pub(super) measured_arrivals: u64,
    pub(super) completed_in_window: u64,
    pub(super) summary: Summarizer,
    /// Entitled CPU time per persistent task, and the CPU time it received (closed runs).
    pub(super) shares: Option<Entitlement>,
    pub(super) service: Vec<f64>,
    /// The contended interval's end, which shares are taken over: when the first persistent
    /// task finished its jobs (that task), infinite while every one is still competing.
    pub(super) share_end: f64,
    pub(super) share_closed_by: Option<usize>,
    pub(super) table: Option<JobTable>,
    pub(super) schedule: Option<Vec<Segment>>,
    pub(super) series: Option<Vec<LoadSample>>,
    pub(super) overhead: f64,
    pub(super) work_completed: f64,
    pub(super) events: u64,
}

impl Accounting {
    /// `share_tasks`: the persistent tasks whose shares are tracked, if any.
    pub(super) fn new(cfg: &Config, share_tasks: Option<usize>) -> Accounting {
        let names = cfg.classes.iter().map(|c| c.name.clone()).collect();
        Accounting {
            measure_start: f64::INFINITY,
            measure_end: cfg.stop().unwrap_or(f64::INFINITY),
            in_system: 0,
            in_system_since: 0.0,
            in_system_area: 0.0,
            measured_arrivals: 0,
            completed_in_window: 0,
            summary: Summarizer::in_batches(names, cfg.batches, cfg.jobs.unwrap_or(0)),
            shares: share_tasks.map(|n| {
                let mut e = Entitlement::new(n, cfg.machine.cpus as f64);
                // Nothing counts before the first measured arrival opens the window.
                e.set_window(f64::INFINITY, f64::INFINITY);
                e
            }),
            service: vec![0.0; share_tasks.unwrap_or(0)],
            share_end: f64::INFINITY,
            share_closed_by: None,
            // Room for the measured jobs when their number is known, up to a million (the
            // columns would otherwise be copied at each doubling); longer runs grow.
            table: cfg
                .keep_jobs
                .then(|| JobTable::with_capacity(cfg.jobs.unwrap_or(0).min(1 << 20) as usize)),
            schedule: cfg.keep_schedule.then(Vec::new),
            series: cfg.load_sample.map(|_| Vec::new()),
            overhead: 0.0,
            work_completed: 0.0,
            events: 0,
        }
    }

    /// Length of [a, b] inside the measured interval.
    pub(super) fn clip(&self, a: f64, b: f64) -> f64 {
        latest(
            earliest(b, self.measure_end) - latest(a, self.measure_start),
            0.0,
        )
    }

    /// A task ran over [start, end]: the part inside the contended interval counts.
    pub(super) fn served(&mut self, task: usize, start: f64, end: f64) {
        if self.shares.is_some() && task < self.service.len() {
            let end = end.min(self.share_end);
            self.service[task] += self.clip(start, end);
        }
    }

    /// A task received `served` in a fluid runqueue, now (its burst completed, it left the
    /// runqueue, or the run ended). A fluid serves at rates that change, so what it served
    /// before the measured interval opened is taken off when it opens (`start_measuring`);
    /// nothing is credited before then, and nothing is served after the interval's end.
    /// Once the contended interval has ended, nothing more is credited (`close_shares`
    /// credited what the fluid jobs had received by then).
    pub(super) fn served_fluid(&mut self, task: usize, served: f64) {
        if self.shares.is_some()
            && task < self.service.len()
            && self.measure_start.is_finite()
            && self.share_end == f64::INFINITY
        {
            self.service[task] += served;
        }
    }
}

impl Engine<'_> {
    /// Opens the measured interval at the first measured arrival.
    pub(super) fn start_measuring(&mut self) {
        if self.acct.measure_start != f64::INFINITY {
            return;
        }
        let now = self.now;
        self.acct.measure_start = now;
        self.acct.in_system_since = now;
        for rq in &mut self.rqs {
            rq.hist_at = now;
        }
        // A contended interval that ended in the warm-up leaves no interval to share.
        if self.acct.share_end.is_finite() {
            if let Some(s) = &mut self.acct.shares {
                s.set_window(now, now);
            }
            return;
        }
        let end = self.acct.measure_end;
        if let Some(s) = &mut self.acct.shares {
            s.set_window(now, end);
        }
        // A fluid job's service is credited whole when it leaves its runqueue: what it
        // received before now is not the interval's.
        if self.acct.shares.is_some() {
            self.credit_fluid_service(-1.0);
        }
    }

    /// Adds `sign` times what each job present in a fluid runqueue has received there to its
    /// task's service: -1 when the measured interval opens, +1 when the contended one closes.
    fn credit_fluid_service(&mut self, sign: f64) {
        for i in 0..self.jobs.len() {
            let j = &self.jobs[i];
            let rq = &mut self.rqs[j.rq as usize];
            if !(j.alive && j.queued && rq.fluid) || j.task as usize >= self.acct.service.len() {
                continue;
            }
            let attained = rq.policy.fluid().expect("fluid").attained(JobId(i as u32));
            self.acct.service[j.task as usize] += sign * attained;
        }
    }

    /// Persistent task `task` finished its jobs: if it is the first, the contended interval
    /// ends now (the trap of a share measured after competitors left: study 004's lottery
    /// tests). The entitlement stops counting; a fluid job's service so far is credited now,
    /// as a run's end credits it, and nothing after.
    pub(super) fn close_shares(&mut self, task: usize) {
        if self.acct.shares.is_none() || self.acct.share_closed_by.is_some() {
            return;
        }
        let now = self.now;
        self.acct.share_closed_by = Some(task);
        if self.fluid && self.acct.measure_start.is_finite() {
            self.credit_fluid_service(1.0);
        }
        self.acct.share_end = now;
        let start = self.acct.measure_start;
        if let Some(s) = &mut self.acct.shares {
            s.set_window(start, now.min(self.acct.measure_end));
        }
    }

    /// A persistent task's entitlement from now on (0 while it is not runnable: a sleeping
    /// task's share passes to the others).
    pub(super) fn set_entitlement(&mut self, task: usize, weight: f64) {
        if let Some(s) = &mut self.acct.shares {
            s.set(task, weight);
        }
    }

    #[inline]
    pub(super) fn set_in_system(&mut self, delta: i64) {
        let a = &mut self.acct;
        a.in_system_area += a.in_system as f64 * a.clip(a.in_system_since, self.now);
        a.in_system_since = self.now;
        a.in_system = (a.in_system as i64 + delta) as u64;
    }

    /// Changes a runqueue's runnable count (and its time-weighted histogram). Inlined: it is
    /// called at every arrival and every exit, and a call cost half its work.
    #[inline(always)]
    pub(super) fn set_runnable(&mut self, r: usize, delta: i32, weight: f64) {
        let (ms, me, now) = (self.acct.measure_start, self.acct.measure_end, self.now);
        let rq = &mut self.rqs[r];
        let (runnable, load) = (&mut self.runnable[r], &mut self.load[r]);
        rq.hist.add_time(
            *runnable as usize,
            latest(earliest(now, me) - latest(rq.hist_at, ms), 0.0),
        );
        rq.hist_at = now;
        *runnable = runnable.wrapping_add_signed(delta);
        *load += weight * delta as f64;
        if *runnable == 0 {
            *load = 0.0;
        }
    }

    /// Measures a completed job.
    pub(super) fn record(&mut self, id: JobId) {
        let now = self.now;
        self.set_in_system(-1);
        let j = &self.jobs[id.index()];
        let view = &j.view;
        self.acct.work_completed += view.size;
        // Submitted `dispatch_delay` before it reached the machine.
        let arrival = view.arrival - self.delay;
        let response = now - arrival;
        // Fluid policies serve every job at once: its wait is the time it was slowed down.
        let wait = if self.rqs[j.rq as usize].fluid {
            (response - view.size - j.io_time).max(0.0)
        } else {
            j.waited
        };
        let slowdown = if view.size > 0.0 {
            response / view.size
        } else {
            1.0
        };
        if j.measured {
            let client = self.tasks[j.task as usize].client;
            let row = JobRow {
                client,
                class: view.class,
                arrival,
                completion: now,
                size: view.size,
                wait,
                response,
                slowdown,
                context_switches: j.switches as f64,
                migrations: j.migrations as f64,
            };
            self.acct.summary.add(&row);
            self.acct.summary.add_completion(now);
            let r = j.rq as usize;
            self.rqs[r].hist.add_done(self.runnable[r] as usize);
            if let Some(tab) = &mut self.acct.table {
                tab.job.push(j.seq);
                tab.client.push(client);
                tab.class.push(view.class);
                tab.cpu.push(j.cpu);
                tab.arrival.push(arrival);
                tab.first_run.push(j.first_run);
                tab.completion.push(now);
                tab.size.push(view.size);
                tab.wait.push(wait);
                tab.response.push(response);
                tab.slowdown.push(slowdown);
                tab.context_switches.push(row.context_switches);
                tab.migrations.push(row.migrations);
            }
        }
        if now <= self.acct.measure_end && now >= self.acct.measure_start {
            self.acct.completed_in_window += 1;
        }
        if self.precision.is_some() {
            self.look_at_precision();
        }
    }

    /// A run until precise (`schedlab_model::output::UntilPrecise`): once precise, stop the
    /// arrivals; the jobs in the system still finish, measured.
    #[cold]
    fn look_at_precision(&mut self) {
        let n = self.acct.summary.jobs();
        let Some(rule) = self.precision.as_mut().filter(|r| r.due(n)) else {
            return;
        };
        let iv = self.acct.summary.response_mean_interval();
        if rule.look(n, &iv, self.acct.summary.response_mean()) {
            self.issue_limit = self.issue_limit.min(self.issued);
            self.precision = None;
        }
    }

    pub(super) fn sample(&mut self) {
        let now = self.now;
        if let Some(s) = &mut self.acct.series {
            for (r, &runnable) in self.runnable.iter().enumerate() {
                s.push(LoadSample {
                    time: now,
                    cpu: if self.per_cpu { r as i32 } else { NONE },
                    runnable,
                });
            }
        }
        let period = self.cfg.load_sample.expect("sampling");
        let more = self.cfg.time.is_some_and(|t| now + period <= t)
            || (self.issued < self.issue_limit && now < self.sending_ends)
            || self.pending > 0
            || self.acct.in_system > 0;
        if more {
            self.timer(now + period, Timer::Sample);
        }
    }
}

/// A runqueue's load histograms: the measured time it held n runnable jobs, and the jobs
/// completed while it held n. Counts up to `LOAD_BINS` sit in fixed arrays (no bounds check
/// on the hot path); larger ones (a batch of 1,000 processes) in lists that grow.
pub(super) struct LoadBins {
    time: Box<[f64; LOAD_BINS]>,
    done: Box<[u64; LOAD_BINS]>,
    time_more: Vec<f64>,
    done_more: Vec<u64>,
}

impl LoadBins {
    pub(super) fn new() -> LoadBins {
        LoadBins {
            time: Box::new([0.0; LOAD_BINS]),
            done: Box::new([0; LOAD_BINS]),
            time_more: Vec::new(),
            done_more: Vec::new(),
        }
    }

    #[inline]
    fn add_time(&mut self, runnable: usize, time: f64) {
        if runnable < LOAD_BINS {
            self.time[runnable] += time;
        } else {
            *self.more(runnable).0 += time;
        }
    }

    #[inline]
    fn add_done(&mut self, runnable: usize) {
        if runnable < LOAD_BINS {
            self.done[runnable] += 1;
        } else {
            *self.more(runnable).1 += 1;
        }
    }

    #[cold]
    #[inline(never)]
    fn more(&mut self, runnable: usize) -> (&mut f64, &mut u64) {
        let i = runnable - LOAD_BINS;
        if i >= self.time_more.len() {
            self.time_more.resize(i + 1, 0.0);
            self.done_more.resize(i + 1, 0);
        }
        (&mut self.time_more[i], &mut self.done_more[i])
    }

    /// (runnable jobs, measured time, completions) for every count from 0 up.
    pub(super) fn bins(&self) -> impl Iterator<Item = (usize, f64, u64)> + '_ {
        let time = self.time.iter().chain(&self.time_more);
        let done = self.done.iter().chain(&self.done_more);
        time.zip(done).enumerate().map(|(n, (&t, &d))| (n, t, d))
    }
}
