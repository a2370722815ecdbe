//! Bindings of the os world: run a plan of real processes, check a plan, probe the kernel.
//! Plans and results cross as JSON text: the launcher process that calls `os_run` imports
//! nothing else (see `schedlab_dispatch` for why it must stay single-threaded).

use pyo3::prelude::*;

use crate::spec_error;

/// Runs a plan (JSON) and returns JSON: {"output": ...} or {"error": {...}}. Must be called
/// from a single-threaded process (it forks the workers).
#[pyfunction]
fn os_run(py: Python<'_>, plan: &str) -> String {
    let plan = plan.to_string();
    py.detach(move || schedlab_dispatch::run_json(&plan))
}

/// Checks a plan (JSON) without running it; raises SpecError naming the key.
#[pyfunction]
fn os_check(plan: &str) -> PyResult<()> {
    schedlab_dispatch::check_json(plan).map_err(spec_error)
}

/// What this kernel allows this process, as JSON (policies, RT throttling, cgroup RT budget).
#[pyfunction]
fn os_capabilities(py: Python<'_>) -> String {
    py.detach(schedlab_dispatch::capabilities_json)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "DISPATCH_FLUID_REFUSED",
        schedlab_dispatch::plan::FLUID_REFUSED,
    )?;
    m.add_function(wrap_pyfunction!(os_run, m)?)?;
    m.add_function(wrap_pyfunction!(os_check, m)?)?;
    m.add_function(wrap_pyfunction!(os_capabilities, m)?)?;
    Ok(())
}
