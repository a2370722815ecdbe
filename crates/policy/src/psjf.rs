//! Preemptive shortest job first: a newly arrived job that is smaller (in total size, not
//! remaining work) takes the CPU.

use crate::{JobView, KeyRule, KeyedPolicy, Params, Policy, PolicyInfo, SpecError};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "psjf",
    aliases: &[],
    summary: "Preemptive shortest job first, by original size.",
    params: &[],
    build,
};

fn build(_: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(KeyedPolicy::boxed(Psjf))
}

pub struct Psjf;

impl KeyRule for Psjf {
    const NAME: &'static str = "psjf";
    fn key(&self, job: &JobView, _: f64) -> f64 {
        job.size
    }
    fn preempts(&self, incoming: &JobView, running: &JobView, _: f64) -> bool {
        incoming.size < running.size
    }
}
