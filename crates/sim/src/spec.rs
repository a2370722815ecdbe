//! The run specification: what the CLI flags, TOML files and Python keyword arguments all
//! become. `SimSpec` is the raw input (every key documented in KEYS); `validate` turns it into
//! a `Config` or one error naming the key, the value and what is allowed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dist::Dist;
use crate::trace::{self, TraceRow};
use crate::SpecError;
use schedlab_policy::{nice_to_weight, ParamValue, Params};

/// Policy parameter values as they arrive from Python or TOML.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum RawParam {
    Bool(bool),
    Num(f64),
    List(Vec<f64>),
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    pub name: Option<String>,
    pub fraction: Option<f64>,
    pub size: Option<String>,
    pub priority: Option<f64>,
    pub tickets: Option<f64>,
    pub weight: Option<f64>,
    pub nice: Option<f64>,
    pub deadline: Option<f64>,
    pub clients: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SimSpec {
    pub policy: Option<String>,
    pub params: Option<BTreeMap<String, RawParam>>,
    pub arrival: Option<String>,
    pub load: Option<f64>,
    pub size: Option<String>,
    pub jobs: Option<u64>,
    pub time: Option<f64>,
    pub warmup: Option<u64>,
    pub warmup_time: Option<f64>,
    pub cpus: Option<u32>,
    pub context_switch: Option<f64>,
    pub seed: Option<u64>,
    pub clients: Option<u32>,
    pub think: Option<String>,
    pub trace: Option<String>,
    pub classes: Option<Vec<ClassSpec>>,
    pub keep_jobs: Option<bool>,
    pub keep_schedule: Option<bool>,
    pub allow_unstable: Option<bool>,
    pub batches: Option<u32>,
}

/// A spec key: its name (the same in the CLI, TOML files and Python), the section of an
/// experiment file it belongs to, and its help text.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub name: &'static str,
    pub section: &'static str,
    pub help: &'static str,
}

const fn key(name: &'static str, section: &'static str, help: &'static str) -> Key {
    Key {
        name,
        section,
        help,
    }
}

/// Every spec key, in the order of the docs. A test checks it against the struct, so the docs
/// and the validator cannot drift apart.
pub const KEYS: &[Key] = &[
    key("policy", "policy", "scheduling policy (see `schedlab policies`); default fcfs"),
    key("params", "policy", "policy parameters, e.g. {quantum = 10}"),
    key("arrival", "workload", "inter-arrival time distribution of the open workload"),
    key("load", "workload", "utilisation; Poisson arrivals at that load replace `arrival`"),
    key("size", "workload", "job size (service demand) distribution; default exp:1"),
    key("jobs", "workload", "measured jobs: arrivals stop after warmup + jobs, then the system drains"),
    key("time", "workload", "stop at this simulated time"),
    key("clients", "workload", "closed workload: number of clients, each thinks then submits one job"),
    key("think", "workload", "closed workload: think-time distribution; default det:0"),
    key("trace", "workload", "CSV file with columns arrival,size[,class,priority,tickets,weight,deadline,task]"),
    key("classes", "workload", "job classes: name, fraction, size, priority, tickets, weight, nice, deadline, clients"),
    key("allow_unstable", "workload", "run an open system at load >= 1"),
    key("cpus", "machine", "CPUs sharing one global queue; default 1"),
    key("context_switch", "machine", "time a CPU spends switching to a different job; default 0"),
    key("seed", "experiment", "random seed; same seed, same run; default 1"),
    key("warmup", "experiment", "jobs discarded at the start (by arrival order)"),
    key("warmup_time", "experiment", "jobs arriving before this time are discarded"),
    key("batches", "experiment", "split the measured jobs into this many batches and report each batch's mean response (batch means)"),
    key("keep_jobs", "output", "return the per-job table"),
    key("keep_schedule", "output", "return every run segment (cpu, job, start, end)"),
];

pub const CLASS_KEYS: &[(&str, &str)] = &[
    ("name", "label of the class; default its index"),
    (
        "fraction",
        "share of arrivals (open workloads); default equal shares",
    ),
    (
        "size",
        "size distribution of this class; default the global size",
    ),
    ("priority", "priority (lower runs first); default 0"),
    ("tickets", "lottery or stride tickets; default 1"),
    ("weight", "share weight (gps, cfs); default 1, or from nice"),
    (
        "nice",
        "nice value -20..19, mapped to a weight by the kernel's table",
    ),
    ("deadline", "relative deadline (edf); default none"),
    ("clients", "closed workload: clients of this class"),
];

