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
mod priority;
mod ps;
mod psjf;
mod rr;
mod sjf;
mod srpt;
mod stride;

pub use keyed::{FifoQueue, KeyRule, KeyedPolicy, KeyedQueue};
pub use schedlab_model::placement::CpuLoad;
pub use schedlab_model::{ParamDefault, ParamInfo, ParamKind, ParamValue, Params, SpecError, Unit};

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

/// What a job takes from one runqueue to another when it migrates: each runqueue is its own
/// policy instance, so what a policy keeps about a job travels with it. Each policy fills the
/// fields it keeps and reads them back; the engine only carries the value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Carry {
    /// Position in the policy's virtual time relative to its runqueue's reference point (CFS:
    /// vruntime - min_vruntime; EEVDF: V - v; stride: pass - global pass).
    pub lag: f64,
    /// The rest of the current request in virtual time (EEVDF: deadline - vruntime); NaN: none.
    pub request: f64,
    /// Service received in the current slice (a preempted job keeps the rest of its slice).
    pub used: f64,
    /// Feedback level (MLFQ), and the service received at that level.
    pub level: u32,
    pub level_used: f64,
    /// It was asleep: it wakes on the new runqueue, which applies its wake-up rule (CFS's
    /// sleeper credit, stride's catch-up) to what it carries. Set by the engine.
    pub asleep: bool,
}

impl Carry {
    /// Nothing kept: a job that moves starts afresh on its new runqueue.
    pub const NONE: Carry = Carry {
        lag: 0.0,
        request: f64::NAN,
        used: 0.0,
        level: 0,
        level_used: 0.0,
        asleep: false,
    };
}

impl Default for Carry {
    fn default() -> Carry {
        Carry::NONE
    }
}

/// Why a job (re-)enters a runqueue. Two words: what a migrating job carries is lent by
/// reference, so the common enqueue copies nothing more.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Enqueue<'a> {
    /// A new job.
    Arrival,
    /// Back from a wait: the same job after I/O, or a task's next job after think time.
    Wakeup,
    /// Taken off a CPU, after `ran` of service in this turn, because a more important job
    /// preempts it: it goes back to the head of its level with the rest of its slice (Linux
    /// SCHED_RR, the textbook MLFQ).
    Preempted { ran: f64 },
    /// Its slice ran out: to the tail of its level, with a new slice.
    Expired,
    /// Moved here from another runqueue, with what it keeps (also a job that slept on
    /// another runqueue and wakes here: then `asleep` is set).
    Migrated(&'a Carry),
}

/// Why a job leaves a runqueue's runnable set (queued or running).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dequeue {
    /// It blocks (I/O, or a closed client's thread thinks): it comes back with
    /// [`Enqueue::Wakeup`].
    Sleep,
    /// It completed: forget anything kept about the job (a task's next job may remember it).
    Exit,
    /// The job moves to another runqueue; the returned [`Carry`] goes with it. Either a
    /// queued job (balancing), or a sleeping task that wakes elsewhere: then it is not
    /// queued here, and its job may even be new (a closed task's next request), so answer
    /// with what is kept for the task. Either way, forget the job and the task here.
    Migrate,
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
    /// Where a new or waking task should run (per-CPU runqueues); `None`: wherever the
    /// machine's placement puts it (`schedlab_model::placement`).
    fn select_cpu(&mut self, _job: &JobView, _cpus: &[CpuLoad]) -> Option<usize> {
        None
    }
    fn enqueue(&mut self, job: &JobView, now: f64, why: Enqueue<'_>);
    /// The job leaves this runqueue's runnable set, from the queue or from a CPU (after its
    /// last `charge`); returns what it keeps. Fluid policies let a job go themselves when its
    /// work is done ([`Fluid::pop_done`]), so for them this only moves one away.
    fn dequeue(&mut self, job: &JobView, now: f64, why: Dequeue) -> Carry;
    /// Whether a task that sleeps here leaves nothing behind (no memory of the job or of its
    /// task across the sleep), so that waking on another runqueue needs no hand-off: the
    /// engine then skips `dequeue(.., Migrate)` for it. False (always hand off) unless a
    /// policy knows; a wrong `true` would lose what it keeps.
    fn forgets_sleepers(&self) -> bool {
        false
    }
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
    /// Whether `preempts` can ever answer true. A policy that never preempts says false, and
    /// the engine skips asking for every newcomer (asked once, at the start of a run). True
    /// unless a policy knows; a wrong `false` would lose its preemptions.
    fn may_preempt(&self) -> bool {
        true
    }
    /// Service the job received since it was last charged (vruntime, pass, MLFQ allotment).
    fn charge(&mut self, _job: &JobView, _ran: f64, _now: f64) {}
    /// The CPUs that serve this runqueue (1 for a per-CPU runqueue), told once before the
    /// first job: a job runs on one of them at a time, which a policy that accounts shares
    /// must know (lottery's `balance` caps a job's share at one CPU).
    fn serving_cpus(&mut self, _cpus: usize) {}
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
    /// A job whose work is done, if any (call after `advance`); it leaves the policy.
    fn pop_done(&mut self) -> Option<JobId>;
    /// Service a job has received so far.
    fn attained(&self, id: JobId) -> f64;
    /// CPUs busy now.
    fn busy_cpus(&self) -> f64;
}

