//! schedlab's simulator: workloads, the event engine, placement and balancers. Distributions,
//! parameters, the vocabulary and the run summary live in `schedlab-model`, which every world
//! shares.

pub mod balance;
mod cpuset;
pub mod engine;
mod mintree;
pub mod parallel;
pub mod spec;
pub mod trace;

pub use engine::{run, warmup_jobs, Output};
pub use parallel::{available_workers, run_many};
pub use schedlab_model::SpecError;
pub use spec::{Config, SimSpec};

/// Validates a spec and runs it.
pub fn simulate(spec: &SimSpec) -> Result<Output, SpecError> {
    run(&spec.validate()?)
}
