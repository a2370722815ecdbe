//! The run specification: what the CLI flags, TOML files and Python keyword arguments all
//! become. `SimSpec` is the raw input (every key is one of the vocabulary's,
//! `schedlab_model::vocabulary`, with its help there); `validate` turns it into a `Config` or
//! one error naming the key, the value and what is allowed.

use serde::{Deserialize, Serialize};

use crate::balance;
use crate::trace::{self, TraceRow};
use crate::SpecError;
use schedlab_model::dist::Dist;
use schedlab_model::placement::Placement;
use schedlab_model::shares::class_shares;
use schedlab_model::weights::nice_to_weight;
use schedlab_policy::Params;

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    pub name: Option<String>,
    pub fraction: Option<f64>,
    pub size: Option<String>,
    pub priority: Option<f64>,
    pub tickets: Option<f64>,
    pub weight: Option<f64>,
    pub nice: Option<f64>,
    pub deadline: Option<f64>,
    pub clients: Option<u32>,
    pub think: Option<String>,
    pub bursts: Option<u32>,
    pub io: Option<String>,
    #[serde(default, with = "schedlab_model::truth")]
    pub final_io: Option<bool>,
    pub io_kind: Option<String>,
    pub affinity: Option<Vec<u32>>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SimSpec {
    pub policy: Option<String>,
    pub params: Option<Params>,
    pub arrival: Option<String>,
    pub load: Option<f64>,
    pub size: Option<String>,
    pub jobs: Option<u64>,
    pub time: Option<f64>,
    #[serde(default, with = "schedlab_model::truth")]
    pub drain: Option<bool>,
    pub clients: Option<u32>,
    pub think: Option<String>,
    pub trace: Option<String>,
    pub classes: Option<Vec<ClassSpec>>,
    pub bursts: Option<u32>,
    pub io: Option<String>,
    #[serde(default, with = "schedlab_model::truth")]
    pub final_io: Option<bool>,
    pub io_device: Option<String>,
    #[serde(default, with = "schedlab_model::truth")]
    pub allow_unstable: Option<bool>,
    pub cpus: Option<u32>,
    pub context_switch: Option<f64>,
    pub turn_cost: Option<f64>,
    pub start_cost: Option<f64>,
    pub service_scale: Option<f64>,
    pub service_offset: Option<f64>,
    pub dispatch_delay: Option<f64>,
    pub idle_wake: Option<f64>,
    pub dispatcher_cost: Option<f64>,
    pub end_cost: Option<f64>,
    pub wake_delay: Option<f64>,
    pub buffer: Option<u64>,
    pub runqueues: Option<String>,
    pub placement: Option<String>,
    pub choices: Option<u32>,
    pub balancer: Option<String>,
    pub balance_interval: Option<f64>,
    pub balance_interval_max: Option<f64>,
    pub imbalance: Option<f64>,
    pub migration_cost: Option<f64>,
    pub cache_hot: Option<f64>,
    pub timeslice: Option<f64>,
    pub start_pinned: Option<u32>,
    pub release_after: Option<f64>,
    pub ideal: Option<IdealSpec>,
    pub boost: Option<String>,
    pub boost_max: Option<f64>,
    pub sleep_avg_max: Option<f64>,
    pub seed: Option<u64>,
    pub warmup: Option<WarmupSpec>,
    pub warmup_time: Option<f64>,
    pub precision: Option<f64>,
    pub max_jobs: Option<u64>,
    pub batches: Option<u32>,
    #[serde(default, with = "schedlab_model::truth")]
    pub keep_jobs: Option<bool>,
    #[serde(default, with = "schedlab_model::truth")]
    pub keep_schedule: Option<bool>,
    pub load_sample: Option<f64>,
}

/// `warmup`: a number of jobs, or "auto" (MSER-5, `schedlab_model::output`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged, expecting = "a whole number >= 0, or auto")]
pub enum WarmupSpec {
    Jobs(u64),
    Word(String),
}

/// How the warm-up is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warmup {
    Jobs(u64),
    /// MSER-5 on a pilot run's responses in arrival order (the default for open workloads).
    Auto,
}

/// Run until the mean response's 95% interval is this narrow (relative half-width), or
/// until `max_jobs` measured jobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Precision {
    pub target: f64,
    pub max_jobs: u64,
}

/// The cap of a run until precise when `max_jobs` is not given.
pub const DEFAULT_MAX_JOBS: u64 = 100_000_000;
/// Measured jobs before the first look at the precision, when `jobs` is not given.
pub const DEFAULT_MIN_JOBS: u64 = 10_000;

/// The keys the simulator reads, as named in `SimSpec` (each one of the vocabulary's).
pub fn keys() -> Vec<String> {
    field_names(&SimSpec::default())
}

/// The class keys the simulator reads.
pub fn class_keys() -> Vec<String> {
    field_names(&ClassSpec::default())
}

