//! schedlab's simulator: workloads, distributions, the event engine and its metrics.

pub mod balance;
pub mod dist;
pub mod engine;
pub mod metrics;
mod mintree;
pub mod placement;
pub mod spec;
pub mod trace;

pub use engine::{run, Output};
/// One error type for every bad input: the key, the value given and what is allowed.
pub use schedlab_policy::ParamError as SpecError;
pub use spec::{Config, SimSpec};

/// Validates a spec and runs it.
pub fn simulate(spec: &SimSpec) -> Result<Output, SpecError> {
    run(&spec.validate()?)
}
