//! Scheduling policies behind one small trait.
//!
//! A policy orders runnable jobs and decides how long the chosen one may run. It owns no clock
//! and does no I/O: the simulator, the file server and the user-space dispatcher all call the
//! same hooks, modelled on the kernel's `sched_class`. Adding a policy means one file here, one
//! line in [`POLICIES`], docs and tests.

mod cfs;
mod edf;
mod eevdf;
mod fb;
mod fcfs;
mod keyed;
mod lcfs;
mod lottery;
mod mlfq;
mod params;
mod priority;
mod ps;
mod psjf;
mod rr;
mod sjf;
mod srpt;
mod stride;

pub use cfs::nice_to_weight;
pub use keyed::{FifoQueue, KeyRule, KeyedPolicy, KeyedQueue};
pub use params::{ParamError, ParamInfo, ParamKind, ParamValue, Params};

/// Index of a job while it is in the system. Slots are reused after a job leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u32);

impl JobId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a policy may know about a job. Work is abstract: ms of CPU in sim and os, bytes in
/// the server.
#[derive(Clone, Debug)]
pub struct JobView {
    pub id: JobId,
    pub arrival: f64,
    /// Total work, if the workload reveals it (size-based policies need it).
    pub size: f64,
    pub remaining: f64,
    pub attained: f64,
    pub weight: f64,
    /// Lower is more important.
    pub priority: f64,
    pub tickets: f64,
    /// Absolute deadline (infinite when none).
    pub deadline: f64,
    pub class: u32,
    /// The task (client, thread) the job belongs to.
    pub task: u32,
}

impl JobView {
    pub fn new(id: JobId, arrival: f64, size: f64) -> JobView {
        JobView {
            id,
            arrival,
            size,
            remaining: size,
            attained: 0.0,
            weight: 1.0,
            priority: 0.0,
            tickets: 1.0,
            deadline: f64::INFINITY,
            class: 0,
            task: 0,
        }
    }
}

/// Why a job (re-)enters a runqueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueue {
    /// A new job.
    Arrival,
    /// Back from a wait: the same job after I/O, or a task's next job after think time.
    Wakeup,
    /// Taken off a CPU because another job preempts it.
    Preempted,
    /// Its slice ran out.
    Expired,
    /// Moved here from another runqueue.
    Migrated,
}

/// How a policy serves its jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// One job per CPU at a time, chosen by `pick_next`.
    Discrete,
    /// Exact fluid sharing (PS, GPS, FB/LAS): the engine asks [`Fluid`] for completion times.
    Fluid,
}

/// The hooks the engine calls. Every hook receives the current time; none reads a clock.
pub trait Policy: Send {
    fn name(&self) -> &'static str;
    fn enqueue(&mut self, job: &JobView, now: f64, why: Enqueue);
    /// Removes a queued job that leaves this runqueue (migration); it may come back with
    /// [`Enqueue::Migrated`] on another.
    fn dequeue(&mut self, id: JobId);
    /// The next job to run; it leaves the queue. `None`: nothing runnable.
    fn pick_next(&mut self, now: f64) -> Option<JobId>;
    /// How long the job may run before the policy is asked again; `None`: until it completes.
    fn slice(&self, _job: &JobView, _now: f64) -> Option<f64> {
        None
    }
    /// Whether a newly runnable job should take the CPU from a running one.
    fn preempts(&self, _incoming: &JobView, _running: &JobView, _now: f64) -> bool {
        false
    }
    /// Service the job received since it was last charged (vruntime, pass, MLFQ allotment).
    fn charge(&mut self, _job: &JobView, _ran: f64, _now: f64) {}
    /// The running job blocks (I/O) and leaves the runnable set until it is enqueued again
    /// with [`Enqueue::Wakeup`].
    fn sleep(&mut self, _job: &JobView, _now: f64) {}
    /// The job completed; forget anything kept about it.
    fn exit(&mut self, _job: &JobView, _now: f64) {}
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The share this job is entitled to relative to others (tickets, weight); 1 by default.
    fn entitlement(&self, _job: &JobView) -> f64 {
        1.0
    }
    fn service(&self) -> Service {
        Service::Discrete
    }
    fn fluid(&mut self) -> Option<&mut dyn Fluid> {
        None
    }
}

/// Exact fluid service: jobs share the CPUs continuously.
pub trait Fluid {
    /// Declares the number of CPUs; an error when this policy cannot share that many exactly.
    fn set_cpus(&mut self, cpus: usize) -> Result<(), String>;
    /// Moves service forward to `now`.
    fn advance(&mut self, now: f64);
    /// Adds a job at the current time (after `advance`).
    fn add(&mut self, job: &JobView, now: f64);
    /// The next instant something changes inside (a completion or a regrouping).
    fn next_event(&self, now: f64) -> Option<f64>;
    /// A job whose work is done, if any (call after `advance`).
    fn pop_done(&mut self) -> Option<JobId>;
    /// Service a job has received so far.
    fn attained(&self, id: JobId) -> f64;
    /// CPUs busy now.
    fn busy_cpus(&self) -> f64;
}

pub type Builder = fn(&Params, u64) -> Result<Box<dyn Policy>, ParamError>;

/// One entry of the catalogue: how users name a policy, its parameters and how to build it.
pub struct PolicyInfo {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub summary: &'static str,
    pub params: &'static [ParamInfo],
    pub build: Builder,
}

/// Every policy, in the order of the docs. One line per policy.
pub static POLICIES: &[&PolicyInfo] = &[
    &fcfs::INFO,
    &lcfs::INFO,
    &sjf::INFO,
    &psjf::INFO,
    &srpt::INFO,
    &rr::INFO,
    &ps::PS_INFO,
    &ps::GPS_INFO,
    &fb::INFO,
    &priority::INFO,
    &lottery::INFO,
    &stride::INFO,
    &mlfq::INFO,
    &cfs::INFO,
    &eevdf::INFO,
    &edf::INFO,
];

/// Finds a policy by name or alias (case-insensitive).
pub fn lookup(name: &str) -> Option<&'static PolicyInfo> {
    let wanted = name.to_ascii_lowercase();
    POLICIES
        .iter()
        .copied()
        .find(|p| p.name == wanted || p.aliases.contains(&wanted.as_str()))
}

/// All accepted names, for error messages.
pub fn known_names() -> String {
    POLICIES
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Builds a policy by name, checking its parameters; `seed` feeds randomised policies.
pub fn build(name: &str, params: &Params, seed: u64) -> Result<Box<dyn Policy>, ParamError> {
    let info = lookup(name).ok_or_else(|| ParamError {
        key: "policy".into(),
        value: name.into(),
        allowed: format!("one of {}", known_names()),
    })?;
    params.check_allowed(info)?;
    (info.build)(params, seed)
}
