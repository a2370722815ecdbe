//! Bindings of the server world: run the file server, run the load generator, and two helpers
//! the orchestration needs (the cost model and sampling a distribution for a catalogue).

use numpy::IntoPyArray;
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pythonize::pythonize;

use schedlab_serve::config::ServeSpec;
use schedlab_serve::cost::Cost;
use schedlab_serve::load::LoadSpec;
use schedlab_serve::Server;

use crate::{checked, spec_error, Checked};

/// Checks a server config without starting it; raises SpecError naming the key.
#[pyfunction]
fn serve_validate(config: &Bound<'_, PyDict>) -> PyResult<()> {
    checked::<ServeSpec>(config).map(|_| ())
}

/// Checks a load-generator config without running it; raises SpecError naming the key.
#[pyfunction]
fn load_validate(config: &Bound<'_, PyDict>) -> PyResult<()> {
    checked::<LoadSpec>(config).map(|_| ())
}

/// Runs the file server until SIGINT or SIGTERM, then drains. Blocks without the GIL.
/// Returns the server's stats.
#[pyfunction]
fn serve<'py>(py: Python<'py>, config: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyAny>> {
    let cfg = checked::<ServeSpec>(config)?;
    let server = Server::bind(cfg).map_err(spec_error)?;
    let stats = py
        .detach(|| server.run(true))
        .map_err(|e| PyOSError::new_err(e.to_string()))?;
    // Our handler chained to Python's, so a Ctrl-C that stopped the server is also pending
    // in Python; it has been handled (the server drained), so it must not surface later.
    if let Err(e) = py.check_signals() {
        if !e.is_instance_of::<PyKeyboardInterrupt>(py) {
            return Err(e);
        }
    }
    Ok(pythonize(py, &stats)?)
}

/// Runs the load generator without the GIL. Returns a dict: requests (dict of numpy arrays),
/// summary, targets (paths by index), classes (names by index).
#[pyfunction]
fn load<'py>(py: Python<'py>, config: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyDict>> {
    let cfg = checked::<LoadSpec>(config)?;
    let out = py
        .detach(|| schedlab_serve::load::run(&cfg))
        .map_err(|e| PyOSError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    let r = out.requests;
    let t = PyDict::new(py);
    t.set_item("id", r.id.into_pyarray(py))?;
    t.set_item("client", r.client.into_pyarray(py))?;
    t.set_item("class", r.class.into_pyarray(py))?;
    t.set_item("target", r.target.into_pyarray(py))?;
    t.set_item("arrival", r.arrival.into_pyarray(py))?;
    t.set_item("sent", r.sent.into_pyarray(py))?;
    t.set_item("completion", r.completion.into_pyarray(py))?;
    t.set_item("bytes", r.bytes.into_pyarray(py))?;
    t.set_item("status", r.status.into_pyarray(py))?;
    t.set_item("error", r.error.into_pyarray(py))?;
    t.set_item("warm", r.warm.into_pyarray(py))?;
    d.set_item("requests", t)?;
    d.set_item("summary", pythonize(py, &out.summary)?)?;
    d.set_item("targets", out.targets)?;
    d.set_item("classes", out.classes)?;
    d.set_item("error_names", schedlab_serve::load::ERROR_NAMES.to_vec())?;
    Ok(d)
}

/// The emulated cost model: {"fixed_ms", "per_byte_ms"}. Raises SpecError naming `cost`.
#[pyfunction]
fn parse_cost<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let c = Cost::parse(text).map_err(spec_error)?;
    let d = PyDict::new(py);
    d.set_item("fixed_ms", c.fixed_ms)?;
    d.set_item("per_byte_ms", c.per_byte_ms)?;
    Ok(d)
}

/// `n` draws of a distribution (the simulator's syntax), seeded; errors name `key`.
#[pyfunction]
#[pyo3(signature = (text, n, seed = 1, key = "size"))]
fn sample_dist<'py>(
    py: Python<'py>,
    text: &str,
    n: usize,
    seed: u64,
    key: &str,
) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
    let v = schedlab_serve::load::workload::sample_dist(key, text, n, seed).map_err(spec_error)?;
    Ok(v.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SERVE_KEYS", schedlab_serve::config::KEYS.to_vec())?;
    m.add("LOAD_KEYS", schedlab_serve::load::KEYS.to_vec())?;
    m.add("COST_SYNTAX", schedlab_serve::cost::SYNTAX)?;
    m.add("SERVE_FLUID_REFUSED", schedlab_serve::config::FLUID_REFUSED)?;
    m.add_function(wrap_pyfunction!(serve_validate, m)?)?;
    m.add_function(wrap_pyfunction!(serve, m)?)?;
    m.add_function(wrap_pyfunction!(load_validate, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(parse_cost, m)?)?;
    m.add_function(wrap_pyfunction!(sample_dist, m)?)?;
    Ok(())
}

impl Checked for ServeSpec {
    type Valid = schedlab_serve::config::ServeConfig;
    fn check(&self) -> Result<Self::Valid, schedlab_model::SpecError> {
        self.validate()
    }
}

impl Checked for LoadSpec {
    type Valid = schedlab_serve::load::LoadConfig;
    fn check(&self) -> Result<Self::Valid, schedlab_model::SpecError> {
        self.validate()
    }
}
