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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use schedlab_policy::{Enqueue, JobId, JobView, Policy, Service};

use crate::balance::{self, Balancer, Queued};
use crate::metrics::{
    ClassRow, JobTable, LoadRow, LoadSample, Moments, Quantiles, Segment, Summary, TaskRow,
};
use crate::mintree::MinTree;
use crate::placement::{CpuLoad, TaskPlace};
use crate::spec::{Boost, Config, IoDevice, Runqueues, Workload};
use crate::SpecError;

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
/// Load histograms count up to this many runnable jobs per runqueue; more go in the last bin.
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
    /// How it enters its runqueue next.
    entered: Enqueue,
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
    response: Moments,
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
}

struct Runqueue {
    policy: Box<dyn Policy>,
    fluid: bool,
    /// Jobs queued or running (for fluid runqueues: present).
    runnable: u32,
    load: f64,
    /// Tasks assigned here, and their weights and tickets (placement by least load).
    tasks: u32,
    task_weight: f64,
    task_tickets: f64,
    /// Queued jobs (per-CPU runqueues, for balancers).
    queued: Vec<JobId>,
    hist: Vec<f64>,
    hist_at: f64,
    done_hist: Vec<u64>,
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
    /// Sample every runqueue's runnable count.
    Sample,
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

/// Per class: moments, and quantiles when there is more than one class.
#[derive(Default)]
struct ClassStats {
    response: Moments,
    wait: Moments,
    slowdown: Moments,
    quantiles: Quantiles,
}

/// Entitled CPU time per task: at each instant the runnable tasks split the CPUs in proportion
/// to their entitlement, no task getting more than one CPU (water-filling).
struct Shares {
    weight: Vec<f64>,
    rate: Vec<f64>,
    entitled: Vec<f64>,
    service: Vec<f64>,
    last: f64,
    dirty: bool,
}

impl Shares {
    fn new(tasks: usize) -> Shares {
        Shares {
            weight: vec![0.0; tasks],
            rate: vec![0.0; tasks],
            entitled: vec![0.0; tasks],
            service: vec![0.0; tasks],
            last: 0.0,
            dirty: false,
        }
    }
    fn integrate(&mut self, a: f64, b: f64) {
        if b > a {
            for (e, r) in self.entitled.iter_mut().zip(&self.rate) {
                *e += r * (b - a);
            }
        }
    }
    fn recompute(&mut self, cpus: usize) {
        self.dirty = false;
        self.rate.iter_mut().for_each(|r| *r = 0.0);
        let mut open: Vec<usize> = (0..self.weight.len())
            .filter(|&i| self.weight[i] > 0.0)
            .collect();
        let mut free = cpus as f64;
        loop {
            let total: f64 = open.iter().map(|&i| self.weight[i]).sum();
            if open.is_empty() || total <= 0.0 {
                return;
            }
            let capped: Vec<usize> = open
                .iter()
                .copied()
                .filter(|&i| free * self.weight[i] / total >= 1.0)
                .collect();
            if capped.is_empty() {
                for &i in &open {
                    self.rate[i] = free * self.weight[i] / total;
                }
                return;
            }
            for &i in &capped {
                self.rate[i] = 1.0;
                free -= 1.0;
            }
            open.retain(|i| !capped.contains(i));
        }
    }
}

struct Engine<'a> {
    cfg: &'a Config,
    per_cpu: bool,
    fluid: bool,
    threads: bool,
    jobs: Vec<Job>,
    free_jobs: Vec<u32>,
    tasks: Vec<Task>,
    free_tasks: Vec<u32>,
    /// Tasks that live the whole run (closed clients, trace tasks), numbered from 0.
    persistent: usize,
    cpus: Vec<Cpu>,
    rqs: Vec<Runqueue>,
    cpu_until: MinTree,
    fluid_next: MinTree,
    balancer: Option<Box<dyn Balancer>>,
    balance_at: f64,
    next_ideal: usize,
    now: f64,
    // Arrival sources.
    next_open: f64,
    trace_at: usize,
    issued: u64,
    /// Closed clients thinking or about to submit (their next job is not issued yet).
    pending: u64,
    issue_limit: u64,
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
    // Measurement.
    measure_start: f64,
    measure_end: f64,
    in_system: u64,
    in_system_since: f64,
    in_system_area: f64,
    measured_arrivals: u64,
    completed_in_window: u64,
    response: Moments,
    /// Completed batches' mean response, and the running batch.
    batch_means: Vec<f64>,
    batch: Moments,
    wait: Moments,
    slowdown: Moments,
    q_response: Quantiles,
    q_wait: Quantiles,
    q_slowdown: Quantiles,
    classes: Vec<ClassStats>,
    shares: Option<Shares>,
    table: Option<JobTable>,
    schedule: Option<Vec<Segment>>,
    series: Option<Vec<LoadSample>>,
    context_switches: u64,
    migrations: u64,
    overhead: f64,
    work_completed: f64,
    events: u64,
}

