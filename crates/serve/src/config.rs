//! The server's spec: what `schedlab serve` flags and `_core.serve(dict)` become. `ServeSpec`
//! is the raw input (every key documented in `KEYS`); `validate` turns it into a `ServeConfig`
//! or one error naming the key, the value and what is allowed.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cost::{Cost, CostMode};
use schedlab_model::weights::nice_to_weight;
use schedlab_model::SpecError;
use schedlab_policy::Params;

/// Why the server refuses a fluid policy (PS, GPS, FB without a quantum).
pub const FLUID_REFUSED: &str = "the server serves one request per worker at a time, in turns \
of whole packets (fluid sharing has no packet boundaries; rr with quantum = 1 is processor \
sharing at packet granularity)";

fn err(key: &str, value: impl ToString, allowed: &str) -> SpecError {
    SpecError {
        key: key.into(),
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

/// A request class: matched by the `X-Schedlab-Class` header naming it, else by path prefix.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    pub name: Option<String>,
    pub prefix: Option<String>,
    pub priority: Option<f64>,
    pub tickets: Option<f64>,
    pub weight: Option<f64>,
    pub nice: Option<f64>,
    pub deadline: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServeSpec {
    pub root: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    /// The worker threads: the experiment key `cpus` (`workers` is its former name here).
    #[serde(alias = "workers")]
    pub cpus: Option<u32>,
    pub buffer: Option<u32>,
    pub policy: Option<String>,
    pub params: Option<Params>,
    pub seed: Option<u64>,
    pub packet: Option<u64>,
    pub packet_unit: Option<String>,
    pub cost: Option<String>,
    pub cost_mode: Option<String>,
    pub classes: Option<Vec<ClassSpec>>,
    pub max_connections: Option<u32>,
    pub header_timeout: Option<f64>,
    pub idle_timeout: Option<f64>,
    pub send_timeout: Option<f64>,
    pub drain_timeout: Option<f64>,
    pub max_header: Option<u32>,
    /// The experiment key `server_log` (`log` is its former name here).
    #[serde(alias = "log")]
    pub server_log: Option<String>,
    pub stats: Option<String>,
    #[serde(default, with = "schedlab_model::truth")]
    pub announce: Option<bool>,
}

/// Every key of the server spec, with its help text (also the `schedlab serve` flags).
pub const KEYS: &[(&str, &str)] = &[
    ("root", "directory of files to serve (required)"),
    ("host", "address to listen on; default 127.0.0.1"),
    ("port", "TCP port; 0 picks a free one; default 8080"),
    (
        "cpus",
        "worker threads serving requests (the server's CPUs); default 2",
    ),
    (
        "buffer",
        "bounded buffer: requests waiting for a worker, at most; default 128",
    ),
    (
        "policy",
        "policy ordering the buffer (see `schedlab policies`); default fcfs",
    ),
    (
        "params",
        "policy parameters; quantum counts packets per turn",
    ),
    ("seed", "seed of randomised policies (lottery); default 1"),
    (
        "packet",
        "packet size: bytes (default 65536) or lines (default 10), see packet_unit",
    ),
    ("packet_unit", "bytes or lines; default bytes"),
    (
        "cost",
        "emulated cost per request, e.g. 0.05ms+10us/KiB; default none",
    ),
    ("cost_mode", "sleep or spin; default sleep"),
    (
        "classes",
        "request classes: name, prefix, priority, tickets, weight, nice, deadline",
    ),
    (
        "max_connections",
        "open connections at most; more are answered 503; default 10000",
    ),
    (
        "header_timeout",
        "ms to receive a whole request head once begun (slowloris); default 10000",
    ),
    (
        "idle_timeout",
        "ms a kept-alive connection may stay idle; default 30000",
    ),
    (
        "send_timeout",
        "ms a worker waits for a client to accept more bytes; default 30000",
    ),
    (
        "drain_timeout",
        "ms allowed to finish requests in flight at SIGINT/SIGTERM; default 30000",
    ),
    (
        "max_header",
        "bytes of request head at most (431 beyond); default 8192",
    ),
    (
        "server_log",
        "CSV file: one row per request (ids, worker, times, turns)",
    ),
    (
        "stats",
        "JSON file written at exit: counts and busy time per worker",
    ),
    (
        "announce",
        "print 'listening on http://HOST:PORT' when ready; default true",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketUnit {
    Bytes,
    Lines,
}

#[derive(Clone, Debug)]
pub struct Class {
    pub name: String,
    pub prefix: Option<String>,
    pub priority: f64,
    pub tickets: f64,
    pub weight: f64,
    pub deadline: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub root: PathBuf,
    pub host: String,
    pub port: u16,
    pub workers: usize,
    pub buffer: usize,
    pub policy: String,
    pub params: Params,
    pub seed: u64,
    pub packet: u64,
    pub packet_unit: PacketUnit,
    pub cost: Cost,
    pub cost_mode: CostMode,
    pub classes: Vec<Class>,
    pub max_connections: usize,
    pub header_timeout_ms: f64,
    pub idle_timeout_ms: f64,
    pub send_timeout_ms: f64,
    pub drain_timeout_ms: f64,
    pub max_header: usize,
    pub log: Option<PathBuf>,
    pub stats: Option<PathBuf>,
    pub announce: bool,
}

fn positive_ms(key: &str, v: Option<f64>, default: f64) -> Result<f64, SpecError> {
    match v {
        None => Ok(default),
        Some(x) if x > 0.0 && x.is_finite() => Ok(x),
        Some(x) => Err(err(key, x, "a number of milliseconds > 0")),
    }
}

impl ServeSpec {
    pub fn validate(&self) -> Result<ServeConfig, SpecError> {
        let root = self
            .root
            .clone()
            .ok_or_else(|| err("root", "(missing)", "a directory to serve"))?;
        let root = PathBuf::from(root);
        if !root.is_dir() {
            return Err(err("root", root.display(), "an existing directory"));
        }
        let policy = self.policy.clone().unwrap_or_else(|| "fcfs".into());
        let params = self.params.clone().unwrap_or_default();
        let seed = self.seed.unwrap_or(1);
        // Build once to check the name and the parameters, and refuse fluid policies.
        schedlab_policy::build_discrete(&policy, &params, seed, FLUID_REFUSED)?;
        let workers = self.cpus.unwrap_or(2);
        if !(1..=1024).contains(&workers) {
            return Err(err("cpus", workers, "a whole number from 1 to 1024"));
        }
        let buffer = self.buffer.unwrap_or(128);
        if buffer == 0 {
            return Err(err("buffer", buffer, "a whole number >= 1"));
        }
        let packet_unit = match self.packet_unit.as_deref().unwrap_or("bytes") {
            "bytes" | "b" => PacketUnit::Bytes,
            "lines" => PacketUnit::Lines,
            other => return Err(err("packet_unit", other, "bytes or lines")),
        };
        let packet = self.packet.unwrap_or(match packet_unit {
            PacketUnit::Bytes => 65536,
            PacketUnit::Lines => 10,
        });
        if packet == 0 {
            return Err(err("packet", packet, "a whole number >= 1"));
        }
        let cost = Cost::parse(self.cost.as_deref().unwrap_or("none"))?;
        let cost_mode = CostMode::parse(self.cost_mode.as_deref().unwrap_or("sleep"))?;
        let mut classes = Vec::new();
        for (i, c) in self.classes.iter().flatten().enumerate() {
            let key = |k: &str| format!("classes[{i}].{k}");
            let weight = match (c.weight, c.nice) {
                (Some(_), Some(_)) => {
                    return Err(err(&key("nice"), c.nice.unwrap(), "either weight or nice"))
                }
                (Some(w), None) if !(w > 0.0 && w.is_finite()) => {
                    return Err(err(&key("weight"), w, "a number > 0"))
                }
                (Some(w), None) => w,
                (None, Some(n)) if !(-20.0..=19.0).contains(&n) || n.fract() != 0.0 => {
                    return Err(err(&key("nice"), n, "a whole number from -20 to 19"))
                }
                (None, Some(n)) => nice_to_weight(n),
                (None, None) => 1.0,
            };
            let tickets = c.tickets.unwrap_or(1.0);
            if !(tickets > 0.0 && tickets.is_finite()) {
                return Err(err(&key("tickets"), tickets, "a number > 0"));
            }
            if let Some(p) = &c.prefix {
                if !p.starts_with('/') {
                    return Err(err(&key("prefix"), p, "a path prefix starting with /"));
                }
            }
            classes.push(Class {
                name: c.name.clone().unwrap_or_else(|| i.to_string()),
                prefix: c.prefix.clone(),
                priority: c.priority.unwrap_or(0.0),
                tickets,
                weight,
                deadline: c.deadline,
            });
        }
        let max_connections = self.max_connections.unwrap_or(10_000) as usize;
        if max_connections == 0 {
            return Err(err("max_connections", 0, "a whole number >= 1"));
        }
        let max_header = self.max_header.unwrap_or(8192) as usize;
        if !(256..=1 << 20).contains(&max_header) {
            return Err(err("max_header", max_header, "bytes from 256 to 1048576"));
        }
        Ok(ServeConfig {
            root,
            host: self.host.clone().unwrap_or_else(|| "127.0.0.1".into()),
            port: self.port.unwrap_or(8080),
            workers: workers as usize,
            buffer: buffer as usize,
            policy,
            params,
            seed,
            packet,
            packet_unit,
            cost,
            cost_mode,
            classes,
            max_connections,
            header_timeout_ms: positive_ms("header_timeout", self.header_timeout, 10_000.0)?,
            idle_timeout_ms: positive_ms("idle_timeout", self.idle_timeout, 30_000.0)?,
            send_timeout_ms: positive_ms("send_timeout", self.send_timeout, 30_000.0)?,
            drain_timeout_ms: positive_ms("drain_timeout", self.drain_timeout, 30_000.0)?,
            max_header,
            log: self.server_log.clone().map(PathBuf::from),
            stats: self.stats.clone().map(PathBuf::from),
            announce: self.announce.unwrap_or(true),
        })
    }
}

impl ServeConfig {
    /// A request's class: the one its `X-Schedlab-Class` header names, else the first whose
    /// prefix matches the path, else the first class without a prefix, else class 0.
    pub fn classify(&self, header: Option<&str>, path: &[u8]) -> u32 {
        if self.classes.is_empty() {
            return 0;
        }
        if let Some(h) = header {
            if let Some(i) = self.classes.iter().position(|c| c.name == h) {
                return i as u32;
            }
        }
        let by_prefix = self.classes.iter().position(|c| {
            c.prefix.as_ref().is_some_and(|p| {
                let p = p.trim_start_matches('/').as_bytes();
                path.starts_with(p)
            })
        });
        by_prefix
            .or_else(|| self.classes.iter().position(|c| c.prefix.is_none()))
            .unwrap_or(0) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(root: &str) -> ServeSpec {
        ServeSpec {
            root: Some(root.into()),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_and_errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let c = spec(root).validate().unwrap();
        assert_eq!((c.workers, c.buffer, c.packet), (2, 128, 65536));
        let mut s = spec(root);
        s.policy = Some("ps".into());
        assert_eq!(s.validate().unwrap_err().key, "policy");
        let mut s = spec(root);
        s.policy = Some("nope".into());
        assert_eq!(s.validate().unwrap_err().key, "policy");
        let mut s = spec(root);
        s.packet_unit = Some("words".into());
        assert_eq!(s.validate().unwrap_err().key, "packet_unit");
        let mut s = spec(root);
        s.cost = Some("3 apples".into());
        assert_eq!(s.validate().unwrap_err().key, "cost");
        let mut s = spec(root);
        s.policy = Some("rr".into());
        s.params = Some(Params::new().with("quantum", schedlab_policy::ParamValue::Num(-1.0)));
        assert_eq!(s.validate().unwrap_err().key, "quantum");
        assert_eq!(spec("/no/such/dir").validate().unwrap_err().key, "root");
        let mut s = spec(root);
        s.cpus = Some(0);
        let e = s.validate().unwrap_err();
        assert_eq!((e.key.as_str(), e.value.as_str()), ("cpus", "0"));
    }

    #[test]
    fn former_names_of_cpus_and_server_log_are_read() {
        // `workers` and `log` were these keys' names before they took the experiment keys'.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        for (text, workers, log) in [
            (
                format!(r#"{{"root": "{root}", "workers": 3, "log": "a.csv"}}"#),
                3,
                "a.csv",
            ),
            (
                format!(r#"{{"root": "{root}", "cpus": 4, "server_log": "b.csv"}}"#),
                4,
                "b.csv",
            ),
        ] {
            let c = serde_json::from_str::<ServeSpec>(&text)
                .unwrap()
                .validate()
                .unwrap();
            assert_eq!(c.workers, workers);
            assert_eq!(c.log.unwrap(), PathBuf::from(log));
        }
    }

    #[test]
    fn classifies_by_header_then_prefix_then_default() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spec(dir.path().to_str().unwrap());
        s.classes = Some(vec![
            ClassSpec {
                name: Some("vip".into()),
                prefix: Some("/vip/".into()),
                ..Default::default()
            },
            ClassSpec {
                name: Some("rest".into()),
                ..Default::default()
            },
        ]);
        let c = s.validate().unwrap();
        assert_eq!(c.classify(None, b"vip/a"), 0);
        assert_eq!(c.classify(None, b"other"), 1);
        assert_eq!(c.classify(Some("vip"), b"other"), 0);
        assert_eq!(c.classify(Some("nobody"), b"other"), 1);
    }
}