/// Builds a policy from its checked parameters (every declared default filled in).
pub type Builder = fn(&Params, u64) -> Result<Box<dyn Policy>, SpecError>;

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

/// No parameter has the name of a spec key, and a name shared by several policies has one
/// unit and one kind: a flat spec is never ambiguous, and a world converts a parameter by its
/// unit. Checked when the crate compiles, so a colliding policy cannot be built.
const fn catalogue_is_coherent(policies: &[&PolicyInfo]) -> bool {
    let mut p = 0;
    while p < policies.len() {
        let params = policies[p].params;
        let mut i = 0;
        while i < params.len() {
            if schedlab_model::vocabulary::is_key(params[i].name) {
                return false;
            }
            let mut q = 0;
            while q < policies.len() {
                let others = policies[q].params;
                let mut j = 0;
                while j < others.len() {
                    if schedlab_model::vocabulary::same(params[i].name, others[j].name)
                        && (params[i].unit as u8 != others[j].unit as u8
                            || params[i].kind as u8 != others[j].kind as u8)
                    {
                        return false;
                    }
                    j += 1;
                }
                q += 1;
            }
            i += 1;
        }
        p += 1;
    }
    true
}

const _: () = assert!(
    catalogue_is_coherent(POLICIES),
    "a policy parameter has the name of a spec key, or two policies declare one name with \
     different units or kinds"
);

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

/// The catalogue entry of `name`, or an error naming the key `policy`.
pub fn info(name: &str) -> Result<&'static PolicyInfo, SpecError> {
    lookup(name).ok_or_else(|| SpecError::new("policy", name, format!("one of {}", known_names())))
}

/// Builds a policy by name, checking its parameters; `seed` feeds randomised policies.
pub fn build(name: &str, params: &Params, seed: u64) -> Result<Box<dyn Policy>, SpecError> {
    let info = info(name)?;
    params.check(info.name, info.params)?;
    (info.build)(&params.with_defaults(info.params), seed)
}

/// Builds a policy that must serve one job per CPU at a time; a fluid one is refused with
/// `why` (the world's reason it cannot share continuously).
pub fn build_discrete(
    name: &str,
    params: &Params,
    seed: u64,
    why: &str,
) -> Result<Box<dyn Policy>, SpecError> {
    let p = build(name, params, seed)?;
    if p.service() == Service::Fluid {
        return Err(SpecError::new(
            "policy",
            name,
            format!("a policy that runs one job at a time: {why}"),
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_is_coherent_and_defaults_are_typed() {
        assert!(catalogue_is_coherent(POLICIES));
        for p in POLICIES {
            for q in p.params {
                assert!(!schedlab_model::vocabulary::is_key(q.name), "{}", q.name);
                if let Some(v) = q.default.value() {
                    let checked = Params::new().with(q.name, v).check(p.name, p.params);
                    assert!(
                        checked.is_ok(),
                        "{}.{}: default outside its domain",
                        p.name,
                        q.name
                    );
                }
            }
            // Every policy builds with its defaults alone.
            assert!(build(p.name, &Params::new(), 1).is_ok(), "{}", p.name);
        }
    }

    #[test]
    fn a_policy_that_says_it_never_preempts_never_does() {
        // The engine skips `preempts` for these: check it on queued pairs of every kind of
        // job (sizes, priorities, deadlines, arrivals), with and without parameters.
        let mut never = Vec::new();
        for info in POLICIES {
            let mut p = build(info.name, &Params::new(), 1).expect("defaults build");
            if p.may_preempt() || p.service() == Service::Fluid {
                continue;
            }
            never.push(info.name);
            let mut views = Vec::new();
            for i in 0..24u32 {
                let mut v = JobView::new(JobId(i), f64::from(i % 5), 0.5 + f64::from(i % 7));
                v.remaining = v.size - f64::from(i % 3) * 0.1;
                v.attained = v.size - v.remaining;
                v.priority = f64::from(i % 4);
                v.deadline = 10.0 - f64::from(i % 6);
                v.task = i;
                p.enqueue(&v, f64::from(i % 5), Enqueue::Arrival);
                views.push(v);
            }
            for a in &views {
                for b in &views {
                    assert!(!p.preempts(a, b, 5.0), "{} preempts", info.name);
                }
            }
        }
        // FCFS, RR and SJF at least take the fast path.
        for name in ["fcfs", "rr", "sjf"] {
            assert!(never.contains(&name), "{name}: {never:?}");
        }
        // And preemptive ones do not claim it.
        for name in ["srpt", "psjf", "cfs", "mlfq"] {
            assert!(
                build(name, &Params::new(), 1).unwrap().may_preempt(),
                "{name}"
            );
        }
    }

    #[test]
    fn fluid_policies_are_refused_where_a_world_needs_discrete_turns() {
        let e = build_discrete("ps", &Params::new(), 1, "one request per worker")
            .err()
            .unwrap();
        assert_eq!(e.key, "policy");
        assert!(e.allowed.contains("one request per worker"));
        assert!(build_discrete("fb", &Params::new(), 1, "x").is_err());
        let sliced = Params::new().with("quantum", ParamValue::Num(1.0));
        assert!(build_discrete("fb", &sliced, 1, "x").is_ok());
    }
}
