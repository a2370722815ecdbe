//! Python bindings, thin by design: convert, call the Rust crates without the GIL, convert
//! back. One file per world; each registers its functions on the `_core` module.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::de::DeserializeOwned;

use schedlab_model::SpecError;

mod dispatch;
mod model;
mod serve;
mod sim;

/// Named as Python finds it (`schedlab._core.SpecError`), so that an error raised in a worker
/// process pickles back to its parent.
mod errors {
    pyo3::create_exception!(schedlab._core, SpecError, pyo3::exceptions::PyValueError);
}
use errors::SpecError as SpecErrorPy;

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

/// A spec the core checks after reading it (`validate`), giving its checked form.
pub(crate) trait Checked: DeserializeOwned {
    type Valid;
    fn check(&self) -> Result<Self::Valid, SpecError>;
}

const NOT_NEGATIVE: &str = "a whole number >= 0";

/// A spec read from a Python dict and checked by the core; raises SpecError naming the key.
pub(crate) fn checked<T: Checked>(spec: &Bound<'_, PyDict>) -> PyResult<T::Valid> {
    read_and_check::<T>(spec).map_err(|e| spec_error(narrowed::<T>(spec, e)))
}

fn read_and_check<T: Checked>(spec: &Bound<'_, PyDict>) -> Result<T::Valid, SpecError> {
    no_truth_for_a_number(spec)?;
    read_spec::<T>(spec).and_then(|s| s.check())
}

/// Python's true is the number 1 to a reader of numbers (`cpus = true` started one worker):
/// a boolean given to a key of the vocabulary that takes none is refused by name, in the
/// spec and in its classes.
fn no_truth_for_a_number(spec: &Bound<'_, PyDict>) -> Result<(), SpecError> {
    use pyo3::types::{PyBool, PyList};
    use schedlab_model::vocabulary::{find, find_class, Form};

    let judge = |path: String, name: &str, value: &Bound<'_, PyAny>, in_class: bool| {
        let Ok(flag) = value.cast::<PyBool>() else {
            return Ok(());
        };
        let form = if in_class {
            find_class(name)
        } else {
            find(name)
        }
        .map(|k| k.form);
        let wanted = match form {
            None | Some(Form::Bool) => return Ok(()),
            Some(Form::Int) => "a whole number",
            Some(Form::IntOrAuto) => "a whole number or auto",
            Some(Form::Float) => "a number",
            Some(Form::Cpus) => "a whole number",
            Some(Form::Dist) => "a distribution",
            Some(Form::Text) => "text",
            Some(Form::Table) => "a table",
            Some(Form::Tables) => "a list of tables",
        };
        let given = if flag.is_true() { "true" } else { "false" };
        Err(SpecError::new(
            path,
            given,
            format!("{wanted}, not true or false"),
        ))
    };
    for (key, value) in spec.iter() {
        let Ok(name) = key.extract::<String>() else {
            continue;
        };
        judge(name.clone(), &name, &value, false)?;
        if name != "classes" {
            continue;
        }
        let Ok(classes) = value.cast::<PyList>() else {
            continue;
        };
        for (i, class) in classes.iter().enumerate() {
            let Ok(class) = class.cast::<PyDict>() else {
                continue;
            };
            for (k, v) in class.iter() {
                let Ok(k) = k.extract::<String>() else {
                    continue;
                };
                judge(format!("classes[{i}].{k}"), k.as_str(), &v, true)?;
            }
        }
    }
    Ok(())
}

/// A negative whole number is refused by its type, before the core sees it, as "a whole
/// number >= 0". Where the core refuses 0 too (`jobs`), its own rule is the one to give: a
/// user told that 0 is allowed writes 0 and meets a second message.
fn narrowed<T: Checked>(spec: &Bound<'_, PyDict>, e: SpecError) -> SpecError {
    if e.allowed != NOT_NEGATIVE || e.key.contains(['.', '[']) {
        return e;
    }
    let Ok(at_zero) = spec.copy() else { return e };
    if at_zero.set_item(&e.key, 0).is_err() {
        return e;
    }
    match read_and_check::<T>(&at_zero) {
        Err(z) if z.key == e.key => SpecError::new(e.key, e.value, z.allowed),
        _ => e,
    }
}

