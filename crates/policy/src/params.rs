//! Policy parameters: typed values, their documentation and one error type that names the key.

use std::collections::BTreeMap;
use std::fmt;

use crate::PolicyInfo;

#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    Num(f64),
    Bool(bool),
    List(Vec<f64>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A number > 0.
    Positive,
    /// A number >= 0.
    NonNegative,
    /// A whole number >= 1.
    Count,
    Bool,
    /// A comma-separated list of numbers > 0.
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
}

/// Documentation of one parameter; `default` is shown to users as written.
#[derive(Clone, Copy, Debug)]
pub struct ParamInfo {
    pub name: &'static str,
    pub kind: ParamKind,
    pub default: &'static str,
    pub help: &'static str,
}

/// A bad value: names the key, the value given and what is allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamError {
    pub key: String,
    pub value: String,
    pub allowed: String,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} = {}: expected {}",
            self.key, self.value, self.allowed
        )
    }
}

impl std::error::Error for ParamError {}

#[derive(Clone, Debug, Default)]
pub struct Params(pub BTreeMap<String, ParamValue>);

impl Params {
    pub fn new() -> Params {
        Params::default()
    }

    pub fn with(mut self, key: &str, value: ParamValue) -> Params {
        self.0.insert(key.to_string(), value);
        self
    }

    fn bad(key: &str, value: &ParamValue, kind: ParamKind) -> ParamError {
        ParamError {
            key: key.into(),
            value: render(value),
            allowed: kind.describe().into(),
        }
    }

    /// Refuses keys the policy does not have, and values of the wrong kind.
    pub fn check_allowed(&self, info: &PolicyInfo) -> Result<(), ParamError> {
        for (key, value) in &self.0 {
            let Some(p) = info.params.iter().find(|p| p.name == key) else {
                let names: Vec<_> = info.params.iter().map(|p| p.name).collect();
                let allowed = if names.is_empty() {
                    format!("no parameters for policy {}", info.name)
                } else {
                    format!("a parameter of policy {}: {}", info.name, names.join(", "))
                };
                return Err(ParamError {
                    key: key.clone(),
                    value: render(value),
                    allowed,
                });
            };
            let ok = match (p.kind, value) {
                (ParamKind::Positive, ParamValue::Num(x)) => *x > 0.0 && x.is_finite(),
                (ParamKind::NonNegative, ParamValue::Num(x)) => *x >= 0.0 && x.is_finite(),
                (ParamKind::Count, ParamValue::Num(x)) => *x >= 1.0 && x.fract() == 0.0,
                (ParamKind::Bool, ParamValue::Bool(_)) => true,
                (ParamKind::List, ParamValue::List(v)) => {
                    !v.is_empty() && v.iter().all(|x| *x > 0.0 && x.is_finite())
                }
                (ParamKind::List, ParamValue::Num(x)) => *x > 0.0,
                _ => false,
            };
            if !ok {
                return Err(Params::bad(key, value, p.kind));
            }
        }
        Ok(())
    }

    pub fn num(&self, key: &str) -> Option<f64> {
        match self.0.get(key) {
            Some(ParamValue::Num(x)) => Some(*x),
            _ => None,
        }
    }

    pub fn num_or(&self, key: &str, default: f64) -> f64 {
        self.num(key).unwrap_or(default)
    }

    pub fn flag_or(&self, key: &str, default: bool) -> bool {
        match self.0.get(key) {
            Some(ParamValue::Bool(b)) => *b,
            _ => default,
        }
    }

    pub fn list(&self, key: &str) -> Option<Vec<f64>> {
        match self.0.get(key) {
            Some(ParamValue::List(v)) => Some(v.clone()),
            Some(ParamValue::Num(x)) => Some(vec![*x]),
            _ => None,
        }
    }

    /// A parameter the policy cannot run without.
    pub fn required(&self, key: &str, policy: &str) -> Result<f64, ParamError> {
        self.num(key).ok_or_else(|| ParamError {
            key: key.into(),
            value: "(missing)".into(),
            allowed: format!("a number > 0: policy {policy} needs it"),
        })
    }
}

fn render(v: &ParamValue) -> String {
    match v {
        ParamValue::Num(x) => format!("{x}"),
        ParamValue::Bool(b) => format!("{b}"),
        ParamValue::List(v) => v
            .iter()
            .map(|x| format!("{x}"))
            .collect::<Vec<_>>()
            .join(","),
    }
}
