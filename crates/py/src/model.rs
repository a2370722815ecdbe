//! Bindings of what every world shares: the vocabulary, the policy catalogue, distributions,
//! the kernel's weights, water-filling and the run summary. The server and os worlds build
//! their per-job and per-task tables in Python and summarise them here, with the simulator's
//! own code.

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pythonize::{depythonize, pythonize};

use schedlab_model::dist::{Dist, SYNTAX};
use schedlab_model::summary::{self, Counters, JobTable, TaskInput};
use schedlab_model::units::Unit;
use schedlab_model::vocabulary::{Key, CLASS_KEYS, KEYS};
use schedlab_model::weights::{self, NICE_TO_WEIGHT, WEIGHT_IDLEPRIO};
use schedlab_model::{ParamDefault, Params, SpecError};
use schedlab_policy::{Service, POLICIES};

use crate::spec_error;

fn key_dict<'py>(py: Python<'py>, k: &Key) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", k.name)?;
    d.set_item("section", k.section.name())?;
    d.set_item("form", k.form.name())?;
    d.set_item("unit", k.unit.name())?;
    d.set_item("help", k.help)?;
    Ok(d)
}

fn keys<'py>(py: Python<'py>, keys: &[Key]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for k in keys {
        out.append(key_dict(py, k)?)?;
    }
    Ok(out)
}

/// The policy catalogue: name, aliases, summary and parameters of each policy, each parameter
/// with its kind, unit and typed default (`default`: a number, a bool or None; `default_text`
/// as the docs show it).
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
            pd.set_item("kind", q.kind.name())?;
            pd.set_item("unit", q.unit.name())?;
            pd.set_item("allowed", q.kind.describe())?;
            match q.default {
                ParamDefault::Num(x) => pd.set_item("default", x)?,
                ParamDefault::Bool(b) => pd.set_item("default", b)?,
                _ => pd.set_item("default", py.None())?,
            }
            pd.set_item("default_text", q.default.written())?;
            pd.set_item("help", q.help)?;
            params.append(pd)?;
        }
        d.set_item("params", params)?;
        out.append(d)?;
    }
    Ok(out)
}

fn given_params(params: Option<&Bound<'_, PyDict>>) -> PyResult<Params> {
    match params {
        Some(p) => depythonize(p.as_any())
            .map_err(|e| spec_error(SpecError::new("params", "(given)", e.to_string()))),
        None => Ok(Params::new()),
    }
}

/// "discrete" or "fluid": how the policy with these parameters serves its jobs. Raises
/// SpecError on a bad name or parameter.
#[pyfunction]
#[pyo3(signature = (name, params = None))]
fn policy_service(name: &str, params: Option<&Bound<'_, PyDict>>) -> PyResult<&'static str> {
    let p = schedlab_policy::build(name, &given_params(params)?, 1).map_err(spec_error)?;
    Ok(match p.service() {
        Service::Discrete => "discrete",
        Service::Fluid => "fluid",
    })
}

/// Raises the SpecError of a world that runs one job per CPU at a time (`reason`: why it
/// cannot share continuously) if the policy with these parameters is fluid.
#[pyfunction]
#[pyo3(signature = (name, params, reason))]
fn check_discrete(name: &str, params: Option<&Bound<'_, PyDict>>, reason: &str) -> PyResult<()> {
    schedlab_policy::build_discrete(name, &given_params(params)?, 1, reason).map_err(spec_error)?;
    Ok(())
}

/// Raises the SpecError of two classes of one name (`classes[i].name`), as every world's.
#[pyfunction]
fn check_class_names(names: Vec<String>) -> PyResult<()> {
    schedlab_model::vocabulary::check_class_names(names.iter().map(String::as_str))
        .map_err(spec_error)
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

/// Rates (CPUs) of the tasks in `runnable`: `capacity` CPUs shared by weight, none above one.
#[pyfunction]
fn water_fill(runnable: Vec<usize>, weights: Vec<f64>, capacity: f64) -> PyResult<Vec<f64>> {
    if let Some(&bad) = runnable.iter().find(|&&i| i >= weights.len()) {
        return Err(pyo3::exceptions::PyIndexError::new_err(format!(
            "task {bad} has no weight"
        )));
    }
    let mut rate = vec![0.0; weights.len()];
    schedlab_model::entitlement::water_fill(&runnable, &weights, capacity, &mut rate);
    Ok(rate)
}

/// Entitled time per task from runnable intervals: `tasks`, `starts`, `ends` (one interval per
/// row), each task's weight, the CPUs shared, and the window counted.
#[pyfunction]
fn entitled_from_intervals(
    tasks: Vec<usize>,
    starts: Vec<f64>,
    ends: Vec<f64>,
    weights: Vec<f64>,
    capacity: f64,
    window: (f64, f64),
) -> PyResult<Vec<f64>> {
    if tasks.len() != starts.len() || tasks.len() != ends.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "tasks, starts and ends differ in length",
        ));
    }
    let intervals: Vec<(usize, f64, f64)> = tasks
        .into_iter()
        .zip(starts)
        .zip(ends)
        .map(|((t, s), e)| (t, s, e))
        .collect();
    Ok(schedlab_model::entitlement::from_intervals(
        &intervals, &weights, capacity, window,
    ))
}

