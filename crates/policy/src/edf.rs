//! Earliest deadline first: the job whose absolute deadline is nearest runs.

use crate::{
    JobView, KeyRule, KeyedPolicy, ParamDefault, ParamInfo, ParamKind, Params, Policy, PolicyInfo,
    SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "edf",
    aliases: &[],
    summary: "Earliest deadline first; preemptive unless preemptive = false.",
    params: &[ParamInfo {
        name: "preemptive",
        kind: ParamKind::Bool,
        unit: Unit::Bool,
        default: ParamDefault::Bool(true),
        help: "a job with an earlier deadline takes the CPU",
    }],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(KeyedPolicy::boxed(Edf {
        preemptive: p.flag("preemptive"),
    }))
}

pub struct Edf {
    preemptive: bool,
}

impl KeyRule for Edf {
    const NAME: &'static str = "edf";
    fn key(&self, job: &JobView, _: f64) -> f64 {
        job.deadline
    }
    fn preempts(&self, incoming: &JobView, running: &JobView, _: f64) -> bool {
        self.preemptive && incoming.deadline < running.deadline
    }
}
