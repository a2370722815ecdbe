//! What every world shares (DESIGN.md principle 2): the one vocabulary of keys with their
//! units, one error type, policy parameter values, distributions, the kernel's nice weights,
//! entitlement by water-filling, placement, and the run summary computed from job and task
//! tables. The simulator, the file server and the dispatcher of real processes depend on this
//! crate, not on each other.

pub mod balance;
pub mod dist;
pub mod entitlement;
pub mod error;
pub mod output;
pub mod params;
pub mod placement;
pub mod shares;
pub mod stats;
pub mod summary;
pub mod truth;
pub mod units;
pub mod vocabulary;
pub mod weights;

pub use error::SpecError;
pub use params::{ParamDefault, ParamInfo, ParamKind, ParamValue, Params};
pub use units::Unit;