fn field_names<T: Serialize>(v: &T) -> Vec<String> {
    // Serialising an all-None struct names every field (None is written as null).
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// I/O kinds and the priority levels a Windows-style boost grants on wake-up from them.
pub const IO_KINDS: &[(&str, f64)] = &[
    ("disk", 1.0),
    ("network", 2.0),
    ("keyboard", 6.0),
    ("sound", 8.0),
];

#[derive(Clone)]
pub struct Class {
    pub name: String,
    /// Cumulative probability up to and including this class.
    pub cumulative: f64,
    pub size: Dist,
    pub priority: f64,
    pub tickets: f64,
    pub weight: f64,
    pub deadline: Option<f64>,
    pub think: Dist,
    pub bursts: u32,
    pub io: Option<Dist>,
    /// An I/O after the last burst too; the job ends with a run of no time after it (a
    /// process that sleeps or writes after each burst, then exits: the os world's form).
    pub final_io: bool,
    /// Windows boost levels on wake-up from this class's I/O.
    pub io_boost: f64,
    /// CPUs allowed (empty: all).
    pub affinity: Vec<u32>,
}

#[derive(Clone)]
pub enum Workload {
    Open {
        arrival: Dist,
    },
    /// One entry per client: its class; with `script` (a closed trace), each client's
    /// thinks and sizes in order instead of draws.
    Closed {
        clients: Vec<u32>,
        script: Option<Vec<Vec<trace::ScriptRow>>>,
    },
    Trace {
        rows: Vec<TraceRow>,
    },
}

impl Workload {
    /// The jobs a trace holds (open or closed); None for a workload of draws.
    pub fn trace_jobs(&self) -> Option<u64> {
        match self {
            Workload::Trace { rows } => Some(rows.len() as u64),
            Workload::Closed {
                script: Some(s), ..
            } => Some(s.iter().map(|t| t.len() as u64).sum()),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runqueues {
    Global,
    PerCpu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoDevice {
    Delay,
    Fcfs,
}

/// `ideal` as given: a word, or a list of CPUs.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(
    untagged,
    expecting = "a CPU, a list of CPUs, or a word (start, round-robin, ...)"
)]
pub enum IdealSpec {
    Cpu(u32),
    List(Vec<u32>),
    /// A word, or CPUs written as text (`"0,2"`, `"0-3"`: the form of every CPU key).
    Word(String),
}

/// How each task's ideal CPU, the one its wake-ups return to, is chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum Ideal {
    /// The CPU it started on (placement's choice, or `start_pinned`).
    Start,
    /// Task i (in creation order) gets CPU i mod m, as Windows assigns ideal processors at
    /// thread creation, wherever the task starts.
    RoundRobin,
    /// Task i gets the (i mod len)-th CPU of the list.
    List(Vec<u32>),
}

impl Ideal {
    fn parse(given: &Option<IdealSpec>, cpus: usize) -> Result<Ideal, SpecError> {
        const ALLOWED: &str = "start, round-robin, or a list of CPU numbers";
        match given {
            None => Ok(Ideal::Start),
            Some(IdealSpec::Word(w)) => match w.trim().to_ascii_lowercase().as_str() {
                "start" => Ok(Ideal::Start),
                "round-robin" | "rr" => Ok(Ideal::RoundRobin),
                // The error names the text as written, not one CPU of its ranges.
                _ => Ideal::cpus(
                    cpu_text(w, cpus).ok_or_else(|| err("ideal", w, ALLOWED))?,
                    cpus,
                )
                .map_err(|e| SpecError {
                    value: w.clone(),
                    ..e
                }),
            },
            Some(IdealSpec::Cpu(c)) => Ideal::cpus(vec![*c], cpus),
            Some(IdealSpec::List(l)) => Ideal::cpus(l.clone(), cpus),
        }
    }

    fn cpus(list: Vec<u32>, cpus: usize) -> Result<Ideal, SpecError> {
        if list.is_empty() {
            return Err(err(
                "ideal",
                "[]",
                "start, round-robin, or a list of CPU numbers",
            ));
        }
        if let Some(&c) = list.iter().find(|&&c| c as usize >= cpus) {
            return Err(err(
                "ideal",
                c,
                &format!("CPU numbers from 0 to {}", cpus - 1),
            ));
        }
        Ok(Ideal::List(list))
    }

    /// The ideal CPU of the `i`-th task created, if this rule fixes it at creation.
    pub fn at_creation(&self, i: u64, cpus: usize) -> Option<u32> {
        match self {
            Ideal::Start => None,
            Ideal::RoundRobin => Some((i % cpus as u64) as u32),
            Ideal::List(l) => Some(l[(i % l.len() as u64) as usize]),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Boost {
    None,
    Windows,
    Linux26 { max: f64, sleep_avg_max: f64 },
}

/// The machine: CPUs, their runqueues, placement and balancing.
#[derive(Clone)]
pub struct Machine {
    pub cpus: usize,
    pub context_switch: f64,
    /// CPU time of a run that goes on with the job the CPU ran just before (a server's turn).
    pub turn_cost: f64,
    /// CPU time of a job's first run before its service (a server's fixed cost per request).
    pub start_cost: f64,
    /// A job of size s takes `max(service_scale * s + service_offset, 0)` of CPU time.
    pub service_scale: f64,
    pub service_offset: f64,
    /// Time between a job's submission and its arrival at the machine, counted in its response.
    pub dispatch_delay: f64,
    /// CPU time of the first run of a job that arrived to an empty machine, before its
    /// service (an idle machine's wake-up), on top of `start_cost`.
    pub idle_wake: f64,
    /// CPU time a user-space dispatcher living on CPU 0, above the jobs, spends there on each
    /// job's first run, whichever CPU runs it.
    pub dispatcher_cost: f64,
    /// CPU time after a job's completion before the CPU takes another job (a process's exit).
    pub end_cost: f64,
    /// Time between the end of a job's I/O wait and its return to the runqueue (a wake-up).
    pub wake_delay: f64,
    /// Arrivals wait outside the runqueue, in order, while this many jobs wait in it (a
    /// server's bounded buffer; global runqueue only).
    pub buffer: Option<usize>,
    pub runqueues: Runqueues,
    pub placement: Placement,
    pub balancer: balance::Settings,
    pub migration_cost: f64,
    pub cache_hot: f64,
    pub timeslice: Option<f64>,
    pub start_pinned: Option<u32>,
    /// Until this instant (ms) tasks may run only on `start_pinned`'s CPU (0: free at once).
    pub release_after: f64,
    pub ideal: Ideal,
    pub boost: Boost,
}

#[derive(Clone)]
pub struct Config {
    pub policy: String,
    pub params: Params,
    pub workload: Workload,
    pub classes: Vec<Class>,
    pub io_device: IoDevice,
    /// Measured jobs (with `precision`: the first look at it).
    pub jobs: Option<u64>,
    pub time: Option<f64>,
    /// With `time`: arrivals stop then and the jobs in the system finish, measured (a server
    /// run's end), instead of being cut.
    pub drain: bool,
    pub warmup: Warmup,
    pub warmup_time: f64,
    pub precision: Option<Precision>,
    pub machine: Machine,
    pub seed: u64,
    pub keep_jobs: bool,
    pub keep_schedule: bool,
    pub load_sample: Option<f64>,
    /// Batch means of the measured jobs (key `batches`; 0: none).
    pub batches: u64,
    /// Offered load per CPU, where it is known in advance.
    pub offered_load: Option<f64>,
}

impl Config {
    /// When the run is cut: `time`, unless the run drains after it (then never).
    pub fn stop(&self) -> Option<f64> {
        self.time.filter(|_| !self.drain)
    }

    /// The instant from which nothing more is sent: `time` when the run drains after it.
    pub fn sending_ends(&self) -> f64 {
        match (self.drain, self.time) {
            (true, Some(t)) => t,
            _ => f64::INFINITY,
        }
    }
}

/// CPUs written as text, `"0,2"` or `"0-3"` (as `schedlab.vocabulary.cpu_list` reads them);
/// None if it is not that. A range ending at `cpus` or beyond is kept to its first CPU out
/// of range, which the caller then names (no list of billions from `"0-4000000000"`).
fn cpu_text(text: &str, cpus: usize) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi): (u32, u32) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
                if hi < lo {
                    return None;
                }
                out.extend(lo..=hi.min(lo.max(cpus as u32)));
            }
            None => out.push(part.parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The mean time between an open workload's arrivals (1 otherwise: unused).
fn open_arrival_mean(w: &Workload) -> f64 {
    match w {
        Workload::Open { arrival } => arrival.mean(),
        _ => 1.0,
    }
}

/// A number as a message shows it: `1e308`, not its 309 digits.
fn short_number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-4..1e15).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

fn err(key: &str, value: impl ToString, allowed: &str) -> SpecError {
    SpecError {
        key: key.into(),
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

/// What a refused number should have been: inf is "> 0" by its sign, so the refusal of a
/// value that is not finite names finiteness.
fn domain(x: f64, bound: &str) -> String {
    if x.is_finite() {
        format!("a number {bound}")
    } else {
        format!("a finite number {bound}")
    }
}

fn positive(key: &str, v: Option<f64>) -> Result<Option<f64>, SpecError> {
    match v {
        Some(x) if !(x > 0.0 && x.is_finite()) => Err(err(key, x, &domain(x, "> 0"))),
        _ => Ok(v),
    }
}

fn non_negative(key: &str, v: Option<f64>, default: f64) -> Result<f64, SpecError> {
    match v {
        Some(x) if !(x >= 0.0 && x.is_finite()) => Err(err(key, x, &domain(x, ">= 0"))),
        Some(x) => Ok(x),
        None => Ok(default),
    }
}

/// One of a fixed set of words.
fn word<'a>(
    key: &str,
    v: &Option<String>,
    allowed: &[&'a str],
    default: &'a str,
) -> Result<&'a str, SpecError> {
    match v {
        None => Ok(default),
        Some(text) => allowed
            .iter()
            .find(|w| w.eq_ignore_ascii_case(text))
            .copied()
            .ok_or_else(|| err(key, text, &format!("one of {}", allowed.join(", ")))),
    }
}

/// A turn (a quantum, a slice, `timeslice`) is at least this fraction of the largest class's
/// mean size: `quantum = 1e-17` ran for ever, a job of 1 ms taking 1e17 turns.
const MIN_TURN_FRACTION: f64 = 1e-6;

/// Refuses work parameters (given or by default) and a `timeslice` so small beside the jobs'
/// sizes (or the run's `time`, if shorter) that a run takes more than a million turns a job.
fn check_turns(
    info: &schedlab_policy::PolicyInfo,
    params: &Params,
    timeslice: Option<f64>,
    classes: &[Class],
    time: Option<f64>,
) -> Result<(), SpecError> {
    let largest = classes.iter().map(|c| c.size.mean()).fold(0.0, f64::max);
    // A run cut at `time` serves no job more than that (hogs of 1e9 ms in slices of 3 ms).
    let (scale, what) = match time {
        Some(t) if t < largest => (t, format!("time {} ms", short_number(t))),
        _ => (
            largest,
            format!("the mean size {} ms", short_number(largest)),
        ),
    };
    let floor = scale * MIN_TURN_FRACTION;
    let given = params.with_defaults(info.params);
    let turns = info
        .params
        .iter()
        .filter(|p| p.unit == schedlab_model::units::Unit::Work)
        .flat_map(|p| {
            given
                .list(p.name)
                .unwrap_or_default()
                .into_iter()
                .map(move |v| (p.name, v))
        })
        .chain(timeslice.map(|v| ("timeslice", v)));
    for (key, v) in turns {
        if v > 0.0 && v < floor {
            return Err(err(
                key,
                short_number(v),
                &format!(
                    "a turn of at least {} ms (a millionth of {what}): a smaller one takes \
                     more than a million turns a job",
                    short_number(floor),
                ),
            ));
        }
    }
    Ok(())
}

/// `timeslice` replaces a policy's turn (its quantum or slice); a policy without one (FCFS, SJF,
/// SRPT, EDF) would become a time-sliced policy under its own name.
fn check_timeslice(
    info: &schedlab_policy::PolicyInfo,
    timeslice: Option<f64>,
) -> Result<(), SpecError> {
    let has_turn = |i: &schedlab_policy::PolicyInfo| {
        i.params
            .iter()
            .any(|p| p.unit == schedlab_model::units::Unit::Work)
    };
    match timeslice {
        Some(v) if !has_turn(info) => {
            let takers: Vec<&str> = schedlab_policy::POLICIES
                .iter()
                .filter(|i| has_turn(i))
                .map(|i| i.name)
                .collect();
            Err(err(
                "timeslice",
                short_number(v),
                &format!(
                    "a policy that runs jobs in turns ({}); {} has no turn to replace",
                    takers.join(", "),
                    info.name
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// The most CPUs a simulated machine has (state per CPU; 1,024 is benchmarked).
pub const MAX_CPUS: u32 = 65_536;

/// The most clients (tasks of a closed workload; a batch is as many) a run has: each is a
/// task held in memory from the start (4,000,000,000 aborted the process while it allocated).
pub const MAX_CLIENTS: u64 = 10_000_000;

/// A fluid policy (PS, GPS, FB) shares its runqueue's CPUs continuously: it is told how many,
/// and refused the keys of a machine that runs jobs in turns. Checked by `validate`, so that a
/// sweep refuses it before it writes anything, and where the engine builds each runqueue's
/// policy.
pub(crate) fn fit_fluid(
    policy: &mut Box<dyn schedlab_policy::Policy>,
    name: &str,
    m: &Machine,
) -> Result<(), SpecError> {
    if policy.service() != schedlab_policy::Service::Fluid {
        return Ok(());
    }
    let share_cpus = if m.runqueues == Runqueues::PerCpu {
        1
    } else {
        m.cpus
    };
    let f = policy.fluid().expect("fluid policy");
    f.set_cpus(share_cpus)
        .map_err(|why| SpecError::new("cpus", m.cpus, format!("{why} (or runqueues = per-cpu)")))?;
    for (key, value) in [
        ("timeslice", m.timeslice),
        ("idle_wake", Some(m.idle_wake)),
        ("dispatcher_cost", Some(m.dispatcher_cost)),
        ("end_cost", Some(m.end_cost)),
    ] {
        if let Some(v) = value.filter(|&v| v > 0.0) {
            return Err(SpecError::new(
                key,
                v,
                format!("a policy that runs jobs in turns; {name} shares the CPU continuously"),
            ));
        }
    }
    Ok(())
}

impl SimSpec {
    pub fn validate(&self) -> Result<Config, SpecError> {
        let policy = self.policy.clone().unwrap_or_else(|| "fcfs".into());
        let info = schedlab_policy::info(&policy)?;
        let params = self.params.clone().unwrap_or_default();
        // Build once here so parameter errors surface before any work.
        let mut probe = schedlab_policy::build(info.name, &params, 0)?;

        let machine = self.machine()?;
        fit_fluid(&mut probe, &policy, &machine)?;
        check_timeslice(info, machine.timeslice)?;
        let cpus = machine.cpus;
        let time = positive("time", self.time)?;
        let drain = self.drain.unwrap_or(false);
        if drain && time.is_none() {
            return Err(err(
                "drain",
                true,
                "drain with time: the time at which arrivals stop (without time, jobs or the \
                 trace's end stops them and the system always drains)",
            ));
        }
        let warmup_time = non_negative("warmup_time", self.warmup_time, 0.0)?;
        if let Some(t) = time.filter(|&t| warmup_time >= t) {
            return Err(err(
                "warmup_time",
                short_number(warmup_time),
                &format!(
                    "less than time ({}): a job that arrives before it is not measured, and \
                     none arrives after the run",
                    short_number(t)
                ),
            ));
        }
        if self.jobs == Some(0) {
            return Err(err("jobs", 0, "a whole number >= 1"));
        }
        let io_device = match word("io_device", &self.io_device, &["delay", "fcfs"], "delay")? {
            "fcfs" => IoDevice::Fcfs,
            _ => IoDevice::Delay,
        };

        let size_text = self.size.clone().unwrap_or_else(|| "exp:1".into());
        let global_size = Dist::parse("size", &size_text)?;
        let classes = self.classes(&global_size, cpus)?;
        if self.trace.is_none() {
            // A trace's own sizes are not the classes'.
            check_turns(info, &params, machine.timeslice, &classes, time)?;
        }
        if machine.runqueues == Runqueues::Global && cpus > 1 {
            if let Some(i) = classes.iter().position(|c| !c.affinity.is_empty()) {
                return Err(err(
                    &format!("classes[{i}].affinity"),
                    format!("{:?}", classes[i].affinity),
                    "runqueues = per-cpu (one global queue serves every CPU)",
                ));
            }
        }

        let closed = self.clients.is_some() || classes_have_clients(&self.classes);
        let workload = if let Some(path) = &self.trace {
            for key in ["arrival", "load", "clients"] {
                if let Some(value) = self.given(key) {
                    return Err(err(
                        key,
                        value,
                        "nothing: trace replaces arrival, load and clients",
                    ));
                }
            }
            let names: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
            if trace::is_closed(path) {
                if let Some(think) = &self.think {
                    return Err(err(
                        "think",
                        think,
                        "nothing: a closed trace gives every think in its column",
                    ));
                }
                let tasks = trace::read_closed(path, &names)?;
                Workload::Closed {
                    clients: tasks.iter().map(|t| t.class).collect(),
                    script: Some(tasks.into_iter().map(|t| t.rows).collect()),
                }
            } else {
                Workload::Trace {
                    rows: trace::read(path, &names)?,
                }
            }
        } else if closed {
            if let Some((key, value)) = ["arrival", "load"]
                .into_iter()
                .find_map(|k| self.given(k).map(|v| (k, v)))
            {
                return Err(err(
                    key,
                    value,
                    "nothing: a closed workload (clients) has no arrival rate",
                ));
            }
            Workload::Closed {
                clients: self.client_classes(&classes)?,
                script: None,
            }
        } else {
            let think_given =
                self.think.is_some() || self.classes.iter().flatten().any(|c| c.think.is_some());
            if think_given {
                return Err(err(
                    "think",
                    self.think.as_deref().unwrap_or("(in a class)"),
                    "clients as well (think time is for closed workloads)",
                ));
            }
            let mean_size = mean_size(&classes);
            let arrival = match (&self.arrival, self.load) {
                (Some(_), Some(_)) => {
                    return Err(err(
                        "load",
                        self.load.unwrap_or(0.0),
                        "either load or arrival, not both",
                    ))
                }
                (Some(a), None) => Dist::parse("arrival", a)?,
                (None, Some(load)) => {
                    if !(load > 0.0 && load.is_finite()) {
                        return Err(err("load", load, "a finite number > 0"));
                    }
                    let mean = mean_size / (load * cpus as f64);
                    if !(mean > 0.0 && mean.is_finite()) {
                        // The arrival rate is the load over the mean size: none without one.
                        return Err(err(
                            "load",
                            load,
                            &format!(
                                "sizes whose mean sets a finite arrival rate > 0 (their mean \
                                 is {} ms: a mean inter-arrival time of {} ms); or give arrival",
                                short_number(mean_size),
                                short_number(mean)
                            ),
                        ));
                    }
                    Dist::Exp(mean)
                }
                (None, None) => {
                    return Err(err(
                        "arrival",
                        "(missing)",
                        "an inter-arrival distribution, or load, or clients, or trace",
                    ))
                }
            };
            Workload::Open { arrival }
        };
        let offered_load = match &workload {
            Workload::Open { arrival } => {
                Some(mean_size(&classes) / (arrival.mean() * cpus as f64))
            }
            _ => None,
        };
        if let Some(rho) = offered_load {
            if rho >= 1.0 && !self.allow_unstable.unwrap_or(false) {
                let key = if self.load.is_some() {
                    "load"
                } else {
                    "arrival"
                };
                return Err(err(
                    key,
                    format!(
                        "{} (load {rho:.4})",
                        self.load.map_or_else(
                            || self.arrival.clone().unwrap_or_default(),
                            |l| l.to_string()
                        )
                    ),
                    "a load < 1 for an open system; set allow_unstable to run it anyway",
                ));
            }
            // The CPU time a job takes, `service_scale * size + service_offset`: the load the
            // machine sees (checked here for its sign and finiteness only as far as it needs).
            let scale = self.service_scale.filter(|x| x.is_finite() && *x > 0.0);
            let offset = self.service_offset.filter(|x| x.is_finite());
            let per_job = offset.unwrap_or(0.0) / (open_arrival_mean(&workload) * cpus as f64);
            let machine = rho * scale.unwrap_or(1.0) + per_job;
            if machine >= 1.0 && rho < 1.0 && !self.allow_unstable.unwrap_or(false) {
                let (key, value) = match scale {
                    Some(s) if s > 1.0 || offset.is_none() => ("service_scale", s),
                    _ => ("service_offset", offset.unwrap_or(0.0)),
                };
                return Err(err(
                    key,
                    short_number(value),
                    &format!(
                        "a machine load < 1 for an open system: load {} becomes {machine:.4} of \
                         the CPUs' time with service_scale and service_offset; set \
                         allow_unstable to run it anyway",
                        short_number(rho)
                    ),
                ));
            }
        }
        if self.jobs.is_none()
            && time.is_none()
            && self.precision.is_none()
            && workload.trace_jobs().is_none()
        {
            return Err(err(
                "jobs",
                "(missing)",
                "a number of jobs, time or precision to stop the run",
            ));
        }
        let load_sample = positive("load_sample", self.load_sample)?;
        if load_sample.is_some() && time.is_none() && self.jobs.is_none() {
            return Err(err(
                "load_sample",
                self.load_sample.unwrap_or(0.0),
                "a run that stops (jobs or time)",
            ));
        }

        let warmup = match &self.warmup {
            Some(WarmupSpec::Jobs(n)) => Warmup::Jobs(*n),
            Some(WarmupSpec::Word(w)) if w == "auto" => Warmup::Auto,
            Some(WarmupSpec::Word(w)) => {
                return Err(err("warmup", w, "a whole number >= 0, or auto"))
            }
            // Open workloads start empty, far from their steady state; a trace is the jobs
            // the user gave, all measured; a closed workload starts with every client.
            // An unstable queue has no steady state to wait for.
            None if matches!(workload, Workload::Open { .. })
                && !self.allow_unstable.unwrap_or(false) =>
            {
                Warmup::Auto
            }
            None => Warmup::Jobs(0),
        };
        let precision = match (self.precision, self.max_jobs) {
            (None, None) => None,
            (None, Some(m)) => {
                return Err(err(
                    "max_jobs",
                    m,
                    "precision as well: it caps a run until precise",
                ))
            }
            (Some(p), _) if !(p > 0.0 && p < 1.0) => {
                return Err(err(
                    "precision",
                    p,
                    "a relative half-width > 0 and < 1, e.g. 0.01",
                ))
            }
            (Some(p), _) if time.is_some() => {
                return Err(err(
                    "precision",
                    p,
                    "a run that stops by jobs: give max_jobs, not time",
                ))
            }
            (Some(p), _) if matches!(workload, Workload::Trace { .. }) => {
                return Err(err(
                    "precision",
                    p,
                    "a generated workload (a trace has its jobs)",
                ))
            }
            (Some(_), Some(0)) => return Err(err("max_jobs", 0, "a whole number >= 1")),
            // The run measures `jobs` before its first look: a cap below it cut the run short
            // without a word.
            (Some(_), Some(m)) if self.jobs.is_some_and(|j| m < j) => {
                return Err(err(
                    "max_jobs",
                    m,
                    &format!(
                        "at least jobs ({}): a run until precise measures jobs before its \
                         first look, and stops at max_jobs",
                        self.jobs.unwrap_or(0)
                    ),
                ))
            }
            (Some(target), max) => Some(Precision {
                target,
                max_jobs: max.unwrap_or(DEFAULT_MAX_JOBS),
            }),
        };
        let batches =
            match (self.batches, self.jobs) {
                (None, _) => 0,
                (Some(b), _) if b < 2 => return Err(err(
                    "batches",
                    b,
                    "a whole number >= 2: the mean's interval is Student's t over the batch means",
                )),
                // A run until precise measures as many jobs as it takes: `jobs` is its least.
                (Some(b), _) if precision.is_some() => {
                    return Err(err(
                        "batches",
                        b,
                        "no precision as well: a run until precise has no number of jobs to split",
                    ))
                }
                (Some(b), Some(j)) if u64::from(b) <= j => u64::from(b),
                (Some(b), Some(j)) => {
                    return Err(err("batches", b, &format!("at most jobs ({j}) batches")))
                }
                (Some(b), None) => {
                    return Err(err(
                        "batches",
                        b,
                        "jobs as well: batches split the measured jobs",
                    ))
                }
            };
        Ok(Config {
            policy: info.name.to_string(),
            params,
            workload,
            classes,
            io_device,
            jobs: self.jobs,
            time,
            drain,
            warmup,
            warmup_time,
            precision,
            machine,
            seed: self.seed.unwrap_or(1),
            keep_jobs: self.keep_jobs.unwrap_or(false),
            keep_schedule: self.keep_schedule.unwrap_or(false),
            load_sample,
            batches,
            offered_load,
        })
    }

    fn machine(&self) -> Result<Machine, SpecError> {
        let cpus = self.cpus.unwrap_or(1);
        if cpus == 0 || cpus > MAX_CPUS {
            return Err(err(
                "cpus",
                cpus,
                &format!("a whole number from 1 to {MAX_CPUS}"),
            ));
        }
        let cpus = cpus as usize;
        let runqueues = match word(
            "runqueues",
            &self.runqueues,
            &["global", "per-cpu"],
            "global",
        )? {
            "per-cpu" => Runqueues::PerCpu,
            _ => Runqueues::Global,
        };
        let per_cpu_only = |key: &str, given: Option<String>| -> Result<(), SpecError> {
            match given {
                Some(value) if runqueues == Runqueues::Global => Err(err(
                    key,
                    &value,
                    "runqueues = per-cpu (one global queue needs no placement or balancing)",
                )),
                _ => Ok(()),
            }
        };
        per_cpu_only("placement", self.placement.clone())?;
        per_cpu_only("balancer", self.balancer.clone())?;
        per_cpu_only(
            "ideal",
            self.ideal.as_ref().map(|i| match i {
                IdealSpec::Cpu(c) => c.to_string(),
                IdealSpec::List(l) => format!("{l:?}"),
                IdealSpec::Word(w) => w.clone(),
            }),
        )?;
        let ideal = Ideal::parse(&self.ideal, cpus)?;
        let placement = Placement::parse(self.placement.as_deref(), self.choices, cpus)?;
        let balancer = balance::Settings::parse(balance::Given {
            balancer: self.balancer.as_deref(),
            balance_interval: self.balance_interval,
            balance_interval_max: self.balance_interval_max,
            imbalance: self.imbalance,
        })?;
        if let Some(c) = self.start_pinned {
            if c as usize >= cpus {
                return Err(err(
                    "start_pinned",
                    c,
                    &format!("a CPU index from 0 to {}", cpus - 1),
                ));
            }
        }
        let release_after = non_negative("release_after", self.release_after, 0.0)?;
        if self.release_after.is_some() && self.start_pinned.is_none() {
            return Err(err(
                "release_after",
                release_after,
                "start_pinned (it lifts that pin)",
            ));
        }
        let boost = match word(
            "boost",
            &self.boost,
            &["none", "windows", "linux26"],
            "none",
        )? {
            "windows" => Boost::Windows,
            "linux26" => Boost::Linux26 {
                max: positive("boost_max", self.boost_max)?.unwrap_or(5.0),
                sleep_avg_max: positive("sleep_avg_max", self.sleep_avg_max)?.unwrap_or(1000.0),
            },
            _ => Boost::None,
        };
        Ok(Machine {
            cpus,
            context_switch: non_negative("context_switch", self.context_switch, 0.0)?,
            turn_cost: non_negative("turn_cost", self.turn_cost, 0.0)?,
            service_scale: positive("service_scale", self.service_scale)?.unwrap_or(1.0),
            start_cost: non_negative("start_cost", self.start_cost, 0.0)?,
            service_offset: match self.service_offset {
                Some(x) if !x.is_finite() => return Err(err("service_offset", x, "a number")),
                v => v.unwrap_or(0.0),
            },
            dispatch_delay: non_negative("dispatch_delay", self.dispatch_delay, 0.0)?,
            idle_wake: non_negative("idle_wake", self.idle_wake, 0.0)?,
            dispatcher_cost: non_negative("dispatcher_cost", self.dispatcher_cost, 0.0)?,
            end_cost: non_negative("end_cost", self.end_cost, 0.0)?,
            wake_delay: non_negative("wake_delay", self.wake_delay, 0.0)?,
            buffer: match (self.buffer, runqueues) {
                (Some(0), _) => return Err(err("buffer", 0, "a number of jobs >= 1")),
                (Some(b), Runqueues::PerCpu) => {
                    return Err(err(
                        "buffer",
                        b,
                        "global runqueues (one bounded buffer before the one queue)",
                    ))
                }
                (b, _) => b.map(|b| b as usize),
            },
            runqueues,
            placement,
            balancer,
            migration_cost: non_negative("migration_cost", self.migration_cost, 0.0)?,
            cache_hot: non_negative("cache_hot", self.cache_hot, 0.5)?,
            timeslice: positive("timeslice", self.timeslice)?,
            start_pinned: self.start_pinned,
            release_after,
            ideal,
            boost,
        })
    }

    /// The value given to `arrival`, `load` or `clients`, as the message shows it.
    fn given(&self, key: &str) -> Option<String> {
        match key {
            "arrival" => self.arrival.clone(),
            "load" => self.load.map(|v| v.to_string()),
            "clients" => self.clients.map(|v| v.to_string()),
            _ => None,
        }
    }

    fn classes(&self, global_size: &Dist, cpus: usize) -> Result<Vec<Class>, SpecError> {
        let specs = match &self.classes {
            Some(c) if !c.is_empty() => c.clone(),
            _ => vec![ClassSpec::default()],
        };
        let global_think = Dist::parse("think", self.think.as_deref().unwrap_or("det:0"))?;
        let global_io = self
            .io
            .as_deref()
            .map(|t| Dist::parse("io", t))
            .transpose()?;
        let global_bursts = self.bursts.unwrap_or(1);
        if global_bursts == 0 {
            return Err(err("bursts", 0, "a whole number >= 1"));
        }
        let fractions: Vec<Option<f64>> = specs.iter().map(|c| c.fraction).collect();
        let shares = class_shares(&fractions)?;
        let mut cumulative = 0.0;
        let mut out = Vec::new();
        for (i, c) in specs.iter().enumerate() {
            let key = |k: &str| format!("classes[{i}].{k}");
            cumulative += shares[i];
            let size = match &c.size {
                Some(s) => Dist::parse(&key("size"), s)?,
                None => global_size.clone(),
            };
            let tickets = c.tickets.unwrap_or(1.0);
            if !(tickets > 0.0 && tickets.is_finite()) {
                return Err(err(&key("tickets"), tickets, "a number > 0"));
            }
            let weight = match (c.weight, c.nice) {
                (Some(_), Some(_)) => {
                    return Err(err(
                        &key("nice"),
                        c.nice.unwrap_or(0.0),
                        "either weight or nice, not both",
                    ))
                }
                (Some(w), None) if !(w > 0.0 && w.is_finite()) => {
                    return Err(err(&key("weight"), w, "a number > 0"))
                }
                (Some(w), None) => w,
                (None, Some(n)) if !(-20.0..=19.0).contains(&n) => {
                    return Err(err(&key("nice"), n, "a number from -20 to 19"))
                }
                (None, Some(n)) => nice_to_weight(n),
                (None, None) => 1.0,
            };
            if let Some(d) = c.deadline {
                if d.is_nan() || d <= 0.0 {
                    return Err(err(&key("deadline"), d, "a number > 0"));
                }
            }
            if let Some(p) = c.priority.filter(|p| !p.is_finite()) {
                return Err(err(
                    &key("priority"),
                    p,
                    "a finite number (0 is the highest)",
                ));
            }
            let think = match &c.think {
                Some(t) => Dist::parse(&key("think"), t)?,
                None => global_think.clone(),
            };
            let bursts = c.bursts.unwrap_or(global_bursts);
            if bursts == 0 {
                return Err(err(&key("bursts"), 0, "a whole number >= 1"));
            }
            let io = match &c.io {
                Some(t) => Some(Dist::parse(&key("io"), t)?),
                None => global_io.clone(),
            };
            if bursts > 1 && io.is_none() {
                return Err(err(
                    "io",
                    "(missing)",
                    "an I/O wait distribution, since jobs have more than one burst",
                ));
            }
            let final_io = c.final_io.or(self.final_io).unwrap_or(false);
            if final_io && io.is_none() {
                return Err(err(
                    "io",
                    "(missing)",
                    "an I/O wait distribution, since final_io ends each job with an I/O",
                ));
            }
            let io_boost = match &c.io_kind {
                None => IO_KINDS[0].1,
                Some(kind) => IO_KINDS
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(kind))
                    .map(|(_, b)| *b)
                    .ok_or_else(|| {
                        let names: Vec<&str> = IO_KINDS.iter().map(|(k, _)| *k).collect();
                        err(
                            &key("io_kind"),
                            kind,
                            &format!("one of {}", names.join(", ")),
                        )
                    })?,
            };
            let affinity = c.affinity.clone().unwrap_or_default();
            if let Some(bad) = affinity.iter().max().filter(|&&c| c as usize >= cpus) {
                // The one check of an affinity's CPUs: a translation that rewrote the
                // affinity (the machine's, or text) names it as written (Translation.given).
                return Err(err(
                    &key("affinity"),
                    format!("{affinity:?}"),
                    &format!(
                        "CPU numbers from 0 to {} (the simulated machine has {cpus} CPU{}; \
                         CPU {bad} is not one)",
                        cpus - 1,
                        if cpus > 1 { "s" } else { "" }
                    ),
                ));
            }
            out.push(Class {
                name: c.name.clone().unwrap_or_else(|| i.to_string()),
                cumulative,
                size,
                priority: c.priority.unwrap_or(0.0),
                tickets,
                weight,
                deadline: c.deadline,
                think,
                bursts,
                io,
                final_io,
                io_boost,
                affinity,
            });
        }
        if let Some(last) = out.last_mut() {
            last.cumulative = 1.0;
        }
        schedlab_model::vocabulary::check_class_names(out.iter().map(|c| c.name.as_str()))?;
        Ok(out)
    }

    fn client_classes(&self, classes: &[Class]) -> Result<Vec<u32>, SpecError> {
        if classes_have_clients(&self.classes) {
            if self.clients.is_some() {
                return Err(err(
                    "clients",
                    self.clients.unwrap_or(0),
                    "either clients or classes[].clients, not both",
                ));
            }
            let mut total = 0u64;
            for (i, c) in self.classes.iter().flatten().enumerate() {
                total += u64::from(c.clients.unwrap_or(0));
                if total > MAX_CLIENTS {
                    return Err(err(
                        &format!("classes[{i}].clients"),
                        c.clients.unwrap_or(0),
                        &format!("at most {MAX_CLIENTS} clients in all classes"),
                    ));
                }
            }
            let mut v = Vec::new();
            for (i, c) in self.classes.iter().flatten().enumerate() {
                v.extend(std::iter::repeat_n(
                    i as u32,
                    c.clients.unwrap_or(0) as usize,
                ));
            }
            if v.is_empty() {
                return Err(err("classes[].clients", 0, "at least one client"));
            }
            return Ok(v);
        }
        let n = self.clients.unwrap_or(0);
        if n == 0 || u64::from(n) > MAX_CLIENTS {
            return Err(err(
                "clients",
                n,
                &format!("a whole number from 1 to {MAX_CLIENTS}"),
            ));
        }
        // Clients take classes in turn, weighted by fraction.
        let mut v = Vec::with_capacity(n as usize);
        let mut prev = 0.0;
        let mut bounds = Vec::new();
        for c in classes {
            bounds.push((prev, c.cumulative));
            prev = c.cumulative;
        }
        for i in 0..n {
            let u = (i as f64 + 0.5) / n as f64;
            let class = bounds
                .iter()
                .position(|(_, hi)| u < *hi)
                .unwrap_or(classes.len() - 1);
            v.push(class as u32);
        }
        Ok(v)
    }
}

fn classes_have_clients(classes: &Option<Vec<ClassSpec>>) -> bool {
    classes.iter().flatten().any(|c| c.clients.is_some())
}

fn mean_size(classes: &[Class]) -> f64 {
    let mut prev = 0.0;
    let mut m = 0.0;
    for c in classes {
        m += (c.cumulative - prev) * c.size.mean();
        prev = c.cumulative;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_messages_are_short() {
        assert_eq!(short_number(1e308), "1e308");
        assert_eq!(short_number(2.5e-7), "2.5e-7");
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(1.25), "1.25");
        assert_eq!(short_number(f64::INFINITY), "inf");
    }

    #[test]
    fn ideal_cpus_are_read_in_every_form_of_a_cpu_key() {
        let parse = |v: IdealSpec, cpus| Ideal::parse(&Some(v), cpus);
        let word = |w: &str| IdealSpec::Word(w.into());
        assert_eq!(parse(word("0,2"), 4).unwrap(), Ideal::List(vec![0, 2]));
        assert_eq!(parse(word(" 1-3 "), 4).unwrap(), Ideal::List(vec![1, 2, 3]));
        assert_eq!(
            parse(word("0, 3-3,1"), 4).unwrap(),
            Ideal::List(vec![0, 3, 1])
        );
        assert_eq!(parse(IdealSpec::Cpu(1), 4).unwrap(), Ideal::List(vec![1]));
        assert_eq!(
            parse(IdealSpec::List(vec![3, 0]), 4).unwrap(),
            Ideal::List(vec![3, 0])
        );
        assert_eq!(parse(word("Round-Robin"), 4).unwrap(), Ideal::RoundRobin);
        assert_eq!(parse(word("start"), 4).unwrap(), Ideal::Start);
        // Out of range: the text as written is named, and a huge range is not listed first.
        let e = parse(word("0-4000000000"), 4).unwrap_err();
        assert_eq!(
            (e.value.as_str(), e.allowed.as_str()),
            ("0-4000000000", "CPU numbers from 0 to 3")
        );
        assert_eq!(parse(IdealSpec::Cpu(4), 4).unwrap_err().value, "4");
        for bad in ["x", "1-0", "", "0,,a", "-1", "[0,1]"] {
            let e = parse(word(bad), 4).unwrap_err();
            assert_eq!(
                e.allowed, "start, round-robin, or a list of CPU numbers",
                "{bad}"
            );
        }
    }

    #[test]
    fn every_key_is_one_of_the_vocabulary() {
        use schedlab_model::vocabulary::{find, find_class};
        assert!(keys().len() > 30);
        for k in keys() {
            assert!(find(&k).is_some(), "{k} is not in the vocabulary");
        }
        for k in class_keys() {
            assert!(
                find_class(&k).is_some(),
                "classes[].{k} is not in the vocabulary"
            );
        }
    }

    #[test]
    fn unstable_open_system_is_refused_with_the_load() {
        let spec = SimSpec {
            load: Some(1.0),
            jobs: Some(10),
            ..Default::default()
        };
        let e = spec.validate().err().unwrap();
        assert_eq!(e.key, "load");
        assert!(e.allowed.contains("allow_unstable"));
        let spec = SimSpec {
            arrival: Some("exp:0.5".into()),
            jobs: Some(10),
            ..Default::default()
        };
        let e = spec.validate().err().unwrap();
        assert_eq!(e.key, "arrival");
        assert!(e.value.contains("load 2.0000"), "{}", e.value);
    }

    #[test]
    fn load_sets_poisson_arrivals_per_cpu() {
        let spec = SimSpec {
            load: Some(0.8),
            size: Some("det:2".into()),
            cpus: Some(4),
            jobs: Some(1),
            ..Default::default()
        };
        let c = spec.validate().ok().unwrap();
        match c.workload {
            Workload::Open {
                arrival: Dist::Exp(m),
            } => assert!((m - 0.625).abs() < 1e-12),
            _ => panic!("open Poisson expected"),
        }
        assert!((c.offered_load.unwrap() - 0.8).abs() < 1e-12);
    }

    #[test]
    fn machine_words_are_checked_and_named() {
        let base = SimSpec {
            load: Some(0.5),
            jobs: Some(1),
            cpus: Some(2),
            ..Default::default()
        };
        let e = SimSpec {
            runqueues: Some("shared".into()),
            ..base.clone()
        }
        .validate()
        .err()
        .unwrap();
        assert_eq!((e.key.as_str(), e.value.as_str()), ("runqueues", "shared"));
        assert!(e.allowed.contains("per-cpu"));
        let e = SimSpec {
            balancer: Some("linux".into()),
            ..base.clone()
        }
        .validate()
        .err()
        .unwrap();
        assert_eq!(e.key, "balancer");
        assert!(e.allowed.contains("per-cpu"));
        let per_cpu = SimSpec {
            runqueues: Some("per-cpu".into()),
            ..base
        };
        let e = SimSpec {
            balancer: Some("bsd".into()),
            ..per_cpu.clone()
        }
        .validate()
        .err()
        .unwrap();
        assert_eq!(e.key, "balancer");
        let e = SimSpec {
            start_pinned: Some(2),
            ..per_cpu.clone()
        }
        .validate()
        .err()
        .unwrap();
        assert_eq!(e.key, "start_pinned");
        let e = SimSpec {
            placement: Some("pod".into()),
            choices: Some(3),
            ..per_cpu
        }
        .validate()
        .err()
        .unwrap();
        assert_eq!(e.key, "choices");
    }
}
