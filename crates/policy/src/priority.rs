//! Static priorities (lower number first), preemptive or not, with optional aging: a waiting
//! job's effective priority falls by `aging` per unit of time waited.
//!
//! Effective priority p - aging * (now - enqueued) orders jobs the same as the constant
//! p + aging * enqueued, so aging costs nothing per tick.

use crate::{
    JobView, KeyRule, KeyedPolicy, ParamError, ParamInfo, ParamKind, Params, Policy, PolicyInfo,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "priority",
    aliases: &["prio"],
    summary: "Priority classes (lower number first), optional aging and quantum.",
    params: &[
        ParamInfo {
            name: "preemptive",
            kind: ParamKind::Bool,
            default: "true",
            help: "a more important arrival takes the CPU (preemptive-resume)",
        },
        ParamInfo {
            name: "aging",
            kind: ParamKind::NonNegative,
            default: "0",
            help: "priority points gained per unit of time spent waiting",
        },
        ParamInfo {
            name: "quantum",
            kind: ParamKind::Positive,
            default: "none",
            help: "re-decide after this much service (round robin within a level)",
        },
    ],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, ParamError> {
    Ok(KeyedPolicy::boxed(Priority {
        preemptive: p.flag_or("preemptive", true),
        aging: p.num_or("aging", 0.0),
        quantum: p.num("quantum"),
    }))
}

pub struct Priority {
    preemptive: bool,
    aging: f64,
    quantum: Option<f64>,
}

impl KeyRule for Priority {
    const NAME: &'static str = "priority";
    fn key(&self, job: &JobView, now: f64) -> f64 {
        job.priority + self.aging * now
    }
    fn preempts(&self, incoming: &JobView, running: &JobView, _: f64) -> bool {
        self.preemptive && incoming.priority < running.priority
    }
    fn slice(&self) -> Option<f64> {
        self.quantum
    }
}