pub fn run(cfg: &Config) -> Result<Output, SpecError> {
    let m = &cfg.machine;
    let per_cpu = m.runqueues == Runqueues::PerCpu;
    let nrq = if per_cpu { m.cpus } else { 1 };
    let mut rqs = Vec::with_capacity(nrq);
    for r in 0..nrq {
        let seed = policy_seed(cfg.seed, r);
        let mut policy = schedlab_policy::build(&cfg.policy, &cfg.params, seed)?;
        let fluid = policy.service() == Service::Fluid;
        if fluid {
            let share_cpus = if per_cpu { 1 } else { m.cpus };
            let f = policy.fluid().expect("fluid policy");
            f.set_cpus(share_cpus).map_err(|why| SpecError {
                key: "cpus".into(),
                value: m.cpus.to_string(),
                allowed: format!("{why} (or runqueues = per-cpu)"),
            })?;
            if m.timeslice.is_some() {
                return Err(SpecError {
                    key: "timeslice".into(),
                    value: m.timeslice.unwrap_or(0.0).to_string(),
                    allowed: format!(
                        "a policy that runs jobs in turns; {} shares the CPU continuously",
                        cfg.policy
                    ),
                });
            }
        }
        rqs.push(Runqueue {
            policy,
            fluid,
            runnable: 0,
            load: 0.0,
            tasks: 0,
            task_weight: 0.0,
            task_tickets: 0.0,
            queued: Vec::new(),
            hist: vec![0.0; LOAD_BINS],
            hist_at: 0.0,
            done_hist: vec![0; LOAD_BINS],
            fluid_busy: 0.0,
            fluid_busy_window: 0.0,
        });
    }
    let fluid = rqs[0].fluid;
    let issue_limit = match (&cfg.workload, cfg.jobs) {
        (Workload::Trace { rows }, Some(j)) => (cfg.warmup + j).min(rows.len() as u64),
        (Workload::Trace { rows }, None) => rows.len() as u64,
        (_, Some(j)) => cfg.warmup + j,
        (_, None) => u64::MAX,
    };
    let persistent = match &cfg.workload {
        Workload::Closed { clients } => clients.len(),
        Workload::Trace { rows } => rows
            .iter()
            .filter_map(|r| r.task)
            .max()
            .map_or(0, |t| t as usize + 1),
        Workload::Open { .. } => 0,
    };
    let closed = matches!(cfg.workload, Workload::Closed { .. });
    let balancer = per_cpu.then(|| balance::build(&m.balancer, m.cpus));
    let mut e = Engine {
        cfg,
        per_cpu,
        fluid,
        threads: m.timeslice.is_some(),
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
            };
            m.cpus
        ],
        rqs,
        cpu_until: MinTree::new(m.cpus),
        fluid_next: MinTree::new(nrq),
        balance_at: balancer.as_ref().map_or(f64::INFINITY, |b| b.next_tick()),
        balancer,
        next_ideal: 0,
        now: 0.0,
        next_open: f64::INFINITY,
        trace_at: 0,
        issued: 0,
        pending: 0,
        issue_limit,
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
        measure_start: f64::INFINITY,
        measure_end: cfg.time.unwrap_or(f64::INFINITY),
        in_system: 0,
        in_system_since: 0.0,
        in_system_area: 0.0,
        measured_arrivals: 0,
        completed_in_window: 0,
        response: Moments::default(),
        batch_means: Vec::new(),
        batch: Moments::default(),
        wait: Moments::default(),
        slowdown: Moments::default(),
        q_response: Quantiles::default(),
        q_wait: Quantiles::default(),
        q_slowdown: Quantiles::default(),
        classes: cfg.classes.iter().map(|_| ClassStats::default()).collect(),
        shares: (closed && persistent <= MAX_SHARE_TASKS).then(|| Shares::new(persistent)),
        table: cfg.keep_jobs.then(JobTable::default),
        schedule: cfg.keep_schedule.then(Vec::new),
        series: cfg.load_sample.map(|_| Vec::new()),
        context_switches: 0,
        migrations: 0,
        overhead: 0.0,
        work_completed: 0.0,
        events: 0,
    };
    e.start();
    e.main_loop();
    Ok(e.finish())
}

