//! The plan of one run: every task spelled out, as `schedlab.osrun` builds it from a spec.
//! Times are milliseconds, as everywhere in schedlab.

use serde::Deserialize;

use schedlab_model::dist::Dist;
use schedlab_model::SpecError;
use schedlab_policy::Params;

use crate::sys;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub tasks: Vec<TaskPlan>,
    /// The CPUs of the experiment: the default affinity and the dispatcher's CPUs.
    pub cpus: Vec<usize>,
    /// Stop at this time after the start (ms): no new job starts, running ones are abandoned.
    pub time: Option<f64>,
    /// Run until precise: stop as at `time` (then the cap) once the mean response's interval
    /// is this narrow, half-width over mean (`schedlab_model::output::UntilPrecise`).
    #[serde(default)]
    pub precision: Option<f64>,
    /// Until precise: measured jobs, in all, at the first look.
    #[serde(default)]
    pub first_look: Option<u64>,
    /// Until precise: jobs left out of the rule, the first `warmup` to complete and those
    /// arriving before `warmup_time` (ms), as the summary leaves them out.
    #[serde(default)]
    pub warmup: u64,
    #[serde(default)]
    pub warmup_time: f64,
    /// Kill everything at this time after the start (ms).
    pub hard_timeout: f64,
    /// Placement sampling period (ms); None: off.
    pub sample: Option<f64>,
    /// Directory for O_DSYNC files (a real file system, not tmpfs).
    #[serde(default)]
    pub io_dir: Option<String>,
    /// Per-job counters from /proc/thread-self (run-queue wait, migrations) at job ends.
    #[serde(default = "yes")]
    pub job_counters: bool,
    /// Counters to treat as missing ("schedstat", "sched"), to test that path end to end.
    #[serde(default)]
    pub pretend_missing: Vec<String>,
    /// Refuse RT workers when RT throttling is off (sched_rt_runtime_us = -1).
    #[serde(default = "yes")]
    pub refuse_rt_unthrottled: bool,
    pub dispatcher: Option<DispatchPlan>,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskPlan {
    pub class: u32,
    pub sched: SchedPlan,
    pub affinity: Option<Vec<usize>>,
    /// CPUs the task is confined to from the start until `release_after`.
    pub start_cpus: Option<Vec<usize>>,
    pub release_after: Option<f64>,
    /// Jobs this task runs; None: until `time`.
    pub jobs: Option<u64>,
    /// CPU demand per job (ms of thread CPU time), a distribution.
    pub size: String,
    /// Think time between jobs (closed loop), a distribution; None: none.
    pub think: Option<String>,
    /// CPU bursts per job; each is followed by one I/O operation when `io` is set.
    #[serde(default = "one")]
    pub bursts: u32,
    pub io: Option<IoPlan>,
    /// RLIMIT_RTTIME soft limit (µs) for RT tasks; hard is soft + 1 s.
    pub rttime_us: Option<u64>,
    #[serde(default = "one_f")]
    pub tickets: f64,
    #[serde(default)]
    pub priority: f64,
    #[serde(default = "one_f")]
    pub weight: f64,
    pub seed: u64,
}

