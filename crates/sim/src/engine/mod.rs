//! The event engine: what happens to a job.
//!
//! A job arrives (open stream, a closed client's next request, or a trace row), is placed on
//! a runqueue (the global one, or a CPU's own, chosen by placement and the balancer's wake-up
//! hook), waits in that runqueue's policy, runs on a CPU in turns until its current CPU burst
//! is done, blocks for I/O between bursts, and leaves when its last burst ends. At each instant
//! the engine first ends the runs that are due (completions, expired slices, bursts ending in
//! I/O), then the fluid completions, timers (think and I/O ends, samples), arrivals and the
//! balancer's periodic pass; it then enqueues the newly runnable jobs, re-queues the expired
//! ones behind them, fills idle CPUs (an idle CPU with nothing to run asks the balancer), and
//! finally lets each newcomer preempt a running job if its runqueue's policy says so. Fluid
//! policies (PS, GPS, FB) serve their runqueue's jobs continuously, by exact completion times.
//!
//! With `timeslice`, tasks are threads: the slice belongs to the task, a closed task whose next
//! request starts at once keeps its CPU and the rest of its slice, and a task that thinks
//! sleeps and wakes with the same runnable entity. Without it, every job is its own entity
//! and a closed client's next job enters the queue like any arrival (the queueing model).
//!
//! One file per concern: this one holds the state and the event loop; `workload` makes tasks
//! and jobs; `machine` places, queues, dispatches, preempts and migrates them; `io` blocks and
//! wakes them (and applies wake-up boosts); `fluid` serves fluid runqueues; `accounting`
//! measures as the run goes; `results` assembles the output through the model's summary;
//! `one_cpu` is the event loop of the textbook queue (one CPU, an open stream, a discrete
//! policy), which does the same as this one without its tests for what such a run lacks.

mod accounting;
mod fluid;
mod io;
mod machine;
mod one_cpu;
mod results;
mod workload;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use schedlab_model::summary::{ClassRow, JobTable, Summary, TaskRow};
use schedlab_policy::{Enqueue, JobId, JobView, Policy, Service};

use crate::balance::{self, Balancer};
use crate::cpuset::CpuSet;
use crate::mintree::MinTree;
use crate::spec::{fit_fluid, Config, Runqueues, Warmup, Workload, DEFAULT_MIN_JOBS};
use crate::SpecError;
use accounting::{Accounting, LoadBins};
pub use results::{LoadRow, LoadSample, Segment};
use schedlab_model::output::{mser5, UntilPrecise};

/// Everything one run returns.
pub struct Output {
    pub summary: Summary,
    pub classes: Vec<ClassRow>,
    pub tasks: Vec<TaskRow>,
    pub loads: Vec<LoadRow>,
    pub load_series: Option<Vec<LoadSample>>,
    pub jobs: Option<JobTable>,
    pub schedule: Option<Vec<Segment>>,
}

const NONE: i32 = -1;
/// Share tracking integrates entitlements over every change of the runnable set; above this
/// many tasks it would dominate the run time, so it is skipped.
const MAX_SHARE_TASKS: usize = 4096;
/// Load histograms keep this many counts of runnable jobs per runqueue in fixed arrays, and
/// larger counts (a batch of 1,000 processes) in lists that grow: every count is its own bin.
const LOAD_BINS: usize = 256;
/// Work below this is rounding, not work (a burst whose slice ended within it is done).
const EPS: f64 = 1e-12;

