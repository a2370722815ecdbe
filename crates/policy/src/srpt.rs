//! Shortest remaining processing time: always run the job with the least work left.

use crate::{JobView, KeyRule, KeyedPolicy, Params, Policy, PolicyInfo, SpecError};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "srpt",
    aliases: &["srtf"],
    summary: "Shortest remaining processing time, preemptive.",
    params: &[],
    build,
};

fn build(_: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(KeyedPolicy::boxed(Srpt))
}

pub struct Srpt;

impl KeyRule for Srpt {
    const NAME: &'static str = "srpt";
    // A queued job's remaining work does not change while it waits, so the key stays right.
    fn key(&self, job: &JobView, _: f64) -> f64 {
        job.remaining
    }
    fn preempts(&self, incoming: &JobView, running: &JobView, _: f64) -> bool {
        incoming.remaining < running.remaining
    }
}