fn one() -> u32 {
    1
}
fn one_f() -> f64 {
    1.0
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedPlan {
    /// other, batch, idle, fifo, rr, deadline.
    pub policy: String,
    #[serde(default)]
    pub nice: i32,
    #[serde(default)]
    pub rtprio: u32,
    pub runtime: Option<f64>,
    pub deadline: Option<f64>,
    pub period: Option<f64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum IoPlan {
    /// Synchronous writes of this many bytes (O_DSYNC).
    Dsync(u64),
    /// A blocking wait of this duration (ms), a distribution.
    Sleep(String),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchPlan {
    pub policy: String,
    #[serde(default)]
    pub params: Params,
    /// "global": one policy over all CPUs; "per-cpu": one per CPU, each task placed at the
    /// start by the policy or the least-tickets placement (as xv6 does at fork), never moved.
    #[serde(default = "global")]
    pub runqueues: String,
    /// "stop": SIGSTOP/SIGCONT; "fifo": the same, and dispatched workers run at SCHED_FIFO 1,
    /// so the chosen one also beats foreign load.
    #[serde(default = "stop")]
    pub enforce: String,
    pub seed: u64,
}

impl DispatchPlan {
    pub fn per_cpu(&self) -> bool {
        self.runqueues == "per-cpu"
    }
    pub fn fifo(&self) -> bool {
        self.enforce == "fifo"
    }
}

/// Why the dispatcher refuses a fluid policy (PS, GPS, FB without a quantum).
pub const FLUID_REFUSED: &str = "the dispatcher gives each CPU to one process at a time, for \
a slice it enforces with SIGSTOP/SIGCONT (fluid sharing has no slices; rr with a short \
quantum approximates processor sharing)";

fn global() -> String {
    "global".into()
}
fn stop() -> String {
    "stop".into()
}
fn err(key: &str, value: impl ToString, allowed: &str) -> SpecError {
    SpecError {
        key: key.into(),
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

/// A checked plan: distributions parsed, kernel attributes computed.
pub struct Checked {
    pub plan: Plan,
    pub sizes: Vec<Dist>,
    pub thinks: Vec<Option<Dist>>,
    pub sleeps: Vec<Option<Dist>>,
    pub attrs: Vec<sys::Attr>,
    pub params: schedlab_policy::Params,
}

pub fn sched_attr(s: &SchedPlan, key: &str) -> Result<sys::Attr, SpecError> {
    let ms = |v: Option<f64>, k: &str| -> Result<u64, SpecError> {
        match v {
            Some(x) if x > 0.0 && x.is_finite() => Ok((x * 1e6).round() as u64),
            _ => Err(err(
                &format!("{key}.{k}"),
                v.map_or("(missing)".into(), |x| x.to_string()),
                "a number > 0 (ms): SCHED_DEADLINE needs runtime <= deadline <= period",
            )),
        }
    };
    let mut a = sys::Attr {
        nice: s.nice,
        ..Default::default()
    };
    if !(-20..=19).contains(&s.nice) {
        return Err(err(
            &format!("{key}.nice"),
            s.nice,
            "a whole number from -20 to 19",
        ));
    }
    a.policy = match s.policy.as_str() {
        "other" => sys::SCHED_OTHER,
        "batch" => sys::SCHED_BATCH,
        "idle" => sys::SCHED_IDLE,
        "fifo" | "rr" => {
            if !(1..=98).contains(&s.rtprio) {
                return Err(err(
                    &format!("{key}.rtprio"),
                    s.rtprio,
                    "1..98 for fifo and rr (99 is the watchdog's)",
                ));
            }
            a.rtprio = s.rtprio;
            if s.policy == "fifo" {
                sys::SCHED_FIFO
            } else {
                sys::SCHED_RR
            }
        }
        "deadline" => {
            a.runtime_ns = ms(s.runtime, "runtime")?;
            a.deadline_ns = ms(s.deadline, "deadline")?;
            a.period_ns = ms(s.period.or(s.deadline), "period")?;
            if !(a.runtime_ns <= a.deadline_ns && a.deadline_ns <= a.period_ns) {
                return Err(err(
                    &format!("{key}.runtime"),
                    format!(
                        "runtime {} ms, deadline {} ms, period {} ms",
                        a.runtime_ns as f64 / 1e6,
                        a.deadline_ns as f64 / 1e6,
                        a.period_ns as f64 / 1e6
                    ),
                    "runtime <= deadline <= period",
                ));
            }
            sys::SCHED_DEADLINE
        }
        other => {
            return Err(err(
                &format!("{key}.sched"),
                other,
                "one of other, batch, idle, fifo, rr, deadline",
            ))
        }
    };
    Ok(a)
}

pub fn is_rt(a: &sys::Attr) -> bool {
    matches!(
        a.policy,
        sys::SCHED_FIFO | sys::SCHED_RR | sys::SCHED_DEADLINE
    )
}

impl Plan {
    pub fn check(self) -> Result<Checked, SpecError> {
        if self.tasks.is_empty() {
            return Err(err("tasks", 0, "at least one task"));
        }
        if self.cpus.is_empty() {
            return Err(err("cpus", "[]", "at least one CPU"));
        }
        let online = sys::allowed_cpus();
        for &c in &self.cpus {
            if !online.contains(&c) {
                return Err(err(
                    "cpus",
                    c,
                    &format!("CPUs this process may use: {online:?}"),
                ));
            }
        }
        if !(self.hard_timeout > 0.0 && self.hard_timeout.is_finite()) {
            return Err(err("hard_timeout", self.hard_timeout, "a number > 0 (ms)"));
        }
        if let Some(p) = self.precision {
            if !(p > 0.0 && p < 1.0) {
                return Err(err("precision", p, "a relative half-width > 0 and < 1"));
            }
            if self.time.is_none() {
                return Err(err(
                    "time",
                    "(missing)",
                    "a time cap for a run until precise",
                ));
            }
        }
        let mut sizes = Vec::new();
        let mut thinks = Vec::new();
        let mut sleeps = Vec::new();
        let mut attrs = Vec::new();
        for (i, t) in self.tasks.iter().enumerate() {
            let key = format!("tasks[{i}]");
            sizes.push(Dist::parse(&format!("{key}.size"), &t.size)?);
            thinks.push(match &t.think {
                Some(s) => Some(Dist::parse(&format!("{key}.think"), s)?),
                None => None,
            });
            sleeps.push(match &t.io {
                Some(IoPlan::Sleep(s)) => Some(Dist::parse(&format!("{key}.io"), s)?),
                _ => None,
            });
            if t.jobs.is_none() && self.time.is_none() {
                return Err(err(
                    "jobs",
                    "(missing)",
                    "jobs per task, or time, to end the run",
                ));
            }
            if t.bursts == 0 {
                return Err(err(&format!("{key}.bursts"), 0, "a whole number >= 1"));
            }
            for (name, set) in [("affinity", &t.affinity), ("start_cpus", &t.start_cpus)] {
                if let Some(set) = set {
                    if set.is_empty() || set.iter().any(|c| !online.contains(c)) {
                        return Err(err(
                            &format!("{key}.{name}"),
                            format!("{set:?}"),
                            &format!("a non-empty list of CPUs from {online:?}"),
                        ));
                    }
                }
            }
            if matches!(t.io, Some(IoPlan::Dsync(_))) && self.io_dir.is_none() {
                return Err(err("io_dir", "(missing)", "a directory for dsync files"));
            }
            let a = sched_attr(&t.sched, &key)?;
            if a.policy == sys::SCHED_DEADLINE && (t.affinity.is_some() || t.start_cpus.is_some()) {
                return Err(err(
                    &format!("{key}.affinity"),
                    "(given)",
                    "nothing: SCHED_DEADLINE tasks must be free to run on every CPU",
                ));
            }
            attrs.push(a);
        }
        let mut params = Params::new();
        if let Some(d) = &self.dispatcher {
            params = d.params.clone();
            schedlab_policy::build_discrete(&d.policy, &params, d.seed, FLUID_REFUSED)?;
            if !matches!(d.runqueues.as_str(), "global" | "per-cpu") {
                return Err(err("runqueues", &d.runqueues, "global or per-cpu"));
            }
            if !matches!(d.enforce.as_str(), "stop" | "fifo") {
                return Err(err("enforce", &d.enforce, "stop or fifo"));
            }
            if attrs.iter().any(is_rt) {
                return Err(err(
                    "sched",
                    "fifo/rr/deadline",
                    "other, batch or idle under a user-space dispatcher (enforce = fifo runs \
                     the dispatched workers at SCHED_FIFO 1)",
                ));
            }
            if self.tasks.iter().any(|t| t.start_cpus.is_some()) {
                return Err(err(
                    "start_pinned",
                    "(given)",
                    "nothing under a user-space dispatcher: it places every task itself",
                ));
            }
        }
        Ok(Checked {
            plan: self,
            sizes,
            thinks,
            sleeps,
            attrs,
            params,
        })
    }
}