pub struct Class {
    pub name: String,
    /// Cumulative probability up to and including this class.
    pub cumulative: f64,
    pub size: Dist,
    pub priority: f64,
    pub tickets: f64,
    pub weight: f64,
    pub deadline: Option<f64>,
}

pub enum Workload {
    Open {
        arrival: Dist,
    },
    /// One entry per client: its class.
    Closed {
        clients: Vec<u32>,
        think: Dist,
    },
    Trace {
        rows: Vec<TraceRow>,
    },
}

pub struct Config {
    pub policy: String,
    pub params: Params,
    pub workload: Workload,
    pub classes: Vec<Class>,
    pub jobs: Option<u64>,
    pub time: Option<f64>,
    pub warmup: u64,
    pub warmup_time: f64,
    pub cpus: usize,
    pub context_switch: f64,
    pub seed: u64,
    pub keep_jobs: bool,
    pub keep_schedule: bool,
    /// Batch means: measured jobs per batch (0: none).
    pub batch_size: u64,
    /// Offered load per CPU, where it is known in advance.
    pub offered_load: Option<f64>,
}

fn err(key: &str, value: impl ToString, allowed: &str) -> SpecError {
    SpecError {
        key: key.into(),
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

fn positive(key: &str, v: Option<f64>) -> Result<Option<f64>, SpecError> {
    match v {
        Some(x) if !(x > 0.0 && x.is_finite()) => Err(err(key, x, "a number > 0")),
        _ => Ok(v),
    }
}

impl SimSpec {
    pub fn validate(&self) -> Result<Config, SpecError> {
        let policy = self.policy.clone().unwrap_or_else(|| "fcfs".into());
        let info = schedlab_policy::lookup(&policy).ok_or_else(|| {
            err(
                "policy",
                &policy,
                &format!("one of {}", schedlab_policy::known_names()),
            )
        })?;
        let mut params = Params::new();
        for (k, v) in self.params.iter().flatten() {
            let value = match v {
                RawParam::Bool(b) => ParamValue::Bool(*b),
                RawParam::Num(x) => ParamValue::Num(*x),
                RawParam::List(l) => ParamValue::List(l.clone()),
            };
            params.0.insert(k.clone(), value);
        }
        params.check_allowed(info)?;
        // Build once here so parameter errors surface before any work.
        (info.build)(&params, 0)?;

        let cpus = self.cpus.unwrap_or(1);
        if cpus == 0 {
            return Err(err("cpus", 0, "a whole number >= 1"));
        }
        let context_switch = self.context_switch.unwrap_or(0.0);
        if !(context_switch >= 0.0 && context_switch.is_finite()) {
            return Err(err("context_switch", context_switch, "a number >= 0"));
        }
        let time = positive("time", self.time)?;
        let warmup_time = self.warmup_time.unwrap_or(0.0);
        if warmup_time.is_nan() || warmup_time < 0.0 {
            return Err(err("warmup_time", warmup_time, "a number >= 0"));
        }
        if self.jobs == Some(0) {
            return Err(err("jobs", 0, "a whole number >= 1"));
        }

        let size_text = self.size.clone().unwrap_or_else(|| "exp:1".into());
        let global_size = Dist::parse("size", &size_text)?;
        let classes = self.classes(&global_size)?;

        let closed = self.clients.is_some() || classes_have_clients(&self.classes);
        let workload = if let Some(path) = &self.trace {
            for key in ["arrival", "load", "clients"] {
                if self.given(key) {
                    return Err(err(
                        key,
                        "(given)",
                        "nothing: trace replaces arrival, load and clients",
                    ));
                }
            }
            let names: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
            Workload::Trace {
                rows: trace::read(path, &names)?,
            }
        } else if closed {
            if self.arrival.is_some() || self.load.is_some() {
                let key = if self.arrival.is_some() {
                    "arrival"
                } else {
                    "load"
                };
                return Err(err(
                    key,
                    "(given)",
                    "nothing: a closed workload (clients) has no arrival rate",
                ));
            }
            let think = Dist::parse("think", self.think.as_deref().unwrap_or("det:0"))?;
            Workload::Closed {
                clients: self.client_classes(&classes)?,
                think,
            }
        } else {
            if self.think.is_some() {
                return Err(err(
                    "think",
                    self.think.as_deref().unwrap_or(""),
                    "clients as well (think time is for closed workloads)",
                ));
            }
            let mean_size = mean_size(&classes);
            let arrival = match (&self.arrival, self.load) {
                (Some(_), Some(_)) => {
                    return Err(err(
                        "load",
                        self.load.unwrap_or(0.0),
                        "either load or arrival, not both",
                    ))
                }
                (Some(a), None) => Dist::parse("arrival", a)?,
                (None, Some(load)) => {
                    if !(load > 0.0 && load.is_finite()) {
                        return Err(err("load", load, "a number > 0"));
                    }
                    Dist::Exp(mean_size / (load * cpus as f64))
                }
                (None, None) => {
                    return Err(err(
                        "arrival",
                        "(missing)",
                        "an inter-arrival distribution, or load, or clients, or trace",
                    ))
                }
            };
            Workload::Open { arrival }
        };
        let offered_load = match &workload {
            Workload::Open { arrival } => {
                Some(mean_size(&classes) / (arrival.mean() * cpus as f64))
            }
            _ => None,
        };
        if let Some(rho) = offered_load {
            if rho >= 1.0 && !self.allow_unstable.unwrap_or(false) {
                let key = if self.load.is_some() {
                    "load"
                } else {
                    "arrival"
                };
                return Err(err(
                    key,
                    format!(
                        "{} (load {rho:.4})",
                        self.load.map_or_else(
                            || self.arrival.clone().unwrap_or_default(),
                            |l| l.to_string()
                        )
                    ),
                    "a load < 1 for an open system; set allow_unstable to run it anyway",
                ));
            }
        }
        if self.jobs.is_none() && time.is_none() && !matches!(workload, Workload::Trace { .. }) {
            return Err(err(
                "jobs",
                "(missing)",
                "a number of jobs, or time, to stop the run",
            ));
        }
        if offered_load.is_some_and(|r| r >= 1.0) && time.is_none() && self.jobs.is_none() {
            return Err(err(
                "time",
                "(missing)",
                "a stop time for an unstable system",
            ));
        }

        let batch_size = match (self.batches, self.jobs) {
            (None, _) => 0,
            (Some(0), _) => return Err(err("batches", 0, "a whole number >= 1")),
            (Some(b), Some(j)) if u64::from(b) <= j => j.div_ceil(u64::from(b)),
            (Some(b), Some(j)) => {
                return Err(err("batches", b, &format!("at most jobs ({j}) batches")))
            }
            (Some(b), None) => {
                return Err(err(
                    "batches",
                    b,
                    "jobs as well: batches split the measured jobs",
                ))
            }
        };
        Ok(Config {
            policy: info.name.to_string(),
            params,
            workload,
            classes,
            jobs: self.jobs,
            time,
            warmup: self.warmup.unwrap_or(0),
            warmup_time,
            cpus: cpus as usize,
            context_switch,
            seed: self.seed.unwrap_or(1),
            keep_jobs: self.keep_jobs.unwrap_or(false),
            keep_schedule: self.keep_schedule.unwrap_or(false),
            batch_size,
            offered_load,
        })
    }

    fn given(&self, key: &str) -> bool {
        match key {
            "arrival" => self.arrival.is_some(),
            "load" => self.load.is_some(),
            "clients" => self.clients.is_some(),
            _ => false,
        }
    }

    fn classes(&self, global_size: &Dist) -> Result<Vec<Class>, SpecError> {
        let specs = match &self.classes {
            Some(c) if !c.is_empty() => c.clone(),
            _ => vec![ClassSpec::default()],
        };
        let total: f64 = specs.iter().map(|c| c.fraction.unwrap_or(1.0)).sum();
        let mut cumulative = 0.0;
        let mut out = Vec::new();
        for (i, c) in specs.iter().enumerate() {
            let key = |k: &str| format!("classes[{i}].{k}");
            let fraction = c.fraction.unwrap_or(1.0);
            if !(fraction >= 0.0 && fraction.is_finite()) {
                return Err(err(&key("fraction"), fraction, "a number >= 0"));
            }
            cumulative += fraction / total;
            let size = match &c.size {
                Some(s) => Dist::parse(&key("size"), s)?,
                None => global_size.clone(),
            };
            let tickets = c.tickets.unwrap_or(1.0);
            if !(tickets > 0.0 && tickets.is_finite()) {
                return Err(err(&key("tickets"), tickets, "a number > 0"));
            }
            let weight = match (c.weight, c.nice) {
                (Some(_), Some(_)) => {
                    return Err(err(
                        &key("nice"),
                        c.nice.unwrap_or(0.0),
                        "either weight or nice, not both",
                    ))
                }
                (Some(w), None) if !(w > 0.0 && w.is_finite()) => {
                    return Err(err(&key("weight"), w, "a number > 0"))
                }
                (Some(w), None) => w,
                (None, Some(n)) if !(-20.0..=19.0).contains(&n) => {
                    return Err(err(&key("nice"), n, "a number from -20 to 19"))
                }
                (None, Some(n)) => nice_to_weight(n),
                (None, None) => 1.0,
            };
            if let Some(d) = c.deadline {
                if d.is_nan() || d <= 0.0 {
                    return Err(err(&key("deadline"), d, "a number > 0"));
                }
            }
            out.push(Class {
                name: c.name.clone().unwrap_or_else(|| i.to_string()),
                cumulative,
                size,
                priority: c.priority.unwrap_or(0.0),
                tickets,
                weight,
                deadline: c.deadline,
            });
        }
        if let Some(last) = out.last_mut() {
            last.cumulative = 1.0;
        }
        Ok(out)
    }

    fn client_classes(&self, classes: &[Class]) -> Result<Vec<u32>, SpecError> {
        if classes_have_clients(&self.classes) {
            if self.clients.is_some() {
                return Err(err(
                    "clients",
                    self.clients.unwrap_or(0),
                    "either clients or classes[].clients, not both",
                ));
            }
            let mut v = Vec::new();
            for (i, c) in self.classes.iter().flatten().enumerate() {
                v.extend(std::iter::repeat_n(
                    i as u32,
                    c.clients.unwrap_or(0) as usize,
                ));
            }
            if v.is_empty() {
                return Err(err("classes[].clients", 0, "at least one client"));
            }
            return Ok(v);
        }
        let n = self.clients.unwrap_or(0);
        if n == 0 {
            return Err(err("clients", 0, "a whole number >= 1"));
        }
        // Clients take classes in turn, weighted by fraction.
        let mut v = Vec::with_capacity(n as usize);
        let mut prev = 0.0;
        let mut bounds = Vec::new();
        for c in classes {
            bounds.push((prev, c.cumulative));
            prev = c.cumulative;
        }
        for i in 0..n {
            let u = (i as f64 + 0.5) / n as f64;
            let class = bounds
                .iter()
                .position(|(_, hi)| u < *hi)
                .unwrap_or(classes.len() - 1);
            v.push(class as u32);
        }
        Ok(v)
    }
}

fn classes_have_clients(classes: &Option<Vec<ClassSpec>>) -> bool {
    classes.iter().flatten().any(|c| c.clients.is_some())
}

fn mean_size(classes: &[Class]) -> f64 {
    let mut prev = 0.0;
    let mut m = 0.0;
    for c in classes {
        m += (c.cumulative - prev) * c.size.mean();
        prev = c.cumulative;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_list_matches_the_struct() {
        fn keys<T: Serialize>(v: &T) -> Vec<String> {
            match serde_json::to_value(v).unwrap() {
                serde_json::Value::Object(m) => m.keys().cloned().collect(),
                _ => unreachable!(),
            }
        }
        fn documented(list: &[(&str, &str)]) -> Vec<String> {
            let mut v: Vec<String> = list.iter().map(|(k, _)| k.to_string()).collect();
            v.sort();
            v
        }
        let names: Vec<(&str, &str)> = KEYS.iter().map(|k| (k.name, k.help)).collect();
        assert_eq!(keys(&SimSpec::default()), documented(&names));
        assert_eq!(keys(&ClassSpec::default()), documented(CLASS_KEYS));
    }

    #[test]
    fn unstable_open_system_is_refused_with_the_load() {
        let spec = SimSpec {
            load: Some(1.0),
            jobs: Some(10),
            ..Default::default()
        };
        let e = spec.validate().err().unwrap();
        assert_eq!(e.key, "load");
        assert!(e.allowed.contains("allow_unstable"));
        let spec = SimSpec {
            arrival: Some("exp:0.5".into()),
            jobs: Some(10),
            ..Default::default()
        };
        let e = spec.validate().err().unwrap();
        assert_eq!(e.key, "arrival");
        assert!(e.value.contains("load 2.0000"), "{}", e.value);
    }

    #[test]
    fn load_sets_poisson_arrivals_per_cpu() {
        let spec = SimSpec {
            load: Some(0.8),
            size: Some("det:2".into()),
            cpus: Some(4),
            jobs: Some(1),
            ..Default::default()
        };
        let c = spec.validate().ok().unwrap();
        match c.workload {
            Workload::Open {
                arrival: Dist::Exp(m),
            } => assert!((m - 0.625).abs() < 1e-12),
            _ => panic!("open Poisson expected"),
        }
        assert!((c.offered_load.unwrap() - 0.8).abs() < 1e-12);
    }
}