struct Job {
    view: JobView,
    /// Arrival order of the job (the per-job table's `job`).
    seq: u64,
    task: u32,
    first_run: f64,
    /// CPU it last ran on.
    cpu: i32,
    on_cpu: i32,
    rq: u32,
    switches: u32,
    migrations: u32,
    alive: bool,
    measured: bool,
    /// In its runqueue's policy, waiting.
    queued: bool,
    /// Index in its runqueue's list of queued jobs (per-CPU runqueues only).
    queued_at: u32,
    ready_since: f64,
    burst_size: f64,
    burst_left: f64,
    bursts_left: u32,
    io_time: f64,
    io_since: f64,
    /// Time runnable but not running, summed at each dispatch (exact: 0 for a job that never
    /// waited, where response - size - io would leave rounding).
    waited: f64,
    /// When it last left a CPU (cache-hotness).
    last_ran: f64,
    /// It enters its runqueue next as a wake-up (else as a new arrival).
    wakes: bool,
    /// It arrived to an empty machine: its first run pays `idle_wake`.
    woke_machine: bool,
    /// Priority before wake-up boosts, and whether it is waking from I/O (Windows boosts).
    base_priority: f64,
    woke_from_io: bool,
}

struct Task {
    class: u32,
    /// Closed client or trace task index; -1 for an open arrival's one-job task.
    client: i64,
    home: u32,
    ideal: u32,
    last_cpu: i32,
    slice_left: f64,
    /// Jobs submitted so far: the first is a fork, later ones wake the task up.
    submitted: u64,
    /// Counted in its home runqueue's tasks, with this weight and these tickets.
    assigned: bool,
    weight: f64,
    tickets: f64,
    /// The runnable entity of a thread (timeslice mode), reused across its jobs.
    entity: Option<JobId>,
    migrations: u64,
    /// Windows boost levels left; the Linux 2.6 sleep average.
    boost: f64,
    sleep_avg: f64,
    slept_at: f64,
}

#[derive(Clone)]
struct Cpu {
    job: Option<JobId>,
    dispatched: f64,
    run_start: f64,
    run_len: f64,
    /// The job this CPU ran last, identified by its sequence number (slots are reused).
    last_seq: u64,
    /// A job taken off this CPU unfinished: it counts a context switch if another job follows.
    left_unfinished: Option<(JobId, u64)>,
    busy_since: f64,
    busy_total: f64,
    busy_window: f64,
    /// Told the balancer it is idle, and found nothing since.
    idle_told: bool,
    /// With `end_cost`: until when the job that completed here last keeps this CPU (its exit).
    ending_until: f64,
}

struct Runqueue {
    policy: Box<dyn Policy>,
    fluid: bool,
    /// The policy may preempt (`Policy::may_preempt`): newcomers are offered a CPU.
    may_preempt: bool,
    /// Tasks assigned here, and their weights and tickets (placement by least load).
    tasks: u32,
    task_weight: f64,
    task_tickets: f64,
    /// Queued jobs (per-CPU runqueues, for balancers).
    queued: Vec<JobId>,
    hist: LoadBins,
    hist_at: f64,
    /// Fluid: CPU-time integrals, whole run and measured window.
    fluid_busy: f64,
    fluid_busy_window: f64,
}

#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct Time(f64);
impl Eq for Time {}
#[allow(clippy::derive_ord_xor_partial_ord)]
impl Ord for Time {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// A closed client finished thinking: its next job (a task index).
    Think(u32),
    /// An I/O wait ended (a job).
    Io(u32),
    /// A job whose I/O wait ended is back in its runqueue (`wake_delay` after the wait).
    Woke(u32),
    /// Sample every runqueue's runnable count.
    Sample,
}

