//! First come, first served: run each job to completion in arrival order — round robin with
//! an unbounded quantum.

use crate::rr::RoundRobin;
use crate::{Params, Policy, PolicyInfo, SpecError};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "fcfs",
    aliases: &["fifo"],
    summary: "First come, first served; non-preemptive.",
    params: &[],
    build,
};

fn build(_: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(Box::new(RoundRobin::new(None)))
}
