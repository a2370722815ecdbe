//! Bindings of the simulator: validate a spec, run it, list policies, parse distributions.

use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pythonize::{depythonize, pythonize};

use schedlab_policy::{ParamKind, POLICIES};
use schedlab_sim::dist::{Dist, SYNTAX};
use schedlab_sim::spec::{SimSpec, CLASS_KEYS, KEYS};
use schedlab_sim::SpecError;

use crate::spec_error;

fn to_spec(spec: &Bound<'_, PyDict>) -> PyResult<SimSpec> {
    depythonize::<SimSpec>(spec.as_any()).map_err(|e| {
        let text = e.to_string();
        // serde says "unknown field `x`, expected one of ..."; name the key like other errors.
        let key = text.split('`').nth(1).unwrap_or("spec").to_string();
        spec_error(SpecError {
            key,
            value: "(given)".into(),
            allowed: text,
        })
    })
}

/// Checks a spec without running it; raises SpecError naming the key.
#[pyfunction]
fn validate(spec: &Bound<'_, PyDict>) -> PyResult<()> {
    to_spec(spec)?.validate().map(|_| ()).map_err(spec_error)
}

/// Runs one simulation. Returns a dict: summary, classes, tasks, jobs (dict of numpy arrays
/// or None), schedule (list of dicts or None).
#[pyfunction]
fn simulate<'py>(py: Python<'py>, spec: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyDict>> {
    let spec = to_spec(spec)?;
    let cfg = spec.validate().map_err(spec_error)?;
    let out = py.detach(|| schedlab_sim::run(&cfg)).map_err(spec_error)?;
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

/// The policy catalogue: name, aliases, summary and parameters of each policy.
#[pyfunction]
fn policies(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for p in POLICIES {
        let d = PyDict::new(py);
        d.set_item("name", p.name)?;
        d.set_item("aliases", p.aliases.to_vec())?;
        d.set_item("summary", p.summary)?;
        let params = PyList::empty(py);
        for q in p.params {
            let pd = PyDict::new(py);
            pd.set_item("name", q.name)?;
            let kind = match q.kind {
                ParamKind::Positive | ParamKind::NonNegative => "number",
                ParamKind::Count => "count",
                ParamKind::Bool => "bool",
                ParamKind::List => "list",
            };
            pd.set_item("kind", kind)?;
            pd.set_item("allowed", q.kind.describe())?;
            pd.set_item("default", q.default)?;
            pd.set_item("help", q.help)?;
            params.append(pd)?;
        }
        d.set_item("params", params)?;
        out.append(d)?;
    }
    Ok(out)
}

/// Parses a distribution into a dict: name, params (numbers as written), written form, mean,
/// and for `empirical` the values. Raises SpecError naming `key`.
#[pyfunction]
#[pyo3(signature = (text, key = "dist"))]
fn parse_dist<'py>(py: Python<'py>, text: &str, key: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = Dist::parse(key, text).map_err(spec_error)?;
    let out = PyDict::new(py);
    out.set_item("name", d.name())?;
    out.set_item("params", d.params())?;
    out.set_item("written", d.written())?;
    out.set_item("mean", d.mean())?;
    if let Dist::Empirical { values, .. } = &d {
        out.set_item("values", values.clone().into_pyarray(py))?;
    }
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("DIST_SYNTAX", SYNTAX)?;
    let keys: Vec<(&str, &str, &str, &str)> = KEYS
        .iter()
        .map(|k| (k.name, k.section, k.kind, k.help))
        .collect();
    m.add("SPEC_KEYS", keys)?;
    m.add("CLASS_KEYS", CLASS_KEYS.to_vec())?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(parse_dist, m)?)?;
    Ok(())
}
