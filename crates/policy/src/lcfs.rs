//! Last come, first served. Preemptive-resume by default (LCFS-PR): a newcomer takes the CPU
//! and the interrupted job resumes when every later arrival has left.

use crate::{
    JobView, KeyRule, KeyedPolicy, ParamDefault, ParamInfo, ParamKind, Params, Policy, PolicyInfo,
    SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "lcfs",
    aliases: &["lcfs-pr", "lifo"],
    summary: "Last come, first served; preemptive-resume unless preemptive = false.",
    params: &[ParamInfo {
        name: "preemptive",
        kind: ParamKind::Bool,
        unit: Unit::Bool,
        default: ParamDefault::Bool(true),
        help: "a new arrival takes the CPU from the running job",
    }],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(KeyedPolicy::boxed(Lcfs {
        preemptive: p.flag("preemptive"),
    }))
}

pub struct Lcfs {
    preemptive: bool,
}

impl KeyRule for Lcfs {
    const NAME: &'static str = "lcfs";
    // The latest arrival first; a preempted job keeps its arrival, so it resumes in order.
    fn key(&self, job: &JobView, _: f64) -> f64 {
        -job.arrival
    }
    fn preempts(&self, incoming: &JobView, running: &JobView, _: f64) -> bool {
        self.preemptive && incoming.arrival > running.arrival
    }
}
