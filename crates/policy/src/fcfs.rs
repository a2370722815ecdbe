//! First come, first served: run each job to completion in arrival order — round robin with
//! an unbounded quantum.

use crate::rr::RoundRobin;
use crate::{ParamError, Params, Policy, PolicyInfo};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "fcfs",
    aliases: &["fifo"],
    summary: "First come, first served; non-preemptive.",
    params: &[],
    build,
};

fn build(_: &Params, _: u64) -> Result<Box<dyn Policy>, ParamError> {
    Ok(Box::new(RoundRobin::new(None)))
}