/// What each task is entitled to under a policy, relative to the others: the policy's own
/// `entitlement` of a job with these tickets and this weight (tickets for lottery and
/// stride, the weight for gps, cfs and eevdf, 1 otherwise).
#[pyfunction]
#[pyo3(signature = (name, tickets, weights, params = None))]
fn policy_entitlements(
    name: &str,
    tickets: Vec<f64>,
    weights: Vec<f64>,
    params: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<f64>> {
    let params: Params = match params {
        Some(p) => depythonize(p.as_any())
            .map_err(|e| spec_error(SpecError::new("params", "(given)", e.to_string())))?,
        None => Params::new(),
    };
    let p = schedlab_policy::build(name, &params, 1).map_err(spec_error)?;
    Ok(tickets
        .iter()
        .zip(&weights)
        .enumerate()
        .map(|(i, (&t, &w))| {
            let mut v = schedlab_policy::JobView::new(schedlab_policy::JobId(i as u32), 0.0, 1.0);
            v.tickets = t;
            v.weight = w;
            p.entitlement(&v)
        })
        .collect())
}

fn column(jobs: &Bound<'_, PyDict>, name: &str) -> PyResult<Vec<f64>> {
    let col = jobs.get_item(name)?.ok_or_else(|| {
        pyo3::exceptions::PyKeyError::new_err(format!("the job table has no column {name}"))
    })?;
    let arr: PyReadonlyArray1<f64> = col.extract()?;
    Ok(arr.as_array().to_vec())
}

/// The run summary of a per-job table (a dict of float64 arrays: client, class, arrival,
/// completion, size, wait, response, slowdown, context_switches, migrations), a per-task table
/// (a list of dicts: task, class, service, entitled, migrations, cpu), the class names and the
/// counters only the world kept (a dict; see `schedlab_model::summary::Counters`). Returns a
/// dict: summary, classes, tasks.
#[pyfunction]
fn summarize<'py>(
    py: Python<'py>,
    jobs: &Bound<'py, PyDict>,
    tasks: &Bound<'py, PyAny>,
    class_names: Vec<String>,
    counters: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let client = column(jobs, "client")?;
    let class = column(jobs, "class")?;
    let n = client.len();
    let table = JobTable {
        job: (0..n as u64).collect(),
        // An unknown client (NaN) is a job of its own, as -1 says; `as` would make it 0.
        client: client
            .iter()
            .map(|&c| if c.is_finite() { c as i64 } else { -1 })
            .collect(),
        class: class.iter().map(|&c| c.max(0.0) as u32).collect(),
        cpu: vec![-1; n],
        arrival: column(jobs, "arrival")?,
        first_run: vec![f64::NAN; n],
        completion: column(jobs, "completion")?,
        size: column(jobs, "size")?,
        wait: column(jobs, "wait")?,
        response: column(jobs, "response")?,
        slowdown: column(jobs, "slowdown")?,
        context_switches: column(jobs, "context_switches")?,
        migrations: column(jobs, "migrations")?,
    };
    let lengths = [
        table.arrival.len(),
        table.completion.len(),
        table.size.len(),
        table.wait.len(),
        table.response.len(),
        table.slowdown.len(),
        table.context_switches.len(),
        table.migrations.len(),
        table.class.len(),
    ];
    if lengths.iter().any(|&l| l != n) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "the job table's columns differ in length",
        ));
    }
    let tasks: Vec<TaskInput> = depythonize(tasks)
        .map_err(|e| spec_error(SpecError::new("tasks", "(given)", e.to_string())))?;
    let counters: Counters = depythonize(counters.as_any())
        .map_err(|e| spec_error(SpecError::new("counters", "(given)", e.to_string())))?;
    let (s, classes, task_rows) =
        py.detach(|| summary::summarize(&table, &tasks, class_names, &counters));
    let d = PyDict::new(py);
    d.set_item("summary", pythonize(py, &s)?)?;
    d.set_item("classes", pythonize(py, &classes)?)?;
    d.set_item("tasks", pythonize(py, &task_rows)?)?;
    Ok(d)
}

