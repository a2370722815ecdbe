//! Python bindings, thin by design: convert, call the Rust crates without the GIL, convert
//! back. One file per world; each registers its functions on the `_core` module.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use schedlab_model::SpecError;

mod dispatch;
mod model;
mod serve;
mod sim;

create_exception!(_core, SpecErrorPy, PyValueError);

/// A SpecError for Python: a ValueError with .key, .value and .allowed.
pub(crate) fn spec_error(e: SpecError) -> PyErr {
    let err = SpecErrorPy::new_err(e.to_string());
    Python::attach(|py| {
        let v = err.value(py);
        let _ = v.setattr("key", e.key.clone());
        let _ = v.setattr("value", e.value.clone());
        let _ = v.setattr("allowed", e.allowed.clone());
    });
    err
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SpecError", m.py().get_type::<SpecErrorPy>())?;
    model::register(m)?;
    sim::register(m)?;
    dispatch::register(m)?;
    serve::register(m)?;
    Ok(())
}
