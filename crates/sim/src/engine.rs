//! The event engine: what happens to a job.
//!
//! Jobs arrive (open stream, closed clients or a trace), wait in the policy's queue, run on one
//! of k CPUs that share one global queue, and leave. At each instant the engine first ends the
//! runs that are due (completions and expired slices), then admits the arrivals, re-queues the
//! expired jobs behind them, fills idle CPUs with `pick_next`, and finally lets each newcomer
//! preempt a running job if the policy says so. Fluid policies (PS, GPS, FB) are served by their
//! own exact completion times instead of CPU slices.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use schedlab_policy::{Enqueue, JobId, JobView, Policy, Service};

use crate::metrics::{ClassRow, JobTable, Moments, Quantiles, Segment, Summary, TaskRow};
use crate::spec::{Config, Workload};
use crate::SpecError;

/// Everything one run returns.
pub struct Output {
    pub summary: Summary,
    pub classes: Vec<ClassRow>,
    pub tasks: Vec<TaskRow>,
    pub jobs: Option<JobTable>,
    pub schedule: Option<Vec<Segment>>,
}

const NONE: i32 = -1;
/// Share tracking integrates entitlements over every change of the runnable set; above this
/// many clients it would dominate the run time, so it is skipped.
const MAX_SHARE_TASKS: usize = 4096;

struct Slot {
    view: JobView,
    seq: u64,
    client: i64,
    first_run: f64,
    cpu: i32,
    on_cpu: i32,
    switches: u32,
    migrations: u32,
    alive: bool,
    /// Arrival for a new task's first job, wake-up for a closed client's later jobs.
    entered: Enqueue,
}

#[derive(Clone)]
struct Cpu {
    job: Option<JobId>,
    dispatched: f64,
    run_start: f64,
    run_len: f64,
    until: f64,
    /// The job this CPU ran last, identified by its sequence number (slots are reused).
    last_seq: u64,
    /// A job taken off this CPU unfinished: it counts a context switch if another job follows.
    left_unfinished: Option<(JobId, u64)>,
    busy_since: f64,
    busy_total: f64,
    busy_window: f64,
}

impl Cpu {
    fn new() -> Cpu {
        Cpu {
            job: None,
            dispatched: 0.0,
            run_start: 0.0,
            run_len: 0.0,
            until: f64::INFINITY,
            last_seq: u64::MAX,
            left_unfinished: None,
            busy_since: f64::NAN,
            busy_total: 0.0,
            busy_window: 0.0,
        }
    }
}

/// Derives independent generator streams from one seed (SplitMix64), so that changing how one
/// stream is used does not perturb the others.
fn stream(seed: u64, index: u64) -> Xoshiro256PlusPlus {
    let mut z = seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Xoshiro256PlusPlus::seed_from_u64(z ^ (z >> 31))
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
    policy: Box<dyn Policy>,
    fluid: bool,
    slots: Vec<Slot>,
    free: Vec<u32>,
    cpus: Vec<Cpu>,
    now: f64,
    // Arrival sources.
    next_open: f64,
    clients: BinaryHeap<Reverse<(Time, u64, u32)>>,
    trace_at: usize,
    issued: u64,
    issue_limit: u64,
    rng_arrival: Xoshiro256PlusPlus,
    rng_size: Xoshiro256PlusPlus,
    rng_class: Xoshiro256PlusPlus,
    rng_think: Xoshiro256PlusPlus,
    // Batches of one instant, kept to reuse their memory.
    arrived: Vec<JobId>,
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
    tasks: Vec<(Moments, u64)>,
    client_seen: Vec<bool>,
    shares: Option<Shares>,
    table: Option<JobTable>,
    schedule: Option<Vec<Segment>>,
    context_switches: u64,
    migrations: u64,
    overhead: f64,
    work_completed: f64,
    fluid_busy: f64,
    fluid_busy_window: f64,
    fluid_last: f64,
    events: u64,
}

