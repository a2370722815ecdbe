//! Static priorities (lower number first), preemptive or not, with optional aging: a waiting
//! job's effective priority falls by `aging` per unit of time waited. With a quantum, jobs of
//! one priority take turns (round robin within a level); a job preempted by a more important
//! one resumes first among its equals, with the rest of its quantum (Linux SCHED_RR). With
//! aging, its equals are the jobs of the same effective priority: its wait starts again when
//! it is preempted, so jobs of its priority that waited longer stay ahead.
//!
//! Effective priority p - aging * (now - enqueued) orders jobs the same as the constant
//! p + aging * enqueued, so aging costs nothing per tick.

use crate::{
    JobView, KeyRule, KeyedPolicy, ParamDefault, ParamInfo, ParamKind, Params, Policy, PolicyInfo,
    SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "priority",
    aliases: &["prio"],
    summary: "Priority classes (lower number first), optional aging and quantum.",
    params: &[
        ParamInfo {
            name: "preemptive",
            kind: ParamKind::Bool,
            unit: Unit::Bool,
            default: ParamDefault::Bool(true),
            help: "a more important arrival takes the CPU (preemptive-resume)",
        },
        ParamInfo {
            name: "aging",
            kind: ParamKind::NonNegative,
            unit: Unit::Rate,
            default: ParamDefault::Num(0.0),
            help: "priority points gained per ms spent waiting",
        },
        ParamInfo {
            name: "quantum",
            kind: ParamKind::Positive,
            unit: Unit::Work,
            default: ParamDefault::Unset("none: a job runs until it completes or is preempted"),
            help: "re-decide after this much service (round robin within a level)",
        },
    ],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(KeyedPolicy::boxed(Priority {
        preemptive: p.flag("preemptive"),
        aging: p.number("aging"),
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
