//! Shortest job first (non-preemptive): the shortest queued job runs next, to completion.

use crate::{JobView, KeyRule, KeyedPolicy, Params, Policy, PolicyInfo, SpecError};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "sjf",
    aliases: &["sff", "spt"],
    summary: "Shortest job first, non-preemptive (smallest-file-first in the server).",
    params: &[],
    build,
};

fn build(_: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(KeyedPolicy::boxed(Sjf))
}

pub struct Sjf;

impl KeyRule for Sjf {
    const NAME: &'static str = "sjf";
    const MAY_PREEMPT: bool = false;
    fn key(&self, job: &JobView, _: f64) -> f64 {
        job.size
    }
}
