//! Policy parameters: typed values as they arrive from the CLI, TOML files and Python (one
//! serde form, so no world converts them by hand), their declared domain, unit and default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{SpecError, Unit};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged, expecting = "a number, a list of numbers or true/false")]
pub enum ParamValue {
    Bool(bool),
    Num(f64),
    List(Vec<f64>),
}

impl ParamValue {
    /// As a user would write it.
    pub fn written(&self) -> String {
        match self {
            ParamValue::Num(x) => format!("{x}"),
            ParamValue::Bool(b) => format!("{b}"),
            ParamValue::List(v) => v
                .iter()
                .map(|x| format!("{x}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// Every number in it finite (a bool is): the one test both refusing and naming use.
    fn is_finite(&self) -> bool {
        match self {
            ParamValue::Num(x) => x.is_finite(),
            ParamValue::List(v) => v.iter().all(|x| x.is_finite()),
            ParamValue::Bool(_) => true,
        }
    }
}

/// The values a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A number > 0.
    Positive,
    /// A number >= 0.
    NonNegative,
    /// A whole number >= 1.
    Count,
    Bool,
    /// A list of numbers > 0 (one number is a list of one).
    List,
}

impl ParamKind {
    pub fn describe(self) -> &'static str {
        match self {
            ParamKind::Positive => "a number > 0",
            ParamKind::NonNegative => "a number >= 0",
            ParamKind::Count => "a whole number >= 1",
            ParamKind::Bool => "true or false",
            ParamKind::List => "a list of numbers > 0",
        }
    }

    /// The short name the bindings and the CLI use for the value's type.
    pub fn name(self) -> &'static str {
        match self {
            ParamKind::Positive | ParamKind::NonNegative => "number",
            ParamKind::Count => "count",
            ParamKind::Bool => "bool",
            ParamKind::List => "list",
        }
    }

    /// What a refused value should have been: an infinite or NaN quantum is "> 0" by its
    /// sign, so the refusal names finiteness.
    fn describe_for(self, value: &ParamValue) -> &'static str {
        match (self, value.is_finite()) {
            (ParamKind::Positive, false) => "a finite number > 0",
            (ParamKind::NonNegative, false) => "a finite number >= 0",
            (ParamKind::List, false) => "a list of finite numbers > 0",
            _ => self.describe(),
        }
    }

    fn accepts(self, value: &ParamValue) -> bool {
        value.is_finite()
            && match (self, value) {
                (ParamKind::Positive, ParamValue::Num(x)) => *x > 0.0,
                (ParamKind::NonNegative, ParamValue::Num(x)) => *x >= 0.0,
                (ParamKind::Count, ParamValue::Num(x)) => *x >= 1.0 && x.fract() == 0.0,
                (ParamKind::Bool, ParamValue::Bool(_)) => true,
                (ParamKind::List, ParamValue::List(v)) => {
                    !v.is_empty() && v.iter().all(|x| *x > 0.0)
                }
                (ParamKind::List, ParamValue::Num(x)) => *x > 0.0,
                _ => false,
            }
    }
}