impl Engine<'_> {
    fn start(&mut self) {
        for t in 0..self.persistent {
            let class = match &self.cfg.workload {
                Workload::Closed { clients } => clients[t],
                _ => 0,
            };
            self.new_task(class, t as i64);
        }
        match &self.cfg.workload {
            Workload::Open { arrival } => {
                if self.issue_limit > 0 {
                    self.next_open = arrival.sample(&mut self.rng_arrival);
                }
            }
            Workload::Closed { clients } => {
                for (c, &class) in clients.iter().enumerate() {
                    if self.issued + self.pending < self.issue_limit {
                        let class = &self.cfg.classes[class as usize];
                        let t = class.think.sample(&mut self.rng_think);
                        self.pending += 1;
                        self.timer(t, Timer::Think(c as u32));
                    }
                }
            }
            Workload::Trace { .. } => {}
        }
        if self.cfg.load_sample.is_some() {
            self.timer(0.0, Timer::Sample);
        }
    }

    fn timer(&mut self, at: f64, what: Timer) {
        self.timer_seq += 1;
        self.timers.push(Reverse((Time(at), self.timer_seq, what)));
    }

    fn next_arrival(&self) -> f64 {
        match &self.cfg.workload {
            Workload::Open { .. } => self.next_open,
            Workload::Closed { .. } => f64::INFINITY,
            Workload::Trace { rows } => {
                if (self.trace_at as u64) < self.issue_limit {
                    rows[self.trace_at].arrival
                } else {
                    f64::INFINITY
                }
            }
        }
    }

    fn next_event(&self) -> f64 {
        let timer = self.timers.peek().map_or(f64::INFINITY, |r| r.0 .0 .0);
        let work = self
            .next_arrival()
            .min(self.cpu_until.min())
            .min(self.fluid_next.min())
            .min(timer);
        // With nothing left to arrive, run or wake, balancing passes alone would go on forever.
        if work == f64::INFINITY {
            return work;
        }
        work.min(self.balance_at)
    }

    fn main_loop(&mut self) {
        let stop = self.cfg.time.unwrap_or(f64::INFINITY);
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
    fn advance_to(&mut self, t: f64) {
        if let Some(s) = &mut self.shares {
            let (a, b) = (s.last.max(self.measure_start), t.min(self.measure_end));
            s.integrate(a, b);
            s.last = t;
        }
        if self.fluid {
            let (ms, me, now) = (self.measure_start, self.measure_end, self.now);
            let window = (t.min(me) - now.max(ms)).max(0.0);
            for rq in &mut self.rqs {
                let f = rq.policy.fluid().expect("fluid");
                let busy = f.busy_cpus();
                f.advance(t);
                rq.fluid_busy += busy * (t - now);
                rq.fluid_busy_window += busy * window;
            }
        }
        self.now = t;
    }

    /// Length of [a, b] inside the measured interval.
    fn clip(&self, a: f64, b: f64) -> f64 {
        (b.min(self.measure_end) - a.max(self.measure_start)).max(0.0)
    }

    fn step(&mut self) {
        let now = self.now;
        while self.cpu_until.min() <= now {
            let c = self.cpu_until.argmin();
            self.events += 1;
            self.end_run(c, false);
        }
        while self.fluid_next.min() <= now {
            let r = self.fluid_next.argmin();
            self.events += 1;
            self.fluid_done(r);
        }
        while let Some(&Reverse((Time(t), _, what))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            self.events += 1;
            match what {
                Timer::Think(task) => {
                    self.pending -= 1;
                    self.submit(task);
                }
                Timer::Io(job) => self.io_done(JobId(job)),
                Timer::Sample => self.sample(),
            }
        }
        self.admit_arrivals();
        if self.balance_at <= now {
            self.events += 1;
            self.with_balancer(|b, e| b.tick(e.now, e));
        }
        let ready = std::mem::take(&mut self.ready);
        for &id in &ready {
            self.make_ready(id);
        }
        let expired = std::mem::take(&mut self.expired);
        for &id in &expired {
            let r = self.jobs[id.index()].rq as usize;
            self.enqueue(r, id, Enqueue::Expired);
        }
        if !self.fluid {
            self.fill_idle();
            for &id in &ready {
                let j = &self.jobs[id.index()];
                if j.alive && j.queued {
                    self.maybe_preempt(id);
                }
            }
        }
        self.ready = ready;
        self.ready.clear();
        self.expired = expired;
        self.expired.clear();
        if let Some(s) = &mut self.shares {
            if s.dirty {
                s.recompute(self.cpus.len());
            }
        }
    }

    fn with_balancer(&mut self, f: impl FnOnce(&mut dyn Balancer, &mut Self)) {
        if let Some(mut b) = self.balancer.take() {
            f(b.as_mut(), self);
            self.balance_at = b.next_tick();
            self.balancer = Some(b);
        }
    }

    /// A persistent task's entitlement from now on (0 while it is not runnable: a sleeping
    /// task's share passes to the others).
    fn set_entitlement(&mut self, task: usize, weight: f64) {
        if let Some(s) = &mut self.shares {
            if task < s.weight.len() {
                s.weight[task] = weight;
                s.dirty = true;
            }
        }
    }

    fn set_in_system(&mut self, delta: i64) {
        self.in_system_area += self.in_system as f64 * self.clip(self.in_system_since, self.now);
        self.in_system_since = self.now;
        self.in_system = (self.in_system as i64 + delta) as u64;
    }

    /// Changes a runqueue's runnable count (and its time-weighted histogram).
    fn set_runnable(&mut self, r: usize, delta: i32, weight: f64) {
        let (ms, me, now) = (self.measure_start, self.measure_end, self.now);
        let rq = &mut self.rqs[r];
        let bin = (rq.runnable as usize).min(LOAD_BINS - 1);
        rq.hist[bin] += (now.min(me) - rq.hist_at.max(ms)).max(0.0);
        rq.hist_at = now;
        rq.runnable = rq.runnable.wrapping_add_signed(delta);
        rq.load += weight * delta as f64;
        if rq.runnable == 0 {
            rq.load = 0.0;
        }
    }

    fn new_task(&mut self, class: u32, client: i64) -> u32 {
        let task = Task {
            class,
            client,
            home: 0,
            ideal: 0,
            last_cpu: NONE,
            slice_left: 0.0,
            submitted: 0,
            assigned: false,
            weight: 0.0,
            tickets: 0.0,
            entity: None,
            migrations: 0,
            response: Moments::default(),
            boost: 0.0,
            sleep_avg: 0.0,
            slept_at: f64::NAN,
        };
        match self.free_tasks.pop() {
            Some(t) => {
                self.tasks[t as usize] = task;
                t
            }
            None => {
                self.tasks.push(task);
                (self.tasks.len() - 1) as u32
            }
        }
    }

    /// A persistent task (closed client or trace task) submits its next job now.
    fn submit(&mut self, task: u32) {
        let class = self.tasks[task as usize].class as usize;
        let size = self.cfg.classes[class].size.sample(&mut self.rng_size);
        self.issued += 1;
        let reuse = self.tasks[task as usize].entity;
        let id = self.new_job(class, task, size, None, reuse);
        self.ready.push(id);
    }

    /// Creates the jobs arriving now (open or trace) and lists them in `ready`.
    fn admit_arrivals(&mut self) {
        while self.next_arrival() <= self.now {
            self.events += 1;
            match &self.cfg.workload {
                Workload::Open { arrival } => {
                    let class = self.pick_class();
                    self.issued += 1;
                    self.next_open = if self.issued < self.issue_limit {
                        self.now + arrival.sample(&mut self.rng_arrival)
                    } else {
                        f64::INFINITY
                    };
                    let size = self.cfg.classes[class].size.sample(&mut self.rng_size);
                    let task = self.new_task(class as u32, -1);
                    let id = self.new_job(class, task, size, None, None);
                    self.ready.push(id);
                }
                Workload::Trace { rows } => {
                    let row = rows[self.trace_at].clone();
                    self.trace_at += 1;
                    self.issued += 1;
                    let class = row.class as usize;
                    let task = match row.task {
                        Some(t) => t,
                        None => self.new_task(class as u32, -1),
                    };
                    let id = self.new_job(class, task, row.size, Some(row), None);
                    self.ready.push(id);
                }
                Workload::Closed { .. } => unreachable!("closed clients submit by timer"),
            }
        }
    }

    fn pick_class(&mut self) -> usize {
        if self.cfg.classes.len() == 1 {
            return 0;
        }
        let u: f64 = self.rng_class.random();
        self.cfg
            .classes
            .iter()
            .position(|c| u < c.cumulative)
            .unwrap_or(self.cfg.classes.len() - 1)
    }

    /// A new job in a fresh slot, or in `reuse` (a thread's entity, timeslice mode).
    fn new_job(
        &mut self,
        class: usize,
        task: u32,
        size: f64,
        row: Option<crate::trace::TraceRow>,
        reuse: Option<JobId>,
    ) -> JobId {
        let now = self.now;
        let seq = self.issued - 1;
        let measured = seq >= self.cfg.warmup && now >= self.cfg.warmup_time;
        if measured {
            if self.measure_start == f64::INFINITY {
                self.measure_start = now;
                self.in_system_since = now;
                for rq in &mut self.rqs {
                    rq.hist_at = now;
                }
                if let Some(s) = &mut self.shares {
                    s.last = now;
                }
            }
            self.measured_arrivals += 1;
        }
        let c = &self.cfg.classes[class];
        let id = match reuse.or_else(|| self.free_jobs.pop().map(JobId)) {
            Some(id) => id,
            None => {
                self.jobs.push(Job {
                    view: JobView::new(JobId(self.jobs.len() as u32), 0.0, 0.0),
                    seq: 0,
                    task: 0,
                    first_run: f64::NAN,
                    cpu: NONE,
                    on_cpu: NONE,
                    rq: 0,
                    switches: 0,
                    migrations: 0,
                    alive: false,
                    measured: false,
                    queued: false,
                    queued_at: 0,
                    ready_since: 0.0,
                    burst_size: 0.0,
                    burst_left: 0.0,
                    bursts_left: 0,
                    io_time: 0.0,
                    io_since: 0.0,
                    waited: 0.0,
                    last_ran: f64::NEG_INFINITY,
                    entered: Enqueue::Arrival,
                    base_priority: 0.0,
                    woke_from_io: false,
                });
                JobId((self.jobs.len() - 1) as u32)
            }
        };
        let mut view = JobView::new(id, now, size);
        view.class = class as u32;
        view.task = task;
        view.priority = c.priority;
        view.tickets = c.tickets;
        view.weight = c.weight;
        view.deadline = c.deadline.map_or(f64::INFINITY, |d| now + d);
        if let Some(r) = row {
            view.priority = r.priority.unwrap_or(view.priority);
            view.tickets = r.tickets.unwrap_or(view.tickets);
            view.weight = r.weight.unwrap_or(view.weight);
            view.deadline = r.deadline.map_or(view.deadline, |d| now + d);
        }
        let t = &mut self.tasks[task as usize];
        // A task's first job is a fork; later ones wake it up.
        let entered = if t.submitted == 0 {
            Enqueue::Arrival
        } else {
            Enqueue::Wakeup
        };
        t.submitted += 1;
        let bursts = c.bursts;
        let old = &self.jobs[id.index()];
        let (cpu, last_ran) = if reuse.is_some() {
            (old.cpu, old.last_ran)
        } else {
            (NONE, f64::NEG_INFINITY)
        };
        self.jobs[id.index()] = Job {
            seq,
            task,
            first_run: f64::NAN,
            cpu,
            on_cpu: NONE,
            rq: old.rq,
            switches: 0,
            migrations: 0,
            alive: true,
            measured,
            queued: false,
            queued_at: 0,
            ready_since: now,
            burst_size: size / bursts as f64,
            burst_left: size / bursts as f64,
            bursts_left: bursts - 1,
            io_time: 0.0,
            io_since: 0.0,
            waited: 0.0,
            last_ran,
            entered,
            base_priority: view.priority,
            woke_from_io: false,
            view,
        };
        if self.threads && task < self.persistent as u32 {
            self.tasks[task as usize].entity = Some(id);
        }
        self.set_in_system(1);
        id
    }

    /// Places a newly runnable job (new task, wake-up) and enqueues it.
    fn make_ready(&mut self, id: JobId) {
        let why = self.jobs[id.index()].entered;
        self.wake_boost(id);
        let r = if self.per_cpu { self.place(id, why) } else { 0 };
        let j = &self.jobs[id.index()];
        let entitled = self.rqs[r].policy.entitlement(&j.view);
        self.set_entitlement(j.task as usize, entitled);
        self.enqueue(r, id, why);
    }

    fn loads(&self) -> Vec<CpuLoad> {
        self.rqs
            .iter()
            .map(|rq| CpuLoad {
                runnable: rq.runnable,
                tasks: rq.tasks,
                weight: rq.task_weight,
                tickets: rq.task_tickets,
            })
            .collect()
    }

    /// The CPU (runqueue) for a new task or a waking one.
    fn place(&mut self, id: JobId, why: Enqueue) -> usize {
        let m = &self.cfg.machine;
        let (task, class) = {
            let j = &self.jobs[id.index()];
            (j.task as usize, j.view.class as usize)
        };
        let new = why == Enqueue::Arrival;
        if new {
            if let Some(pinned) = m.start_pinned {
                let c = pinned as usize;
                self.tasks[task].ideal = c as u32;
                self.assign(task, id, c);
                return c;
            }
        }
        let placed = if new || m.placement.places_wakeups() {
            let loads = self.loads();
            let t = &self.tasks[task];
            let place = TaskPlace {
                new,
                home: t.home as usize,
                ideal: t.ideal as usize,
                last: t.last_cpu.max(0) as usize,
                affinity: &self.cfg.classes[class].affinity,
            };
            let mut ideal = self.next_ideal;
            let c = m
                .placement
                .select(&place, &loads, &mut ideal, &mut self.rng_place);
            self.next_ideal = ideal;
            if new {
                self.tasks[task].ideal = c as u32;
            }
            c
        } else {
            let t = &self.tasks[task];
            match m.placement {
                crate::placement::Placement::RoundRobin => t.ideal as usize,
                crate::placement::Placement::Last => t.last_cpu.max(t.home as i32) as usize,
                _ => t.home as usize,
            }
        };
        let last = match self.tasks[task].last_cpu {
            NONE => placed,
            c => c as usize,
        };
        let mut c = placed;
        self.with_balancer(|b, e| c = b.wake(id, placed, last, e));
        self.assign(task, id, c);
        c
    }

    /// Makes `c` the home CPU of the task (for placement by least load).
    fn assign(&mut self, task: usize, id: JobId, c: usize) {
        let t = &self.tasks[task];
        if t.assigned && t.home as usize == c {
            return;
        }
        self.release_task(task);
        let v = &self.jobs[id.index()].view;
        let t = &mut self.tasks[task];
        t.assigned = true;
        t.home = c as u32;
        t.weight = v.weight;
        t.tickets = v.tickets;
        let rq = &mut self.rqs[c];
        rq.tasks += 1;
        rq.task_weight += t.weight;
        rq.task_tickets += t.tickets;
    }

    fn release_task(&mut self, task: usize) {
        let t = &mut self.tasks[task];
        if !t.assigned {
            return;
        }
        t.assigned = false;
        let rq = &mut self.rqs[t.home as usize];
        rq.tasks -= 1;
        rq.task_weight -= t.weight;
        rq.task_tickets -= t.tickets;
    }

    fn enqueue(&mut self, r: usize, id: JobId, why: Enqueue) {
        let now = self.now;
        if matches!(why, Enqueue::Arrival | Enqueue::Wakeup | Enqueue::Migrated) {
            let w = self.jobs[id.index()].view.weight;
            self.set_runnable(r, 1, w);
        }
        let j = &mut self.jobs[id.index()];
        j.rq = r as u32;
        j.ready_since = now;
        if self.rqs[r].fluid {
            let mut v = j.view.clone();
            // The fluid serves the current burst: it sees that as the whole job.
            v.size = j.burst_left;
            v.remaining = j.burst_left;
            v.attained = 0.0;
            if j.first_run.is_nan() {
                j.first_run = now;
            }
            j.cpu = if self.per_cpu { r as i32 } else { NONE };
            j.queued = true;
            let f = self.rqs[r].policy.fluid().expect("fluid");
            f.advance(now);
            f.add(&v, now);
            let next = f.next_event(now).unwrap_or(f64::INFINITY);
            self.fluid_next.set(r, next);
            return;
        }
        j.queued = true;
        self.rqs[r].policy.enqueue(&j.view, now, why);
        if self.per_cpu {
            j.queued_at = self.rqs[r].queued.len() as u32;
            self.rqs[r].queued.push(id);
            self.cpus[r].idle_told = false;
        }
    }

    /// Bookkeeping of a job leaving its runqueue's queue (picked or moved).
    fn unqueue(&mut self, id: JobId) {
        let j = &mut self.jobs[id.index()];
        j.queued = false;
        if self.per_cpu {
            let r = j.rq as usize;
            let at = j.queued_at as usize;
            let list = &mut self.rqs[r].queued;
            list.swap_remove(at);
            if let Some(&moved) = list.get(at) {
                self.jobs[moved.index()].queued_at = at as u32;
            }
        }
    }

    fn fill_idle(&mut self) {
        let now = self.now;
        for c in 0..self.cpus.len() {
            if self.cpus[c].job.is_some() {
                continue;
            }
            let r = if self.per_cpu { c } else { 0 };
            let mut next = self.rqs[r].policy.pick_next(now);
            if next.is_none() && self.per_cpu && !self.cpus[c].idle_told {
                self.cpus[c].idle_told = true;
                self.with_balancer(|b, e| b.idle(c, e.now, e));
                next = self.rqs[r].policy.pick_next(now);
            }
            match next {
                Some(id) => {
                    self.unqueue(id);
                    self.dispatch(c, id, false);
                }
                None if !self.per_cpu => break,
                None => {}
            }
        }
    }

    /// The CPU whose job the incoming job should preempt: among those it preempts, one whose
    /// job preempts none of the others (the least important).
    fn victim(&self, incoming: JobId) -> Option<usize> {
        let inc = &self.jobs[incoming.index()];
        let r = inc.rq as usize;
        let policy = &self.rqs[r].policy;
        let range = if self.per_cpu {
            r..r + 1
        } else {
            0..self.cpus.len()
        };
        let mut best: Option<(usize, JobView)> = None;
        for c in range {
            let Some(running) = self.cpus[c].job else {
                continue;
            };
            let running = self.current_view(c, running);
            if !policy.preempts(&inc.view, &running, self.now) {
                continue;
            }
            match &best {
                Some((_, b)) if !policy.preempts(b, &running, self.now) => {}
                _ => best = Some((c, running)),
            }
        }
        best.map(|(c, _)| c)
    }

    fn maybe_preempt(&mut self, id: JobId) {
        let Some(c) = self.victim(id) else { return };
        let now = self.now;
        self.end_run(c, true);
        let victim = self.expired.pop().expect("preempted job");
        let r = self.jobs[victim.index()].rq as usize;
        self.enqueue(r, victim, Enqueue::Preempted);
        if let Some(next) = self.rqs[r].policy.pick_next(now) {
            self.unqueue(next);
            self.dispatch(c, next, false);
        }
    }

    /// A running job's view with its service brought up to now.
    fn current_view(&self, c: usize, id: JobId) -> JobView {
        let cpu = &self.cpus[c];
        let mut v = self.jobs[id.index()].view.clone();
        let ran = (self.now - cpu.run_start).clamp(0.0, cpu.run_len);
        v.remaining -= ran;
        v.attained += ran;
        v
    }

    /// Starts `id` on CPU `c`. `continuing`: the same thread goes on with its next job.
    fn dispatch(&mut self, c: usize, id: JobId, continuing: bool) {
        let now = self.now;
        let m = &self.cfg.machine;
        let j = &mut self.jobs[id.index()];
        let t = &mut self.tasks[j.task as usize];
        if j.first_run.is_nan() {
            j.first_run = now;
        }
        let cpu = &mut self.cpus[c];
        if let Some((prev, seq)) = cpu.left_unfinished.take() {
            if seq != j.seq {
                let p = &mut self.jobs[prev.index()];
                if p.alive && p.seq == seq {
                    p.switches += 1;
                }
            }
        }
        let j = &mut self.jobs[id.index()];
        let mut overhead = if continuing || cpu.last_seq == j.seq {
            0.0
        } else {
            m.context_switch
        };
        if j.cpu != NONE && j.cpu != c as i32 {
            j.migrations += 1;
            overhead += m.migration_cost;
        }
        if t.last_cpu != NONE && t.last_cpu != c as i32 {
            t.migrations += 1;
        }
        j.cpu = c as i32;
        j.on_cpu = c as i32;
        if !continuing {
            j.waited += now + overhead - j.ready_since;
        }
        t.last_cpu = c as i32;
        let slice = match m.timeslice {
            Some(ts) => {
                if t.slice_left <= EPS {
                    t.slice_left = ts;
                }
                Some(t.slice_left)
            }
            None => self.rqs[j.rq as usize].policy.slice(&j.view, now),
        };
        let run_len = slice.map_or(j.burst_left, |s| s.min(j.burst_left));
        cpu.job = Some(id);
        cpu.dispatched = now;
        cpu.run_start = now + overhead;
        cpu.run_len = run_len;
        cpu.last_seq = j.seq;
        cpu.idle_told = false;
        if cpu.busy_since.is_nan() {
            cpu.busy_since = now;
        }
        self.cpu_until.set(c, now + overhead + run_len);
    }

    /// Ends the run on CPU `c` now: burst done, slice expired or (`preempted`) preemption.
    fn end_run(&mut self, c: usize, preempted: bool) {
        let now = self.now;
        let cpu = &mut self.cpus[c];
        let id = cpu.job.take().expect("busy CPU");
        let ran = if preempted {
            (now - cpu.run_start).clamp(0.0, cpu.run_len)
        } else {
            cpu.run_len
        };
        self.overhead += cpu.run_start.min(now) - cpu.dispatched;
        let start = cpu.run_start;
        self.cpu_until.set(c, f64::INFINITY);
        let j = &mut self.jobs[id.index()];
        j.on_cpu = NONE;
        j.last_ran = now;
        let burst_done = !preempted && ran >= j.burst_left - EPS * j.burst_size.max(1.0);
        let served = if burst_done { j.burst_left } else { ran };
        j.burst_left -= served;
        if burst_done {
            j.burst_left = 0.0;
        }
        j.view.remaining -= served;
        j.view.attained += served;
        if burst_done && j.bursts_left == 0 {
            j.view.remaining = 0.0;
            j.view.attained = j.view.size;
        }
        let task = j.task as usize;
        if self.threads {
            self.tasks[task].slice_left -= ran;
        }
        if let Some(sched) = &mut self.schedule {
            if ran > 0.0 {
                let client = self.tasks[task].client;
                sched.push(Segment {
                    cpu: c as u32,
                    job: j.seq,
                    task: client,
                    start,
                    end: start + ran,
                });
            }
        }
        if let Some(sh) = &mut self.shares {
            let (a, b) = (
                start.max(self.measure_start),
                (start + ran).min(self.measure_end),
            );
            if b > a && task < sh.service.len() {
                sh.service[task] += b - a;
            }
        }
        if let Boost::Linux26 { sleep_avg_max, .. } = self.cfg.machine.boost {
            let t = &mut self.tasks[task];
            t.sleep_avg = (t.sleep_avg - ran).clamp(0.0, sleep_avg_max);
        }
        let r = j.rq as usize;
        self.rqs[r].policy.charge(&j.view, ran, now);
        if burst_done {
            self.close_busy(c);
            if self.jobs[id.index()].bursts_left > 0 {
                self.block(id);
            } else {
                self.job_done(id, Some(c));
            }
            return;
        }
        if !preempted && self.cfg.machine.boost == Boost::Windows {
            // A quantum used up costs one level of boost.
            let t = &mut self.tasks[task];
            t.boost = (t.boost - 1.0).max(0.0);
        }
        self.apply_boost(id);
        let seq = self.jobs[id.index()].seq;
        self.cpus[c].left_unfinished = Some((id, seq));
        self.expired.push(id);
        if !preempted {
            self.close_busy(c);
        }
    }

    /// Closes CPU `c`'s busy interval; a dispatch at this instant reopens it.
    fn close_busy(&mut self, c: usize) {
        let now = self.now;
        let since = std::mem::replace(&mut self.cpus[c].busy_since, f64::NAN);
        let window = self.clip(since, now);
        let cpu = &mut self.cpus[c];
        cpu.busy_total += now - since;
        cpu.busy_window += window;
    }

    /// The current burst of a job is done and an I/O wait follows (a fluid policy has
    /// already let the job go; `sleep` tells a discrete one).
    fn block(&mut self, id: JobId) {
        let now = self.now;
        let j = &self.jobs[id.index()];
        let (r, w, task) = (j.rq as usize, j.view.weight, j.task as usize);
        self.rqs[r].policy.sleep(&j.view, now);
        self.set_runnable(r, -1, w);
        self.set_entitlement(task, 0.0);
        self.tasks[task].slept_at = now;
        let class = &self.cfg.classes[self.jobs[id.index()].view.class as usize];
        let io = class
            .io
            .as_ref()
            .expect("validated: io with bursts")
            .sample(&mut self.rng_io);
        self.jobs[id.index()].io_since = now;
        match self.cfg.io_device {
            IoDevice::Delay => self.timer(now + io, Timer::Io(id.0)),
            IoDevice::Fcfs if !self.device_busy => {
                self.device_busy = true;
                self.timer(now + io, Timer::Io(id.0));
            }
            IoDevice::Fcfs => self.device_queue.push_back((id.0, io)),
        }
    }

    fn io_done(&mut self, id: JobId) {
        let now = self.now;
        if self.cfg.io_device == IoDevice::Fcfs {
            match self.device_queue.pop_front() {
                Some((next, io)) => self.timer(now + io, Timer::Io(next)),
                None => self.device_busy = false,
            }
        }
        let j = &mut self.jobs[id.index()];
        j.io_time += now - j.io_since;
        j.bursts_left -= 1;
        j.burst_left = j.burst_size;
        j.entered = Enqueue::Wakeup;
        j.woke_from_io = true;
        self.ready.push(id);
    }

    /// Windows and Linux 2.6 wake-up boosts: what a wake-up earns (a Windows boost by I/O
    /// kind; sleep time towards the Linux sleep average), then the effective priority.
    fn wake_boost(&mut self, id: JobId) {
        let boost = self.cfg.machine.boost;
        if boost == Boost::None {
            return;
        }
        let now = self.now;
        let j = &mut self.jobs[id.index()];
        let t = &mut self.tasks[j.task as usize];
        match boost {
            Boost::Windows if j.woke_from_io => {
                let c = &self.cfg.classes[j.view.class as usize];
                t.boost = t.boost.max(c.io_boost);
            }
            Boost::Linux26 { sleep_avg_max, .. } if !t.slept_at.is_nan() => {
                t.sleep_avg = (t.sleep_avg + now - t.slept_at).min(sleep_avg_max);
            }
            _ => {}
        }
        j.woke_from_io = false;
        t.slept_at = f64::NAN;
        self.apply_boost(id);
    }

    /// The job's priority as the boost of its task stands now (lower runs first).
    fn apply_boost(&mut self, id: JobId) {
        let j = &mut self.jobs[id.index()];
        let t = &self.tasks[j.task as usize];
        j.view.priority = match self.cfg.machine.boost {
            Boost::None => return,
            Boost::Windows => j.base_priority - t.boost,
            Boost::Linux26 { max, sleep_avg_max } => {
                // The O(1) scheduler's bonus: -max for a CPU hog, +max for a task that sleeps.
                j.base_priority - (2.0 * max * t.sleep_avg / sleep_avg_max - max)
            }
        };
    }

    fn fluid_done(&mut self, r: usize) {
        let now = self.now;
        // Advancing by zero still settles the fluid (FB merges groups whose levels differ by
        // less than the clock resolves), so the next event moves past `now`.
        self.rqs[r].policy.fluid().expect("fluid").advance(now);
        loop {
            let f = self.rqs[r].policy.fluid().expect("fluid");
            let Some(id) = f.pop_done() else { break };
            let j = &mut self.jobs[id.index()];
            let served = j.burst_left;
            j.burst_left = 0.0;
            j.view.remaining -= served;
            j.view.attained += served;
            if let Some(sh) = &mut self.shares {
                let t = j.task as usize;
                if t < sh.service.len() {
                    sh.service[t] += served;
                }
            }
            j.queued = false;
            if j.bursts_left > 0 {
                self.block(id);
            } else {
                j.view.remaining = 0.0;
                j.view.attained = j.view.size;
                self.job_done(id, None);
            }
        }
        let f = self.rqs[r].policy.fluid().expect("fluid");
        let next = f.next_event(now).unwrap_or(f64::INFINITY);
        self.fluid_next.set(r, next);
        if self.per_cpu && self.rqs[r].runnable == 0 {
            self.with_balancer(|b, e| b.idle(r, e.now, e));
        }
    }

    /// The job's last burst is done (on CPU `cpu`, or in a fluid runqueue).
    fn job_done(&mut self, id: JobId, cpu: Option<usize>) {
        let now = self.now;
        self.record(id);
        let j = &self.jobs[id.index()];
        let (task, r, w) = (j.task as usize, j.rq as usize, j.view.weight);
        let persistent = task < self.persistent;
        let closed = matches!(self.cfg.workload, Workload::Closed { .. });
        self.set_entitlement(task, 0.0);
        let next_think = (closed && persistent && self.issued + self.pending < self.issue_limit)
            .then(|| {
                let class = &self.cfg.classes[self.tasks[task].class as usize];
                class.think.sample(&mut self.rng_think)
            });
        if self.threads && closed && persistent {
            if let Some(think) = next_think {
                if think <= 0.0 {
                    if let Some(c) = cpu {
                        // The thread starts its next request at once: it keeps the CPU and
                        // whatever is left of its slice.
                        self.in_place_next(task);
                        if self.tasks[task].slice_left > EPS {
                            self.dispatch(c, id, true);
                        } else {
                            self.expired.push(id);
                        }
                        return;
                    }
                }
                // The thread sleeps while it thinks and wakes with the same entity.
                self.rqs[r].policy.sleep(&self.jobs[id.index()].view, now);
                self.set_runnable(r, -1, w);
                self.tasks[task].slept_at = now;
                self.pending += 1;
                self.timer(now + think, Timer::Think(task as u32));
                return;
            }
        }
        self.rqs[r].policy.exit(&self.jobs[id.index()].view, now);
        self.set_runnable(r, -1, w);
        self.jobs[id.index()].alive = false;
        if self.tasks[task].entity == Some(id) {
            self.tasks[task].entity = None;
        }
        self.free_jobs.push(id.0);
        match next_think {
            Some(think) => {
                self.tasks[task].slept_at = now;
                if think <= 0.0 {
                    self.submit(task as u32);
                } else {
                    self.pending += 1;
                    self.timer(now + think, Timer::Think(task as u32));
                }
            }
            None if !persistent => {
                self.release_task(task);
                self.free_tasks.push(task as u32);
            }
            None => {}
        }
    }

    /// Thread mode: the task's entity takes its next job now, without leaving the CPU.
    fn in_place_next(&mut self, task: usize) {
        let class = self.tasks[task].class as usize;
        let size = self.cfg.classes[class].size.sample(&mut self.rng_size);
        self.issued += 1;
        let id = self.tasks[task].entity.expect("thread entity");
        let (cpu, rq, last_ran) = {
            let j = &self.jobs[id.index()];
            (j.cpu, j.rq, j.last_ran)
        };
        self.new_job(class, task as u32, size, None, Some(id));
        let j = &mut self.jobs[id.index()];
        j.cpu = cpu;
        j.rq = rq;
        j.last_ran = last_ran;
    }

    /// Measures a completed job.
    fn record(&mut self, id: JobId) {
        let now = self.now;
        self.set_in_system(-1);
        let j = &self.jobs[id.index()];
        let view = &j.view;
        self.work_completed += view.size;
        let response = now - view.arrival;
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
            self.response.add(response);
            if self.cfg.batch_size > 0 {
                self.batch.add(response);
                if self.batch.n == self.cfg.batch_size {
                    self.batch_means.push(self.batch.mean);
                    self.batch = Moments::default();
                }
            }
            self.wait.add(wait);
            self.slowdown.add(slowdown);
            self.q_response.record(response);
            self.q_wait.record(wait);
            self.q_slowdown.record(slowdown);
            self.context_switches += j.switches as u64;
            self.migrations += j.migrations as u64;
            let cs = &mut self.classes[view.class as usize];
            cs.response.add(response);
            cs.wait.add(wait);
            cs.slowdown.add(slowdown);
            if self.cfg.classes.len() > 1 {
                cs.quantiles.record(response);
            }
            let t = &mut self.tasks[j.task as usize];
            if (j.task as usize) < self.persistent {
                t.response.add(response);
            }
            let rq = &mut self.rqs[j.rq as usize];
            rq.done_hist[(rq.runnable as usize).min(LOAD_BINS - 1)] += 1;
            if let Some(tab) = &mut self.table {
                tab.job.push(j.seq);
                tab.client.push(t.client);
                tab.class.push(view.class);
                tab.cpu.push(j.cpu);
                tab.arrival.push(view.arrival);
                tab.first_run.push(j.first_run);
                tab.completion.push(now);
                tab.size.push(view.size);
                tab.wait.push(wait);
                tab.response.push(response);
                tab.slowdown.push(slowdown);
                tab.context_switches.push(j.switches);
                tab.migrations.push(j.migrations);
            }
        }
        if now <= self.measure_end && now >= self.measure_start {
            self.completed_in_window += 1;
        }
    }

    fn sample(&mut self) {
        let now = self.now;
        if let Some(s) = &mut self.series {
            for (r, rq) in self.rqs.iter().enumerate() {
                s.push(LoadSample {
                    time: now,
                    cpu: if self.per_cpu { r as i32 } else { NONE },
                    runnable: rq.runnable,
                });
            }
        }
        let period = self.cfg.load_sample.expect("sampling");
        let more = self.cfg.time.is_some_and(|t| now + period <= t)
            || self.issued < self.issue_limit
            || self.in_system > 0;
        if more {
            self.timer(now + period, Timer::Sample);
        }
    }

    fn finish(mut self) -> Output {
        let end = self.now;
        // Close open intervals at the end of the run.
        for c in 0..self.cpus.len() {
            let cpu = &self.cpus[c];
            if let Some(id) = cpu.job {
                let ran = (end - cpu.run_start).clamp(0.0, cpu.run_len);
                self.overhead += cpu.run_start.min(end) - cpu.dispatched;
                let j = &mut self.jobs[id.index()];
                j.view.attained += ran;
                j.view.remaining -= ran;
            }
            if !self.cpus[c].busy_since.is_nan() {
                self.close_busy(c);
            }
        }
        self.set_in_system(0);
        for r in 0..self.rqs.len() {
            self.set_runnable(r, 0, 0.0);
        }
        let mut partial = 0.0;
        let mut unfinished = 0;
        for i in 0..self.jobs.len() {
            let j = &self.jobs[i];
            if !j.alive {
                continue;
            }
            unfinished += 1;
            // A job in a fluid runqueue has also received service since it joined it.
            let in_fluid = if self.rqs[j.rq as usize].fluid && j.queued {
                let f = self.rqs[j.rq as usize].policy.fluid().expect("fluid");
                f.attained(JobId(i as u32))
            } else {
                0.0
            };
            partial += self.jobs[i].view.attained + in_fluid;
        }
        let window_end = if self.measure_end.is_finite() {
            self.measure_end
        } else {
            end
        };
        let window = (window_end - self.measure_start).max(0.0);
        let k = self.cpus.len() as f64;
        let (busy_time, per_cpu) = if self.fluid {
            let busy: f64 = self.rqs.iter().map(|rq| rq.fluid_busy).sum();
            let per: Vec<f64> = if self.per_cpu {
                self.rqs
                    .iter()
                    .map(|rq| rq.fluid_busy_window / window)
                    .collect()
            } else {
                vec![self.rqs[0].fluid_busy_window / (window * k); self.cpus.len()]
            };
            (busy, per)
        } else {
            let total: f64 = self.cpus.iter().map(|c| c.busy_total).sum::<f64>() - self.overhead;
            let per = self
                .cpus
                .iter()
                .map(|c| {
                    if window > 0.0 {
                        c.busy_window / window
                    } else {
                        f64::NAN
                    }
                })
                .collect();
            (total, per)
        };
        let ps = [0.5, 0.95, 0.99];
        let qr = self.q_response.quantiles(&ps);
        let qw = self.q_wait.quantiles(&ps);
        let qs = self.q_slowdown.quantiles(&[0.99]);
        let rate = |n: u64| {
            if window > 0.0 {
                n as f64 / window
            } else {
                f64::NAN
            }
        };
        let mut tasks = Vec::new();
        let mut jain_share = f64::NAN;
        let mut task_means = Moments::default();
        if self.persistent > 0 {
            let n = self.persistent;
            let (service, entitled): (Vec<f64>, Vec<f64>) = match &self.shares {
                Some(s) => (s.service.clone(), s.entitled.clone()),
                None => (vec![f64::NAN; n], vec![f64::NAN; n]),
            };
            let total_service: f64 = service.iter().sum();
            let total_entitled: f64 = entitled.iter().sum();
            let mut ratios = Moments::default();
            for i in 0..n {
                let t = &self.tasks[i];
                let share = service[i] / total_service;
                let ent = entitled[i] / total_entitled;
                let ratio = share / ent;
                if ratio.is_finite() {
                    ratios.add(ratio);
                }
                if t.response.n > 0 {
                    task_means.add(t.response.mean);
                }
                tasks.push(TaskRow {
                    task: i as u32,
                    class: self.cfg.classes[t.class as usize].name.clone(),
                    jobs: t.response.n,
                    response_mean: t.response.mean_or_nan(),
                    migrations: t.migrations,
                    cpu: t.last_cpu,
                    service: service[i],
                    share,
                    entitled: ent,
                    share_ratio: ratio,
                });
            }
            jain_share = ratios.jain();
        }
        let task_response_cv = if task_means.n >= 2 {
            task_means.std() / task_means.mean
        } else {
            f64::NAN
        };
        let multi = self.cfg.classes.len() > 1;
        let classes = self
            .classes
            .iter_mut()
            .zip(&self.cfg.classes)
            .map(|(s, c)| {
                let q = if multi {
                    s.quantiles.quantiles(&ps)
                } else {
                    qr.clone()
                };
                ClassRow {
                    class: c.name.clone(),
                    jobs: s.response.n,
                    response_mean: s.response.mean_or_nan(),
                    response_p50: q[0],
                    response_p95: q[1],
                    response_p99: q[2],
                    wait_mean: s.wait.mean_or_nan(),
                    slowdown_mean: s.slowdown.mean_or_nan(),
                }
            })
            .collect();
        let mut loads = Vec::new();
        let mut runnable_mean = Vec::new();
        for (r, rq) in self.rqs.iter().enumerate() {
            let total_time: f64 = rq.hist.iter().sum();
            let total_done: u64 = rq.done_hist.iter().sum();
            let mean: f64 = rq
                .hist
                .iter()
                .enumerate()
                .map(|(n, t)| n as f64 * t)
                .sum::<f64>()
                / total_time;
            runnable_mean.push(mean);
            for n in 0..LOAD_BINS {
                if rq.hist[n] > 0.0 || rq.done_hist[n] > 0 {
                    loads.push(LoadRow {
                        cpu: if self.per_cpu { r as i32 } else { NONE },
                        runnable: n as u32,
                        time_share: rq.hist[n] / total_time,
                        completion_share: rq.done_hist[n] as f64 / total_done as f64,
                    });
                }
            }
        }
        let summary = Summary {
            policy: self.cfg.policy.clone(),
            jobs: self.response.n,
            cpus: self.cpus.len() as u32,
            seed: self.cfg.seed,
            response_mean: self.response.mean_or_nan(),
            response_p50: qr[0],
            response_p95: qr[1],
            response_p99: qr[2],
            response_std: self.response.std(),
            response_max: self.response.max,
            wait_mean: self.wait.mean_or_nan(),
            wait_p50: qw[0],
            wait_p95: qw[1],
            wait_p99: qw[2],
            wait_std: self.wait.std(),
            slowdown_mean: self.slowdown.mean_or_nan(),
            slowdown_p99: qs[0],
            throughput: rate(self.completed_in_window),
            utilization: per_cpu.iter().sum::<f64>() / k,
            utilization_per_cpu: per_cpu,
            context_switches: self.context_switches,
            migrations: self.migrations,
            runnable_mean_per_cpu: runnable_mean,
            task_response_cv,
            jain_slowdown: self.slowdown.jain(),
            jain_share,
            offered_load: self.cfg.offered_load.unwrap_or(f64::NAN),
            arrival_rate: rate(self.measured_arrivals),
            mean_in_system: if window > 0.0 {
                self.in_system_area / window
            } else {
                f64::NAN
            },
            measure_start: self.measure_start,
            measure_end: window_end,
            sim_time: end,
            busy_time,
            work_served: self.work_completed + partial,
            overhead_time: self.overhead,
            warmup_jobs: self.cfg.warmup,
            unfinished,
            events: self.events,
            // A last, partial batch (jobs not divisible by batches) is left out.
            response_batch_means: std::mem::take(&mut self.batch_means),
        };
        Output {
            summary,
            classes,
            tasks,
            loads,
            load_series: self.series,
            jobs: self.table,
            schedule: self.schedule,
        }
    }
}