/// A spec from a Python dict. A value of the wrong type or out of range is a SpecError naming
/// its key (the path serde was at: `port`, `classes[1].clients`) and the value given.
fn read_spec<T: DeserializeOwned>(spec: &Bound<'_, PyDict>) -> Result<T, SpecError> {
    let mut de = pythonize::Depythonizer::from_object(spec.as_any());
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names an unknown key in its text ("unknown field `x`, expected one of ...").
        let unknown = inner.starts_with("unknown field");
        let key = match inner.split('`').nth(1) {
            // The path is the table's (`classes[0]`) or already ends with the key.
            Some(k) if unknown && (path.is_empty() || path == ".") => k.to_string(),
            Some(k) if unknown && !path.ends_with(k) => format!("{path}.{k}"),
            _ => path.clone(),
        };
        let value = given_value(spec, &key);
        // pyo3's "int too big to convert" (a Python int past 64 bits) included.
        let overflow = inner.contains("out of range")
            || inner.contains("too large")
            || inner.contains("too big");
        let allowed = if unknown {
            match inner.split_once(", expected ") {
                Some((_, keys)) => format!("a key of this table ({})", keys.replace('`', "")),
                None => inner.clone(),
            }
        } else if inner.contains("negative int") || (overflow && value.starts_with('-')) {
            NOT_NEGATIVE.to_string()
        } else if overflow {
            "a smaller whole number (it does not fit)".to_string()
        } else if inner.contains("cannot be interpreted as an integer") {
            format!("a whole number ({})", type_given(&inner))
        } else if inner.contains("must be real number") {
            format!("a number ({})", type_given(&inner))
        } else if let Some((_, expected)) = inner
            .strip_prefix("invalid type: ")
            .and_then(|rest| rest.split_once(", expected "))
        {
            expected.to_string()
        } else if let Some(rest) = inner.strip_prefix("unexpected type: ") {
            // pythonize's "'str' object is not an instance of 'Mapping'": what was expected.
            let kind = match rest.rsplit('\'').nth(1) {
                Some("Mapping") => "a table",
                Some("Sequence") => "a list",
                Some("str") => "text",
                _ => "another type",
            };
            format!("{kind} ({})", type_given(rest))
        } else {
            inner.replace("OverflowError: ", "")
        };
        SpecError::new(key, value, allowed)
    })
}

/// "given: str" from Python's "TypeError: 'str' object cannot be ..." or "... not str".
fn type_given(inner: &str) -> String {
    let name = inner
        .split('\'')
        .nth(1)
        .or_else(|| inner.rsplit("not ").next())
        .unwrap_or("another type");
    format!("given: {}", name.trim())
}

/// The value at a path of a spec (`port`, `classes[1].clients`), as text, for an error
/// message (text quoted); "(given)" where the path leads nowhere.
fn given_value(spec: &Bound<'_, PyDict>, path: &str) -> String {
    let mut at = spec.as_any().clone();
    for part in path.split('.') {
        let (name, indices) = part.split_once('[').unwrap_or((part, ""));
        let mut next = if name.is_empty() {
            Some(at.clone())
        } else {
            at.get_item(name).ok()
        };
        for index in indices.split('[').filter(|i| !i.is_empty()) {
            let i = index.trim_end_matches(']').parse::<usize>().ok();
            next = next.zip(i).and_then(|(v, i)| v.get_item(i).ok());
        }
        match next {
            Some(v) => at = v,
            None => return "(given)".into(),
        }
    }
    // Text is shown quoted: `cpus = "2"` is refused as text, not as the number 2.
    if let Ok(text) = at.cast::<pyo3::types::PyString>() {
        return format!("\"{text}\"");
    }
    at.str().map(|s| s.to_string()).unwrap_or_default()
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