pub fn run(cfg: &Config) -> Result<Output, SpecError> {
    let seed = cfg.seed;
    let mut policy = schedlab_policy::build(&cfg.policy, &cfg.params, stream(seed, 5).random())?;
    let fluid = policy.service() == Service::Fluid;
    if fluid {
        let f = policy.fluid().expect("fluid policy");
        f.set_cpus(cfg.cpus).map_err(|why| SpecError {
            key: "cpus".into(),
            value: cfg.cpus.to_string(),
            allowed: why,
        })?;
    }
    let issue_limit = match (&cfg.workload, cfg.jobs) {
        (Workload::Trace { rows }, Some(j)) => (cfg.warmup + j).min(rows.len() as u64),
        (Workload::Trace { rows }, None) => rows.len() as u64,
        (_, Some(j)) => cfg.warmup + j,
        (_, None) => u64::MAX,
    };
    let n_tasks = match &cfg.workload {
        Workload::Closed { clients, .. } => clients.len(),
        _ => 0,
    };
    let mut e = Engine {
        cfg,
        policy,
        fluid,
        slots: Vec::new(),
        free: Vec::new(),
        cpus: vec![Cpu::new(); cfg.cpus],
        now: 0.0,
        next_open: f64::INFINITY,
        clients: BinaryHeap::new(),
        trace_at: 0,
        issued: 0,
        issue_limit,
        rng_arrival: stream(seed, 1),
        rng_size: stream(seed, 2),
        rng_class: stream(seed, 3),
        rng_think: stream(seed, 4),
        arrived: Vec::new(),
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
        tasks: vec![(Moments::default(), 0); n_tasks],
        client_seen: vec![false; n_tasks],
        shares: (n_tasks > 0 && n_tasks <= MAX_SHARE_TASKS).then(|| Shares::new(n_tasks)),
        table: cfg.keep_jobs.then(JobTable::default),
        schedule: cfg.keep_schedule.then(Vec::new),
        context_switches: 0,
        migrations: 0,
        overhead: 0.0,
        work_completed: 0.0,
        fluid_busy: 0.0,
        fluid_busy_window: 0.0,
        fluid_last: 0.0,
        events: 0,
    };
    e.start();
    e.main_loop();
    Ok(e.finish())
}