/// The earlier of two event times (neither is NaN).
#[inline(always)]
fn earliest(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

/// The later of two times (neither is NaN): `f64::max` pays for NaN on every call, and the
/// accounting clips a time to the measured window on every event.
#[inline(always)]
fn latest(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// The seed the policy of runqueue `r` gets in a run seeded `seed`: public so that a test can
/// replay a randomised policy's draws.
pub fn policy_seed(seed: u64, r: usize) -> u64 {
    stream(seed, if r == 0 { 5 } else { 100 + r as u64 }).random()
}

/// Derives independent generator streams from one seed (SplitMix64), so that changing how one
/// stream is used does not perturb the others.
fn stream(seed: u64, index: u64) -> Xoshiro256PlusPlus {
    let mut z = seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Xoshiro256PlusPlus::seed_from_u64(z ^ (z >> 31))
}

struct Engine<'a> {
    cfg: &'a Config,
    per_cpu: bool,
    fluid: bool,
    threads: bool,
    /// A trace workload: arrivals come from its rows (else from `next_open`, infinite for
    /// closed clients).
    trace: bool,
    /// A bounded buffer before the runqueue (`buffer`): checked once here, not per event.
    bounded: bool,
    /// Sizes mapped to this machine's service (`service_scale`, `service_offset`).
    scaled: bool,
    /// `dispatch_delay`, read for every job.
    delay: f64,
    /// `idle_wake` is set: arrivals note whether they found the machine empty.
    idle_wake: bool,
    /// `dispatcher_cost` or `end_cost` is set: a run may wait for its CPU to be free of them
    /// (one check per dispatch when neither is).
    held: bool,
    /// With `dispatcher_cost`: until when the dispatcher's work keeps an idle CPU 0 busy.
    dispatcher_until: f64,
    /// Nothing is sent at or after this instant (`drain`; infinite otherwise).
    sending_ends: f64,
    jobs: Vec<Job>,
    free_jobs: Vec<u32>,
    tasks: Vec<Task>,
    free_tasks: Vec<u32>,
    /// Tasks that live the whole run (closed clients, trace tasks), numbered from 0.
    persistent: usize,
    cpus: Vec<Cpu>,
    rqs: Vec<Runqueue>,
    /// Per runqueue: jobs queued or running (for fluid runqueues: present), and the sum of
    /// their weights. Kept apart from `rqs` so that a balancer scanning 1,024 runqueues
    /// reads two small arrays, not 1,024 runqueues.
    runnable: Vec<u32>,
    load: Vec<f64>,
    cpu_until: MinTree,
    /// Per-CPU runqueues: the CPUs that may need filling (a superset of those idle with work
    /// queued or a balancer not yet told; the others would find nothing).
    to_fill: CpuSet,
    fluid_next: MinTree,
    balancer: Option<Box<dyn Balancer>>,
    balance_at: f64,
    next_ideal: usize,
    /// Tasks created so far (the creation order of `ideal`).
    tasks_created: u64,
    /// A closed trace: each client's next row.
    script_at: Vec<usize>,
    now: f64,
    // Arrival sources.
    next_open: f64,
    trace_at: usize,
    issued: u64,
    /// Closed clients thinking or about to submit (their next job is not issued yet).
    pending: u64,
    issue_limit: u64,
    /// Arrivals before this many are warm-up (by arrival order).
    warmup: u64,
    /// A run until precise: its rule, until it stops the arrivals.
    precision: Option<UntilPrecise>,
    timers: BinaryHeap<Reverse<(Time, u64, Timer)>>,
    timer_seq: u64,
    device_queue: VecDeque<(u32, f64)>,
    device_busy: bool,
    rng_arrival: Xoshiro256PlusPlus,
    rng_size: Xoshiro256PlusPlus,
    rng_class: Xoshiro256PlusPlus,
    rng_think: Xoshiro256PlusPlus,
    rng_io: Xoshiro256PlusPlus,
    rng_place: Xoshiro256PlusPlus,
    rng_balance: Xoshiro256PlusPlus,
    // Batches of one instant, kept to reuse their memory.
    ready: Vec<JobId>,
    expired: Vec<JobId>,
    /// Arrivals waiting for room in a bounded buffer (`buffer`), in arrival order.
    admission: VecDeque<JobId>,
    acct: Accounting,
}

pub fn run(cfg: &Config) -> Result<Output, SpecError> {
    let warmup = warmup_jobs(cfg)?;
    let out = run_with_warmup(cfg, warmup)?;
    let s = &out.summary;
    let warmed = warmup > 0 || cfg.warmup_time > 0.0;
    if warmed && s.jobs == 0 && !s.measure_start.is_finite() {
        // Every job arrived inside the warm-up: the measured interval is empty, every number
        // of the summary would be NaN, and its warm-up count says nothing of the jobs a
        // warm-up time discarded. (A run whose measured jobs outlast it completes none, but
        // its interval and its tasks' shares are there.)
        let (key, value) = if cfg.warmup_time > 0.0 {
            ("warmup_time", cfg.warmup_time.to_string())
        } else {
            ("warmup", warmup.to_string())
        };
        return Err(SpecError::new(
            key,
            value,
            format!(
                "a warm-up that ends before the run does: every job arrived inside it, so \
                 none was measured (the run ended at {} ms)",
                (s.sim_time * 1e6).round() / 1e6
            ),
        ));
    }
    Ok(out)
}

/// The number of jobs a run of `cfg` discards: the one given, or the one its pilot runs find
/// (`warmup = "auto"`). A sweep asks every policy of a point first and gives them all the
/// largest, so that every policy is measured on the same jobs.
pub fn warmup_jobs(cfg: &Config) -> Result<u64, SpecError> {
    match cfg.warmup {
        Warmup::Jobs(n) => Ok(n),
        Warmup::Auto => pilot_warmup(cfg),
    }
}

/// Pilot runs of the first jobs (same seed, so the same arrivals), 2,000 then four times
/// more each time, until MSER-5 places the end of the warm-up in the first half of the
/// series, or the pilot reaches a quarter of the run's length (so that pilots cost at most
/// about half the run; a run too short to tell takes the truncation found, at most half the
/// pilot). Each pilot goes on a quarter longer
/// than the series it looks at, so that the jobs looked at are not the ones draining at its
/// end. Returns the jobs to discard.
fn pilot_warmup(cfg: &Config) -> Result<u64, SpecError> {
    let total = match (cfg.workload.trace_jobs(), cfg.precision, cfg.jobs) {
        (Some(n), _, _) => n,
        (_, Some(p), _) => p.max_jobs,
        (_, None, Some(j)) => j,
        (_, None, None) => PILOT_MAX,
    };
    let longest = (total / 4).clamp(PILOT_START.min(total), PILOT_MAX);
    let mut n = PILOT_START.min(longest);
    loop {
        let mut pilot = cfg.clone();
        pilot.warmup = Warmup::Jobs(0);
        pilot.jobs = Some(n + n / 4);
        pilot.precision = None;
        pilot.keep_jobs = true;
        pilot.keep_schedule = false;
        pilot.load_sample = None;
        pilot.batches = 0;
        let out = run_with_warmup(&pilot, 0)?;
        let table = out.jobs.expect("pilot keeps its jobs");
        let mut by_arrival = vec![f64::NAN; n as usize];
        for (i, &seq) in table.job.iter().enumerate() {
            if seq < n {
                by_arrival[seq as usize] = table.response[i];
            }
        }
        // Jobs still running at the pilot's end (rare: it drains) are left out of the series.
        let series: Vec<f64> = by_arrival.into_iter().filter(|x| x.is_finite()).collect();
        let cut = mser5(&series);
        if cut.valid || n >= longest {
            return Ok((cut.discard as u64).min(n / 2));
        }
        n = (n * 4).min(longest);
    }
}

/// The first pilot's jobs, and the longest pilot.
const PILOT_START: u64 = 2_000;
const PILOT_MAX: u64 = 2_000_000;

fn run_with_warmup(cfg: &Config, warmup: u64) -> Result<Output, SpecError> {
    let mut e = Engine::new(cfg, warmup)?;
    e.start();
    // The textbook queue's own loops (discrete or fluid), chosen once: the general one tests
    // per event for what such a run never has.
    if e.one_cpu() {
        e.one_cpu_run();
    } else {
        e.main_loop();
    }
    Ok(e.finish())
}

impl<'a> Engine<'a> {
    fn new(cfg: &'a Config, warmup: u64) -> Result<Engine<'a>, SpecError> {
        let m = &cfg.machine;
        let per_cpu = m.runqueues == Runqueues::PerCpu;
        let nrq = if per_cpu { m.cpus } else { 1 };
        let mut rqs = Vec::with_capacity(nrq);
        for r in 0..nrq {
            let seed = policy_seed(cfg.seed, r);
            let mut policy = schedlab_policy::build(&cfg.policy, &cfg.params, seed)?;
            policy.serving_cpus(if per_cpu { 1 } else { m.cpus });
            let fluid = policy.service() == Service::Fluid;
            fit_fluid(&mut policy, &cfg.policy, m)?;
            rqs.push(Runqueue {
                may_preempt: policy.may_preempt(),
                policy,
                fluid,
                tasks: 0,
                task_weight: 0.0,
                task_tickets: 0.0,
                queued: Vec::new(),
                hist: LoadBins::new(),
                hist_at: 0.0,
                fluid_busy: 0.0,
                fluid_busy_window: 0.0,
            });
        }
        let fluid = rqs[0].fluid;
        let issue_limit = match (cfg.workload.trace_jobs(), cfg.jobs, cfg.precision) {
            (_, _, Some(p)) => warmup + p.max_jobs,
            (Some(n), Some(j), _) => (warmup + j).min(n),
            (Some(n), None, _) => n,
            (None, Some(j), _) => warmup + j,
            (_, None, _) => u64::MAX,
        };
        let precision = cfg.precision.map(|p| {
            UntilPrecise::new(
                p.target,
                cfg.jobs.unwrap_or(DEFAULT_MIN_JOBS).min(p.max_jobs),
            )
        });
        let persistent = match &cfg.workload {
            Workload::Closed { clients, .. } => clients.len(),
            Workload::Trace { rows } => rows
                .iter()
                .filter_map(|r| r.task)
                .max()
                .map_or(0, |t| t as usize + 1),
            Workload::Open { .. } => 0,
        };
        let closed = matches!(cfg.workload, Workload::Closed { .. });
        let balancer = per_cpu.then(|| balance::build(&m.balancer, m.cpus));
        Ok(Engine {
            cfg,
            per_cpu,
            fluid,
            threads: m.timeslice.is_some(),
            trace: matches!(cfg.workload, Workload::Trace { .. }),
            bounded: m.buffer.is_some(),
            scaled: m.service_scale != 1.0 || m.service_offset != 0.0,
            delay: m.dispatch_delay,
            idle_wake: m.idle_wake > 0.0,
            held: m.dispatcher_cost > 0.0 || m.end_cost > 0.0,
            dispatcher_until: f64::NEG_INFINITY,
            sending_ends: cfg.sending_ends(),
            jobs: Vec::new(),
            free_jobs: Vec::new(),
            tasks: Vec::new(),
            free_tasks: Vec::new(),
            persistent,
            cpus: vec![
                Cpu {
                    job: None,
                    dispatched: 0.0,
                    run_start: 0.0,
                    run_len: 0.0,
                    last_seq: u64::MAX,
                    left_unfinished: None,
                    busy_since: f64::NAN,
                    busy_total: 0.0,
                    busy_window: 0.0,
                    idle_told: false,
                    ending_until: f64::NEG_INFINITY,
                };
                m.cpus
            ],
            rqs,
            runnable: vec![0; nrq],
            load: vec![0.0; nrq],
            cpu_until: MinTree::new(m.cpus),
            to_fill: CpuSet::full(m.cpus),
            fluid_next: MinTree::new(nrq),
            balance_at: balancer.as_ref().map_or(f64::INFINITY, |b| b.next_tick()),
            balancer,
            next_ideal: 0,
            tasks_created: 0,
            script_at: vec![0; persistent],
            now: 0.0,
            next_open: f64::INFINITY,
            trace_at: 0,
            issued: 0,
            pending: 0,
            issue_limit,
            warmup,
            precision,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            device_queue: VecDeque::new(),
            device_busy: false,
            rng_arrival: stream(cfg.seed, 1),
            rng_size: stream(cfg.seed, 2),
            rng_class: stream(cfg.seed, 3),
            rng_think: stream(cfg.seed, 4),
            rng_io: stream(cfg.seed, 6),
            rng_place: stream(cfg.seed, 7),
            rng_balance: stream(cfg.seed, 8),
            ready: Vec::new(),
            expired: Vec::new(),
            admission: VecDeque::new(),
            acct: Accounting::new(
                cfg,
                (closed && persistent <= MAX_SHARE_TASKS).then_some(persistent),
            ),
        })
    }
}

impl Engine<'_> {
    fn timer(&mut self, at: f64, what: Timer) {
        self.timer_seq += 1;
        self.timers.push(Reverse((Time(at), self.timer_seq, what)));
    }

    /// The time of the next event. Times are never NaN, so a plain comparison takes the
    /// minimum (`f64::min` pays for NaN on every event); sources a run does not have are not
    /// looked at.
    #[inline]
    fn next_event(&self) -> f64 {
        let mut work = earliest(self.next_arrival(), self.cpu_until.min());
        if self.fluid {
            work = earliest(work, self.fluid_next.min());
        }
        if let Some(r) = self.timers.peek() {
            work = earliest(work, r.0 .0 .0);
        }
        // With nothing left to arrive, run or wake, balancing passes alone would go on forever.
        if work == f64::INFINITY {
            return work;
        }
        earliest(work, self.balance_at)
    }

    fn main_loop(&mut self) {
        let stop = self.cfg.stop().unwrap_or(f64::INFINITY);
        loop {
            let t = self.next_event();
            if t == f64::INFINITY || t > stop {
                if stop.is_finite() {
                    self.advance_to(stop);
                }
                return;
            }
            self.advance_to(t);
            self.step();
        }
    }

    /// Moves the clock, integrating the time-weighted quantities.
    #[inline(always)]
    fn advance_to(&mut self, t: f64) {
        if let Some(s) = &mut self.acct.shares {
            s.advance(t);
        }
        if self.fluid {
            self.advance_fluid(t);
        }
        self.now = t;
    }

    fn step(&mut self) {
        let now = self.now;
        while self.cpu_until.min() <= now {
            let c = self.cpu_until.argmin();
            self.acct.events += 1;
            self.end_run(c, false);
        }
        while self.fluid_next.min() <= now {
            let r = self.fluid_next.argmin();
            self.acct.events += 1;
            self.fluid_done(r);
        }
        while let Some(&Reverse((Time(t), _, what))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            self.acct.events += 1;
            match what {
                Timer::Think(task) => {
                    self.pending -= 1;
                    self.submit(task);
                }
                Timer::Io(job) => self.io_done(JobId(job)),
                Timer::Woke(job) => self.woke(JobId(job)),
                Timer::Sample => self.sample(),
            }
        }
        self.admit_arrivals();
        if self.balance_at <= now {
            self.acct.events += 1;
            self.with_balancer(|b, e| b.tick(e.now, e));
        }
        // Most instants without an arrival have no newcomer (every completion): the list is
        // then left where it is, not taken and put back.
        let mut ready = if self.ready.is_empty() {
            Vec::new()
        } else {
            std::mem::take(&mut self.ready)
        };
        if self.bounded {
            self.hold_arrivals(&mut ready);
        }
        for &id in &ready {
            self.make_ready(id);
        }
        // Enqueueing pushes to no list of the instant: the expired are read in place.
        for i in 0..self.expired.len() {
            let id = self.expired[i];
            let r = self.jobs[id.index()].rq as usize;
            self.enqueue(r, id, Enqueue::Expired);
        }
        self.expired.clear();
        if !self.fluid {
            self.fill_idle();
            if self.bounded {
                self.refill_from_buffer(&mut ready);
            }
            for &id in &ready {
                let j = &self.jobs[id.index()];
                if j.alive && j.queued && self.rqs[j.rq as usize].may_preempt {
                    self.maybe_preempt(id);
                }
            }
        } else if self.per_cpu {
            self.tell_idle_fluid();
        }
        if ready.capacity() > 0 {
            ready.clear();
            self.ready = ready;
        }
    }

    fn with_balancer(&mut self, f: impl FnOnce(&mut dyn Balancer, &mut Self)) {
        if let Some(mut b) = self.balancer.take() {
            f(b.as_mut(), self);
            self.balance_at = b.next_tick();
            self.balancer = Some(b);
        }
    }
}
