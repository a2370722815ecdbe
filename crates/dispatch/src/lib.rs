//! Real Linux processes under the kernel's policies, or under a schedlab policy enforced from
//! user space.
//!
//! [`run`] takes a [`Plan`] (every task spelled out: kernel policy, affinity, jobs, I/O) and
//! returns an [`Output`] of raw measurements: per-task kernel counters read before the start,
//! at the end of the contended interval and at exit, one record per job, placement samples and,
//! under a user-space dispatcher, its decisions and cost.
//!
//! Why a launcher process: `run` forks its workers, and a fork copies only the calling thread.
//! In a multi-threaded process (any Python that imported numpy) a lock held by another thread
//! at the moment of the fork stays held forever in the child, and the child's next allocation
//! can hang. So `run` refuses to fork unless its process has exactly one thread, and
//! `schedlab.osrun` calls it from a fresh interpreter (`python -m schedlab.osrun.launcher`)
//! that imports nothing but this extension. The workers never return into that interpreter:
//! they run Rust code and leave with `_exit`.

pub mod dispatcher;
pub mod output;
pub mod plan;
pub mod precise;
pub mod procfs;
pub mod run;
pub mod shm;
pub mod sys;
mod worker;

pub use output::Output;
pub use plan::Plan;
pub use run::{run, RunError};

use serde::Serialize;

/// Whether the kernel lets this process use a policy, and why not.
#[derive(Clone, Debug, Serialize)]
pub struct Allowed {
    pub ok: bool,
    pub reason: Option<String>,
}

/// What this kernel, in this cgroup, allows: one entry per kernel policy, plus RT throttling.
#[derive(Clone, Debug, Serialize)]
pub struct Capabilities {
    pub other: Allowed,
    pub batch: Allowed,
    pub idle: Allowed,
    pub fifo: Allowed,
    pub rr: Allowed,
    pub deadline: Allowed,
    pub rt_runtime_us: Option<i64>,
    pub rt_period_us: Option<i64>,
    pub rt_throttling: bool,
    pub cgroup_rt_runtime_us: Option<i64>,
    pub cpus: Vec<usize>,
}

fn try_attr(a: sys::Attr) -> Allowed {
    // A fresh thread tries the policy on itself and exits: nothing of the caller changes.
    let r = std::thread::spawn(move || {
        let r = sys::set_sched(0, &a);
        let _ = sys::set_sched(0, &sys::Attr::default());
        r
    })
    .join()
    .unwrap_or(Err(libc::EINVAL));
    match r {
        Ok(()) => Allowed {
            ok: true,
            reason: None,
        },
        Err(e) => Allowed {
            ok: false,
            reason: Some(format!(
                "sched_setattr({}) failed: {}",
                match a.policy {
                    sys::SCHED_FIFO => "SCHED_FIFO 1",
                    sys::SCHED_RR => "SCHED_RR 1",
                    sys::SCHED_DEADLINE => "SCHED_DEADLINE 1/10/10 ms",
                    sys::SCHED_BATCH => "SCHED_BATCH",
                    sys::SCHED_IDLE => "SCHED_IDLE",
                    _ => "SCHED_OTHER",
                },
                match e {
                    libc::EPERM => "EPERM: not permitted (no CAP_SYS_NICE, or no RT budget \
                                    in this cgroup)"
                        .to_string(),
                    libc::EBUSY => "EBUSY: SCHED_DEADLINE admission control refused".into(),
                    e => sys::strerror(e),
                }
            )),
        },
    }
}

/// The cpu cgroup of this process and its RT budget (cgroup v1 cpu.rt_runtime_us).
fn cgroup_rt_runtime() -> Option<i64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        if ctrl.split(',').any(|c| c == "cpu") {
            for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
                let p = format!("{root}{path}/cpu.rt_runtime_us");
                if let Some(v) = run::read_i64(&p) {
                    return Some(v);
                }
            }
        }
    }
    None
}

/// Probes what the kernel allows, without changing anything for the caller.
pub fn capabilities() -> Capabilities {
    let base = sys::Attr::default();
    let rt_runtime_us = run::read_i64("/proc/sys/kernel/sched_rt_runtime_us");
    Capabilities {
        other: try_attr(base),
        batch: try_attr(sys::Attr {
            policy: sys::SCHED_BATCH,
            ..base
        }),
        idle: try_attr(sys::Attr {
            policy: sys::SCHED_IDLE,
            ..base
        }),
        fifo: try_attr(sys::Attr {
            policy: sys::SCHED_FIFO,
            rtprio: 1,
            ..base
        }),
        rr: try_attr(sys::Attr {
            policy: sys::SCHED_RR,
            rtprio: 1,
            ..base
        }),
        deadline: try_attr(sys::Attr {
            policy: sys::SCHED_DEADLINE,
            runtime_ns: 1_000_000,
            deadline_ns: 10_000_000,
            period_ns: 10_000_000,
            ..base
        }),
        rt_runtime_us,
        rt_period_us: run::read_i64("/proc/sys/kernel/sched_rt_period_us"),
        rt_throttling: rt_runtime_us != Some(-1),
        cgroup_rt_runtime_us: cgroup_rt_runtime(),
        cpus: sys::allowed_cpus(),
    }
}

/// Parses a plan from JSON; a bad field becomes a SpecError naming it.
pub fn parse_plan(text: &str) -> Result<Plan, schedlab_model::SpecError> {
    serde_json::from_str::<Plan>(text).map_err(|e| {
        let msg = e.to_string();
        let key = msg.split('`').nth(1).unwrap_or("plan").to_string();
        schedlab_model::SpecError {
            key,
            value: "(given)".into(),
            allowed: msg,
        }
    })
}

/// Checks a plan without running it.
pub fn check_json(text: &str) -> Result<(), schedlab_model::SpecError> {
    parse_plan(text)?.check().map(|_| ())
}

/// Runs a plan given as JSON. Returns JSON: `{"output": ...}`, or `{"error": {"kind": "spec" |
/// "refused" | "interrupted" | "failed", "message": ..., and key/value/allowed or what/reason}}`.
pub fn run_json(text: &str) -> String {
    let result = parse_plan(text).map_err(RunError::Spec).and_then(run::run);
    let value = match result {
        Ok(out) => serde_json::json!({ "output": out }),
        Err(e) => {
            let message = e.to_string();
            let mut err = serde_json::json!({ "message": message });
            match e {
                RunError::Spec(s) => {
                    err["kind"] = "spec".into();
                    err["key"] = s.key.into();
                    err["value"] = s.value.into();
                    err["allowed"] = s.allowed.into();
                }
                RunError::Refused { what, reason } => {
                    err["kind"] = "refused".into();
                    err["what"] = what.into();
                    err["reason"] = reason.into();
                }
                RunError::Interrupted(_) => err["kind"] = "interrupted".into(),
                RunError::Failed(_) => err["kind"] = "failed".into(),
            }
            serde_json::json!({ "error": err })
        }
    };
    // NaN cannot appear: every float in Output is finite or an Option.
    serde_json::to_string(&value).unwrap_or_else(|e| {
        format!("{{\"error\": {{\"kind\": \"failed\", \"message\": \"serialising: {e}\"}}}}")
    })
}

/// What the kernel allows, as JSON.
pub fn capabilities_json() -> String {
    serde_json::to_string(&capabilities()).unwrap_or_default()
}