impl Engine<'_> {
    fn start(&mut self) {
        match &self.cfg.workload {
            Workload::Open { arrival } => {
                if self.issue_limit > 0 {
                    self.next_open = arrival.sample(&mut self.rng_arrival);
                }
            }
            Workload::Closed { clients, think } => {
                for c in 0..clients.len() as u32 {
                    if self.issued + (self.clients.len() as u64) < self.issue_limit {
                        let t = think.sample(&mut self.rng_think);
                        self.clients.push(Reverse((Time(t), c as u64, c)));
                    }
                }
            }
            Workload::Trace { .. } => {}
        }
    }

    fn next_arrival(&self) -> f64 {
        match &self.cfg.workload {
            Workload::Open { .. } => self.next_open,
            Workload::Closed { .. } => self.clients.peek().map_or(f64::INFINITY, |r| r.0 .0 .0),
            Workload::Trace { rows } => {
                if (self.trace_at as u64) < self.issue_limit {
                    rows[self.trace_at].arrival
                } else {
                    f64::INFINITY
                }
            }
        }
    }

    fn next_service_event(&self) -> f64 {
        if self.fluid {
            return f64::INFINITY;
        }
        match self.cpus.len() {
            1 => self.cpus[0].until,
            _ => self
                .cpus
                .iter()
                .map(|c| c.until)
                .fold(f64::INFINITY, f64::min),
        }
    }

    fn main_loop(&mut self) {
        let stop = self.cfg.time.unwrap_or(f64::INFINITY);
        loop {
            let t_fluid = if self.fluid {
                self.policy
                    .fluid()
                    .and_then(|f| f.next_event(self.now))
                    .unwrap_or(f64::INFINITY)
            } else {
                f64::INFINITY
            };
            let t = self
                .next_arrival()
                .min(self.next_service_event())
                .min(t_fluid);
            if t == f64::INFINITY || t > stop {
                if stop.is_finite() {
                    self.advance_to(stop);
                }
                return;
            }
            self.advance_to(t);
            self.events += 1;
            if self.fluid {
                self.fluid_step();
            } else {
                self.discrete_step();
            }
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
            let f = self.policy.fluid().expect("fluid");
            let busy = f.busy_cpus();
            f.advance(t);
            self.fluid_busy += busy * (t - self.fluid_last);
            self.fluid_busy_window += busy * self.clip(self.fluid_last, t);
            self.fluid_last = t;
        }
        self.now = t;
    }

    /// Length of [a, b] inside the measured interval.
    fn clip(&self, a: f64, b: f64) -> f64 {
        (b.min(self.measure_end) - a.max(self.measure_start)).max(0.0)
    }

    fn set_in_system(&mut self, delta: i64) {
        self.in_system_area += self.in_system as f64 * self.clip(self.in_system_since, self.now);
        self.in_system_since = self.now;
        self.in_system = (self.in_system as i64 + delta) as u64;
    }

    fn discrete_step(&mut self) {
        let now = self.now;
        for c in 0..self.cpus.len() {
            if self.cpus[c].until <= now {
                self.end_run(c, false);
            }
        }
        self.admit_arrivals();
        let arrived = std::mem::take(&mut self.arrived);
        let expired = std::mem::take(&mut self.expired);
        for &id in &arrived {
            let s = &self.slots[id.index()];
            self.policy.enqueue(&s.view, now, s.entered);
        }
        for &id in &expired {
            self.policy
                .enqueue(&self.slots[id.index()].view, now, Enqueue::Expired);
        }
        for c in 0..self.cpus.len() {
            if self.cpus[c].job.is_none() {
                match self.policy.pick_next(now) {
                    Some(id) => self.dispatch(c, id),
                    None => break,
                }
            }
        }
        for &id in &arrived {
            let s = &self.slots[id.index()];
            if !s.alive || s.on_cpu != NONE {
                continue;
            }
            if let Some(c) = self.victim(id) {
                self.end_run(c, true);
                let victim = self.expired.pop().expect("preempted job");
                self.policy
                    .enqueue(&self.slots[victim.index()].view, now, Enqueue::Preempted);
                if let Some(next) = self.policy.pick_next(now) {
                    self.dispatch(c, next);
                }
            }
        }
        self.arrived = arrived;
        self.arrived.clear();
        self.expired = expired;
        self.expired.clear();
        if let Some(s) = &mut self.shares {
            if s.dirty {
                s.recompute(self.cpus.len());
            }
        }
    }

    /// The CPU whose job the incoming job should preempt: among those it preempts, one whose
    /// job preempts none of the others (the least important).
    fn victim(&self, incoming: JobId) -> Option<usize> {
        let inc = &self.slots[incoming.index()].view;
        let mut best: Option<(usize, JobView)> = None;
        for (c, cpu) in self.cpus.iter().enumerate() {
            let Some(r) = cpu.job else { continue };
            let running = self.current_view(c, r);
            if !self.policy.preempts(inc, &running, self.now) {
                continue;
            }
            match &best {
                Some((_, b)) if !self.policy.preempts(b, &running, self.now) => {}
                _ => best = Some((c, running)),
            }
        }
        best.map(|(c, _)| c)
    }

    /// A running job's view with its service brought up to now.
    fn current_view(&self, c: usize, id: JobId) -> JobView {
        let cpu = &self.cpus[c];
        let mut v = self.slots[id.index()].view.clone();
        let ran = (self.now - cpu.run_start).clamp(0.0, cpu.run_len);
        v.remaining -= ran;
        v.attained += ran;
        v
    }

    fn dispatch(&mut self, c: usize, id: JobId) {
        let now = self.now;
        let slot = &mut self.slots[id.index()];
        let cpu = &mut self.cpus[c];
        if slot.first_run.is_nan() {
            slot.first_run = now;
        }
        let switching = cpu.last_seq != slot.seq;
        let overhead = if switching {
            self.cfg.context_switch
        } else {
            0.0
        };
        if let Some((prev, seq)) = cpu.left_unfinished.take() {
            if seq != slot.seq {
                let p = &mut self.slots[prev.index()];
                if p.alive && p.seq == seq {
                    p.switches += 1;
                }
            }
        }
        let slot = &mut self.slots[id.index()];
        if slot.cpu != NONE && slot.cpu != c as i32 {
            slot.migrations += 1;
        }
        slot.cpu = c as i32;
        slot.on_cpu = c as i32;
        let slice = self.policy.slice(&slot.view, now);
        let run_len = slice.map_or(slot.view.remaining, |s| s.min(slot.view.remaining));
        let cpu = &mut self.cpus[c];
        cpu.job = Some(id);
        cpu.dispatched = now;
        cpu.run_start = now + overhead;
        cpu.run_len = run_len;
        cpu.until = now + overhead + run_len;
        cpu.last_seq = slot.seq;
        if cpu.busy_since.is_nan() {
            cpu.busy_since = now;
        }
    }

    /// Ends the run on CPU `c` now: completion, expired slice or (`preempted`) preemption.
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
        cpu.until = f64::INFINITY;
        let slot = &mut self.slots[id.index()];
        slot.on_cpu = NONE;
        let done = !preempted && ran >= slot.view.remaining;
        if done {
            slot.view.attained += slot.view.remaining;
            slot.view.remaining = 0.0;
        } else {
            slot.view.remaining -= ran;
            slot.view.attained += ran;
        }
        if let Some(sched) = &mut self.schedule {
            if ran > 0.0 {
                let task = if slot.client >= 0 {
                    slot.view.task as i64
                } else {
                    -1
                };
                sched.push(Segment {
                    cpu: c as u32,
                    job: slot.seq,
                    task,
                    start,
                    end: start + ran,
                });
            }
        }
        if let Some(sh) = &mut self.shares {
            let t = slot.view.task as usize;
            let (a, b) = (
                start.max(self.measure_start),
                (start + ran).min(self.measure_end),
            );
            if b > a {
                sh.service[t] += b - a;
            }
        }
        self.policy.charge(&self.slots[id.index()].view, ran, now);
        if done {
            self.complete(id);
            // The CPU stays busy if something is queued; `discrete_step` refills it.
        } else {
            self.cpus[c].left_unfinished = Some((id, self.slots[id.index()].seq));
            self.expired.push(id);
        }
        if !preempted {
            // Close the busy interval; a dispatch at this instant reopens it.
            let since = std::mem::replace(&mut self.cpus[c].busy_since, f64::NAN);
            let window = self.clip(since, now);
            let cpu = &mut self.cpus[c];
            cpu.busy_total += now - since;
            cpu.busy_window += window;
        }
    }

    fn fluid_step(&mut self) {
        let now = self.now;
        loop {
            let f = self.policy.fluid().expect("fluid");
            let Some(id) = f.pop_done() else { break };
            let s = &mut self.slots[id.index()];
            s.view.attained = s.view.size;
            s.view.remaining = 0.0;
            if let Some(sh) = &mut self.shares {
                sh.service[s.view.task as usize] += s.view.size;
            }
            self.complete(id);
        }
        self.admit_arrivals();
        let arrived = std::mem::take(&mut self.arrived);
        for &id in &arrived {
            let s = &mut self.slots[id.index()];
            s.first_run = now;
            let view = s.view.clone();
            self.policy.fluid().expect("fluid").add(&view, now);
        }
        self.arrived = arrived;
        self.arrived.clear();
        if let Some(s) = &mut self.shares {
            if s.dirty {
                s.recompute(self.cpus.len());
            }
        }
    }

    /// Creates the jobs arriving now and lists them in `arrived`.
    fn admit_arrivals(&mut self) {
        while self.next_arrival() <= self.now {
            let (class, client, size, task, extra) = match &self.cfg.workload {
                Workload::Open { arrival } => {
                    let class = self.pick_class();
                    self.issued += 1;
                    self.next_open = if self.issued < self.issue_limit {
                        self.now + arrival.sample(&mut self.rng_arrival)
                    } else {
                        f64::INFINITY
                    };
                    let size = self.cfg.classes[class].size.sample(&mut self.rng_size);
                    (class, -1i64, size, class as u32, None)
                }
                Workload::Closed { clients, .. } => {
                    let Reverse((_, _, client)) = self.clients.pop().expect("client");
                    self.issued += 1;
                    let class = clients[client as usize] as usize;
                    let size = self.cfg.classes[class].size.sample(&mut self.rng_size);
                    (class, client as i64, size, client, None)
                }
                Workload::Trace { rows } => {
                    let row = rows[self.trace_at].clone();
                    self.trace_at += 1;
                    self.issued += 1;
                    let class = row.class as usize;
                    (
                        class,
                        row.task.map_or(-1, |t| t as i64),
                        row.size,
                        row.task.unwrap_or(class as u32),
                        Some(row),
                    )
                }
            };
            let id = self.new_job(class, client, size, task, extra);
            self.arrived.push(id);
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

    fn new_job(
        &mut self,
        class: usize,
        client: i64,
        size: f64,
        task: u32,
        row: Option<crate::trace::TraceRow>,
    ) -> JobId {
        let now = self.now;
        let seq = self.issued - 1;
        let measured = seq >= self.cfg.warmup && now >= self.cfg.warmup_time;
        if measured {
            if self.measure_start == f64::INFINITY {
                self.measure_start = now;
                self.in_system_since = now;
                self.fluid_last = self.fluid_last.max(0.0);
                if let Some(s) = &mut self.shares {
                    s.last = now;
                }
            }
            self.measured_arrivals += 1;
        }
        if self.issued == self.issue_limit && self.cfg.time.is_none() {
            self.measure_end = now;
        }
        let c = &self.cfg.classes[class];
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    view: JobView::new(JobId(self.slots.len() as u32), 0.0, 0.0),
                    seq: 0,
                    client: -1,
                    first_run: f64::NAN,
                    cpu: NONE,
                    on_cpu: NONE,
                    switches: 0,
                    migrations: 0,
                    alive: false,
                    entered: Enqueue::Arrival,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let id = JobId(idx);
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
        let entitlement = self.policy.entitlement(&view);
        let entered =
            if client >= 0 && !std::mem::replace(&mut self.client_seen[client as usize], true) {
                Enqueue::Arrival
            } else if client >= 0 {
                Enqueue::Wakeup
            } else {
                Enqueue::Arrival
            };
        self.slots[id.index()] = Slot {
            view,
            seq,
            client,
            first_run: f64::NAN,
            cpu: NONE,
            on_cpu: NONE,
            switches: 0,
            migrations: 0,
            alive: true,
            entered,
        };
        if let Some(s) = &mut self.shares {
            s.weight[task as usize] = entitlement;
            s.dirty = true;
        }
        self.set_in_system(1);
        id
    }

    fn complete(&mut self, id: JobId) {
        let now = self.now;
        self.set_in_system(-1);
        let s = &mut self.slots[id.index()];
        s.alive = false;
        let view = s.view.clone();
        self.policy.exit(&view, now);
        self.work_completed += view.size;
        let s = &self.slots[id.index()];
        let response = now - view.arrival;
        let wait = (response - view.size).max(0.0);
        let slowdown = if view.size > 0.0 {
            response / view.size
        } else {
            1.0
        };
        let measured = s.seq >= self.cfg.warmup && view.arrival >= self.cfg.warmup_time;
        if measured {
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
            self.context_switches += s.switches as u64;
            self.migrations += s.migrations as u64;
            let cs = &mut self.classes[view.class as usize];
            cs.response.add(response);
            cs.wait.add(wait);
            cs.slowdown.add(slowdown);
            if self.cfg.classes.len() > 1 {
                cs.quantiles.record(response);
            }
            if s.client >= 0 {
                if let Some(t) = self.tasks.get_mut(s.client as usize) {
                    t.0.add(response);
                    t.1 += 1;
                }
            }
            if let Some(t) = &mut self.table {
                t.job.push(s.seq);
                t.client.push(s.client);
                t.class.push(view.class);
                t.cpu.push(s.cpu);
                t.arrival.push(view.arrival);
                t.first_run.push(s.first_run);
                t.completion.push(now);
                t.size.push(view.size);
                t.wait.push(wait);
                t.response.push(response);
                t.slowdown.push(slowdown);
                t.context_switches.push(s.switches);
                t.migrations.push(s.migrations);
            }
        }
        if now <= self.measure_end && now >= self.measure_start {
            self.completed_in_window += 1;
        }
        if let Some(sh) = &mut self.shares {
            sh.weight[view.task as usize] = 0.0;
            sh.dirty = true;
        }
        // A closed client thinks, then submits its next job.
        if s.client >= 0 {
            if let Workload::Closed { think, .. } = &self.cfg.workload {
                let pending = self.clients.len() as u64;
                if self.issued + pending < self.issue_limit {
                    let t = now + think.sample(&mut self.rng_think);
                    let c = s.client as u32;
                    self.clients
                        .push(Reverse((Time(t), self.issued + pending, c)));
                }
            }
        }
        self.free.push(id.0);
    }

    fn finish(mut self) -> Output {
        let end = self.now;
        // Close open intervals at the end of the run.
        for c in 0..self.cpus.len() {
            let cpu = &self.cpus[c];
            if let Some(id) = cpu.job {
                let ran = (end - cpu.run_start).clamp(0.0, cpu.run_len);
                self.overhead += cpu.run_start.min(end) - cpu.dispatched;
                let s = &mut self.slots[id.index()];
                s.view.attained += ran;
                s.view.remaining -= ran;
            }
            let since = std::mem::replace(&mut self.cpus[c].busy_since, f64::NAN);
            if !since.is_nan() {
                let window = self.clip(since, end);
                self.cpus[c].busy_total += end - since;
                self.cpus[c].busy_window += window;
            }
        }
        self.set_in_system(0);
        let mut partial = 0.0;
        let mut unfinished = 0;
        for i in 0..self.slots.len() {
            if self.slots[i].alive {
                unfinished += 1;
                partial += if self.fluid {
                    self.policy
                        .fluid()
                        .expect("fluid")
                        .attained(JobId(i as u32))
                } else {
                    self.slots[i].view.attained
                };
            }
        }
        let window_end = if self.measure_end.is_finite() {
            self.measure_end
        } else {
            end
        };
        let window = (window_end - self.measure_start).max(0.0);
        let k = self.cpus.len() as f64;
        let (busy_time, per_cpu) = if self.fluid {
            let u = if window > 0.0 {
                self.fluid_busy_window / (window * k)
            } else {
                f64::NAN
            };
            (self.fluid_busy, vec![u; self.cpus.len()])
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
        if let Workload::Closed { clients, .. } = &self.cfg.workload {
            let (service, entitled): (Vec<f64>, Vec<f64>) = match &self.shares {
                Some(s) => (s.service.clone(), s.entitled.clone()),
                None => (vec![f64::NAN; clients.len()], vec![f64::NAN; clients.len()]),
            };
            let total_service: f64 = service.iter().sum();
            let total_entitled: f64 = entitled.iter().sum();
            let mut ratios = Moments::default();
            for (i, &class) in clients.iter().enumerate() {
                let share = service[i] / total_service;
                let ent = entitled[i] / total_entitled;
                let ratio = share / ent;
                if ratio.is_finite() {
                    ratios.add(ratio);
                }
                tasks.push(TaskRow {
                    task: i as u32,
                    class: self.cfg.classes[class as usize].name.clone(),
                    jobs: self.tasks[i].1,
                    response_mean: self.tasks[i].0.mean_or_nan(),
                    service: service[i],
                    share,
                    entitled: ent,
                    share_ratio: ratio,
                });
            }
            jain_share = ratios.jain();
        }
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
            jobs: self.table,
            schedule: self.schedule,
        }
    }
}
