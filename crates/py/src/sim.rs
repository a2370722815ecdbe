//! Bindings of the simulator: validate a spec, run it.

use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pythonize::pythonize;

use schedlab_sim::spec::{self, SimSpec};

use crate::{checked, spec_error, Checked};

/// Checks a spec without running it; raises SpecError naming the key.
#[pyfunction]
fn validate(spec: &Bound<'_, PyDict>) -> PyResult<()> {
    checked::<SimSpec>(spec).map(|_| ())
}

impl Checked for SimSpec {
    type Valid = spec::Config;
    fn check(&self) -> Result<spec::Config, schedlab_model::SpecError> {
        self.validate()
    }
}

/// Runs one simulation. Returns a dict: summary, classes, tasks, loads, load_series, jobs (dict
/// of numpy arrays or None), schedule (list of dicts or None).
#[pyfunction]
fn simulate<'py>(py: Python<'py>, spec: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyDict>> {
    let cfg = checked::<SimSpec>(spec)?;
    let out = py.detach(|| schedlab_sim::run(&cfg)).map_err(spec_error)?;
    output_dict(py, out)
}

/// Runs independent simulations (replications) on up to `workers` threads (default: every
/// core), the GIL released; every spec is checked before any runs. Returns one dict per spec,
/// as `simulate` does, in the specs' order: the same bits as running them one by one.
#[pyfunction]
#[pyo3(signature = (specs, workers=None))]
fn simulate_many<'py>(
    py: Python<'py>,
    specs: Vec<Bound<'py, PyDict>>,
    workers: Option<usize>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let cfgs = specs
        .iter()
        .map(checked::<SimSpec>)
        .collect::<PyResult<Vec<_>>>()?;
    let workers = workers.unwrap_or_else(schedlab_sim::available_workers);
    let outs = py.detach(|| schedlab_sim::run_many(&cfgs, workers));
    outs.into_iter()
        .map(|o| output_dict(py, o.map_err(spec_error)?))
        .collect()
}

fn output_dict(py: Python<'_>, out: schedlab_sim::Output) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("summary", pythonize(py, &out.summary)?)?;
    d.set_item("classes", pythonize(py, &out.classes)?)?;
    d.set_item("tasks", pythonize(py, &out.tasks)?)?;
    d.set_item("loads", pythonize(py, &out.loads)?)?;
    match out.load_series {
        Some(s) => d.set_item("load_series", pythonize(py, &s)?)?,
        None => d.set_item("load_series", py.None())?,
    }
    match out.jobs {
        Some(t) => {
            let j = PyDict::new(py);
            j.set_item("job", t.job.into_pyarray(py))?;
            j.set_item("client", t.client.into_pyarray(py))?;
            j.set_item("class", t.class.into_pyarray(py))?;
            j.set_item("cpu", t.cpu.into_pyarray(py))?;
            j.set_item("arrival", t.arrival.into_pyarray(py))?;
            j.set_item("first_run", t.first_run.into_pyarray(py))?;
            j.set_item("completion", t.completion.into_pyarray(py))?;
            j.set_item("size", t.size.into_pyarray(py))?;
            j.set_item("wait", t.wait.into_pyarray(py))?;
            j.set_item("response", t.response.into_pyarray(py))?;
            j.set_item("slowdown", t.slowdown.into_pyarray(py))?;
            j.set_item("context_switches", t.context_switches.into_pyarray(py))?;
            j.set_item("migrations", t.migrations.into_pyarray(py))?;
            d.set_item("jobs", j)?;
        }
        None => d.set_item("jobs", py.None())?,
    }
    match out.schedule {
        Some(s) => d.set_item("schedule", pythonize(py, &s)?)?,
        None => d.set_item("schedule", py.None())?,
    }
    Ok(d)
}

/// The number of jobs a run of this spec discards at its start: the one given, or the one
/// its pilot runs find with `warmup = "auto"` (without running the run itself).
#[pyfunction]
fn warmup(py: Python<'_>, spec: &Bound<'_, PyDict>) -> PyResult<u64> {
    let cfg = checked::<SimSpec>(spec)?;
    py.detach(|| schedlab_sim::warmup_jobs(&cfg))
        .map_err(spec_error)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SIM_KEYS", spec::keys())?;
    m.add("SIM_CLASS_KEYS", spec::class_keys())?;
    m.add("MAX_CPUS", spec::MAX_CPUS)?;
    m.add("MAX_CLIENTS", spec::MAX_CLIENTS)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_many, m)?)?;
    m.add_function(wrap_pyfunction!(warmup, m)?)?;
    Ok(())
}