impl balance::View for Engine<'_> {
    fn cpus(&self) -> usize {
        self.cpus.len()
    }
    fn runnable(&self, cpu: usize) -> u32 {
        self.rqs[cpu].runnable
    }
    fn load(&self, cpu: usize) -> f64 {
        self.rqs[cpu].load
    }
    fn is_idle(&self, cpu: usize) -> bool {
        self.rqs[cpu].runnable == 0
    }
    fn queued(&self, cpu: usize, out: &mut Vec<Queued>) {
        let hot = self.cfg.machine.cache_hot;
        let mut list: Vec<(f64, Queued)> = self.rqs[cpu]
            .queued
            .iter()
            .map(|&id| {
                let j = &self.jobs[id.index()];
                let q = Queued {
                    job: id,
                    weight: j.view.weight,
                    cache_hot: j.cpu == cpu as i32 && self.now - j.last_ran < hot,
                };
                (j.ready_since, q)
            })
            .collect();
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.extend(list.into_iter().map(|(_, q)| q));
    }
    fn allowed(&self, job: JobId, cpu: usize) -> bool {
        let a = &self.cfg.classes[self.jobs[job.index()].view.class as usize].affinity;
        a.is_empty() || a.contains(&(cpu as u32))
    }
    fn draw(&mut self, n: usize) -> usize {
        self.rng_balance.random_range(0..n)
    }
    fn migrate(&mut self, job: JobId, from: usize, to: usize) {
        let now = self.now;
        let w = self.jobs[job.index()].view.weight;
        if self.rqs[from].fluid {
            let f = self.rqs[from].policy.fluid().expect("fluid");
            let served = f.attained(job);
            self.rqs[from].policy.dequeue(job);
            let j = &mut self.jobs[job.index()];
            j.queued = false;
            j.burst_left -= served;
            j.view.remaining -= served;
            j.view.attained += served;
            let next = self.rqs[from]
                .policy
                .fluid()
                .expect("fluid")
                .next_event(now)
                .unwrap_or(f64::INFINITY);
            self.fluid_next.set(from, next);
        } else {
            self.rqs[from].policy.dequeue(job);
            self.unqueue(job);
        }
        self.set_runnable(from, -1, w);
        let task = self.jobs[job.index()].task as usize;
        self.assign(task, job, to);
        self.enqueue(to, job, Enqueue::Migrated);
    }
}