/// A parameter's default, typed: the engine uses exactly what the docs show.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamDefault {
    Num(f64),
    Bool(bool),
    /// No value unless given; the text says what that means ("none: exact fluid").
    Unset(&'static str),
    /// Computed from other parameters; the text says how.
    Derived(&'static str),
}

impl ParamDefault {
    pub fn written(self) -> String {
        match self {
            ParamDefault::Num(x) => format!("{x}"),
            ParamDefault::Bool(b) => format!("{b}"),
            ParamDefault::Unset(t) | ParamDefault::Derived(t) => t.to_string(),
        }
    }

    pub fn value(self) -> Option<ParamValue> {
        match self {
            ParamDefault::Num(x) => Some(ParamValue::Num(x)),
            ParamDefault::Bool(b) => Some(ParamValue::Bool(b)),
            _ => None,
        }
    }
}

/// One parameter of a policy: name, domain, unit, default and help.
#[derive(Clone, Copy, Debug)]
pub struct ParamInfo {
    pub name: &'static str,
    pub kind: ParamKind,
    pub unit: Unit,
    pub default: ParamDefault,
    pub help: &'static str,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Params(pub BTreeMap<String, ParamValue>);

impl Params {
    pub fn new() -> Params {
        Params::default()
    }

    pub fn with(mut self, key: &str, value: ParamValue) -> Params {
        self.0.insert(key.to_string(), value);
        self
    }

    /// Refuses keys not among `declared` and values outside their domain.
    pub fn check(&self, policy: &str, declared: &[ParamInfo]) -> Result<(), SpecError> {
        for (key, value) in &self.0 {
            let Some(p) = declared.iter().find(|p| p.name == key) else {
                let names: Vec<_> = declared.iter().map(|p| p.name).collect();
                let allowed = if names.is_empty() {
                    format!("no parameters for policy {policy}")
                } else {
                    format!("a parameter of policy {policy}: {}", names.join(", "))
                };
                return Err(SpecError::new(key.clone(), value.written(), allowed));
            };
            if !p.kind.accepts(value) {
                // A list as a list: `quantum = [1]` read as `quantum = 1` beside "expected a
                // number > 0" contradicted itself.
                let shown = match value {
                    ParamValue::List(_) => format!("[{}]", value.written().replace(',', ", ")),
                    _ => value.written(),
                };
                return Err(SpecError::new(
                    key.clone(),
                    shown,
                    p.kind.describe_for(value),
                ));
            }
        }
        Ok(())
    }

    /// These parameters with every declared default filled in.
    pub fn with_defaults(&self, declared: &[ParamInfo]) -> Params {
        let mut out = self.clone();
        for p in declared {
            if let (false, Some(v)) = (out.0.contains_key(p.name), p.default.value()) {
                out.0.insert(p.name.to_string(), v);
            }
        }
        out
    }

    pub fn num(&self, key: &str) -> Option<f64> {
        match self.0.get(key) {
            Some(ParamValue::Num(x)) => Some(*x),
            _ => None,
        }
    }

    /// A number that has a declared default (so it is present once defaults are filled in).
    pub fn number(&self, key: &str) -> f64 {
        self.num(key)
            .unwrap_or_else(|| panic!("parameter {key} has no value: declare its default"))
    }

    pub fn flag(&self, key: &str) -> bool {
        match self.0.get(key) {
            Some(ParamValue::Bool(b)) => *b,
            _ => panic!("parameter {key} has no value: declare its default"),
        }
    }

    pub fn list(&self, key: &str) -> Option<Vec<f64>> {
        match self.0.get(key) {
            Some(ParamValue::List(v)) => Some(v.clone()),
            Some(ParamValue::Num(x)) => Some(vec![*x]),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECLARED: &[ParamInfo] = &[
        ParamInfo {
            name: "quantum",
            kind: ParamKind::Positive,
            unit: Unit::Work,
            default: ParamDefault::Num(10.0),
            help: "",
        },
        ParamInfo {
            name: "levels",
            kind: ParamKind::Count,
            unit: Unit::Count,
            default: ParamDefault::Derived("from quanta"),
            help: "",
        },
    ];

    #[test]
    fn values_deserialize_in_one_form_and_defaults_fill_in() {
        let p: Params = serde_json::from_str(r#"{"levels": 3, "quanta": [1, 2]}"#).unwrap();
        assert_eq!(p.num("levels"), Some(3.0));
        assert_eq!(p.list("quanta"), Some(vec![1.0, 2.0]));
        let b: Params = serde_json::from_str(r#"{"preemptive": false}"#).unwrap();
        assert_eq!(b.0["preemptive"], ParamValue::Bool(false));
        let filled = Params::new().with_defaults(DECLARED);
        assert_eq!(filled.number("quantum"), 10.0);
        assert_eq!(filled.num("levels"), None);
    }

    #[test]
    fn check_names_the_key_and_the_domain() {
        let e = Params::new()
            .with("quantum", ParamValue::Num(-1.0))
            .check("rr", DECLARED)
            .unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.allowed.as_str()),
            ("quantum", "a number > 0")
        );
        let e = Params::new()
            .with("quantum", ParamValue::Num(f64::INFINITY))
            .check("rr", DECLARED)
            .unwrap_err();
        assert_eq!(e.allowed, "a finite number > 0");
        let e = Params::new()
            .with("levels", ParamValue::Num(2.5))
            .check("mlfq", DECLARED)
            .unwrap_err();
        assert_eq!(e.allowed, "a whole number >= 1");
        let e = Params::new()
            .with("boost", ParamValue::Num(1.0))
            .check("mlfq", DECLARED)
            .unwrap_err();
        assert!(e.allowed.contains("quantum, levels"), "{}", e.allowed);
    }
}