/// The kernel's CFS weight of a nice value (1024 at nice 0; clamped to -20..=19).
#[pyfunction]
fn kernel_weight(nice: f64) -> f64 {
    weights::kernel_weight(nice)
}

/// The weight of a nice value relative to nice 0 (1.0), as the simulator's `weight`.
#[pyfunction]
fn nice_to_weight(nice: f64) -> f64 {
    weights::nice_to_weight(nice)
}

/// MSER-5 truncation of a series in the order it was produced: (observations to discard,
/// whether the series was long enough to tell). The one implementation every world uses.
#[pyfunction]
fn mser5(series: PyReadonlyArray1<'_, f64>) -> PyResult<(usize, bool)> {
    let t = schedlab_model::output::mser5(series.as_slice()?);
    Ok((t.discard, t.valid))
}

/// How many of the measured `responses` (in completion order) a run until precise measures
/// (`schedlab_model::output::precise_prefix`); None when they never meet the rule.
#[pyfunction]
#[pyo3(signature = (responses, target, first_look=None))]
fn precise_prefix(
    responses: PyReadonlyArray1<'_, f64>,
    target: f64,
    first_look: Option<u64>,
) -> PyResult<Option<usize>> {
    Ok(schedlab_model::output::precise_prefix(
        responses.as_slice()?,
        target,
        first_look,
    ))
}

/// Quantiles `ps` of `values` in the order they were measured, with their 95% intervals by
/// sectioning (`schedlab_model::output::quantiles_with_intervals`): ([q], [[low, high]]).
#[pyfunction]
fn quantiles_with_intervals(
    values: PyReadonlyArray1<'_, f64>,
    ps: Vec<f64>,
) -> PyResult<(Vec<f64>, Vec<[f64; 2]>)> {
    Ok(schedlab_model::output::quantiles_with_intervals(
        values.as_slice()?,
        &ps,
    ))
}

/// The share of each workload class from its `fraction` (None: not given), one rule in every
/// world (`schedlab_model::shares`).
#[pyfunction]
fn class_shares(fractions: Vec<Option<f64>>) -> PyResult<Vec<f64>> {
    schedlab_model::shares::class_shares(&fractions).map_err(spec_error)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("VOCABULARY", keys(py, KEYS)?)?;
    m.add("CLASS_VOCABULARY", keys(py, CLASS_KEYS)?)?;
    m.add("DIST_SYNTAX", SYNTAX)?;
    m.add("SUMMARY_UNITS", summary::SUMMARY_UNITS.to_vec())?;
    // How a number of each unit is written for users ("ms of service" for work, ...).
    let symbols: Vec<(&str, &str)> = Unit::ALL.iter().map(|u| (u.name(), u.symbol())).collect();
    m.add("UNIT_SYMBOLS", symbols)?;
    m.add("NICE_TO_WEIGHT", NICE_TO_WEIGHT.to_vec())?;
    m.add("WEIGHT_IDLEPRIO", WEIGHT_IDLEPRIO)?;
    m.add_function(wrap_pyfunction!(kernel_weight, m)?)?;
    m.add_function(wrap_pyfunction!(nice_to_weight, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(quantiles_with_intervals, m)?)?;
    m.add_function(wrap_pyfunction!(policy_service, m)?)?;
    m.add_function(wrap_pyfunction!(check_discrete, m)?)?;
    m.add_function(wrap_pyfunction!(check_class_names, m)?)?;
    m.add_function(wrap_pyfunction!(parse_dist, m)?)?;
    m.add_function(wrap_pyfunction!(water_fill, m)?)?;
    m.add_function(wrap_pyfunction!(entitled_from_intervals, m)?)?;
    m.add_function(wrap_pyfunction!(policy_entitlements, m)?)?;
    m.add_function(wrap_pyfunction!(summarize, m)?)?;
    m.add_function(wrap_pyfunction!(mser5, m)?)?;
    m.add_function(wrap_pyfunction!(precise_prefix, m)?)?;
    m.add_function(wrap_pyfunction!(class_shares, m)?)?;
    Ok(())
}
