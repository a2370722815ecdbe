//! The load generator: closed loop (N clients with think time), open loop (one global rate,
//! Poisson, constant or any inter-arrival distribution) and scripted bursts, over a catalogue
//! of targets picked by weight or by a Zipf law. Latencies from the intended send time go into
//! an HdrHistogram; the output is a per-request table, a summary and an HdrHistogram interval
//! log.

pub mod engine;
pub mod workload;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::clock::{ms_since, now_ns};
use engine::{Arrivals, Engine, Plan, ThreadPlan};
use schedlab_model::dist::Dist;
use schedlab_model::output::{precise_prefix, quantiles_with_intervals, PrecisionWatch};
use schedlab_model::summary::{summarize, Counters, JobTable};
use schedlab_model::SpecError;
pub use workload::{BurstGroup, ClassSpec, TargetSpec, Workload};

pub const ERR_CONNECT: u8 = 1;
pub const ERR_CLOSED: u8 = 2;
pub const ERR_TIMEOUT: u8 = 3;
pub const ERR_PROTOCOL: u8 = 4;
/// Names of the error codes of the `error` column (0 is success).
/// Closed-loop clients and open-loop connections at most: each is a socket, and a loopback
/// address has some 28,000 ephemeral ports (more would fail to connect, not measure).
pub const MAX_CLIENTS: u32 = 28_000;

pub const ERROR_NAMES: [&str; 5] = ["ok", "connect", "closed", "timeout", "protocol"];

fn err(key: &str, value: impl ToString, allowed: &str) -> SpecError {
    SpecError {
        key: key.into(),
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

/// One request as the generator saw it (times are CLOCK_MONOTONIC ns).
#[derive(Clone, Debug)]
pub struct Rec {
    pub id: u64,
    pub client: i64,
    pub class: i64,
    pub target: u32,
    pub intended: u64,
    pub sent: u64,
    pub done: u64,
    pub bytes: u64,
    pub status: u16,
    pub error: u8,
    pub warm: bool,
}

/// A burst as text (`5x/large.bin@0,10x/small.bin@50`) or as a list of groups.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(
    untagged,
    expecting = "a burst as text (COUNTx/PATH@MS, ...) or a list of groups"
)]
pub enum BurstSpec {
    Text(String),
    Groups(Vec<BurstGroup>),
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    pub url: Option<String>,
    pub clients: Option<u32>,
    pub think: Option<String>,
    pub rate: Option<f64>,
    pub arrival: Option<String>,
    pub burst: Option<BurstSpec>,
    pub targets: Option<Vec<TargetSpec>>,
    pub mix: Option<String>,
    pub zipf: Option<f64>,
    pub classes: Option<Vec<ClassSpec>>,
    pub jobs: Option<u64>,
    pub time: Option<f64>,
    pub warmup: Option<u64>,
    pub precision: Option<f64>,
    pub seed: Option<u64>,
    pub threads: Option<u32>,
    pub connections: Option<u32>,
    pub timeout: Option<f64>,
    pub miss: Option<f64>,
    #[serde(default, with = "schedlab_model::truth")]
    pub keep_alive: Option<bool>,
    #[serde(default, with = "schedlab_model::truth")]
    pub keep_requests: Option<bool>,
    pub hdr_log: Option<String>,
    #[serde(default, with = "schedlab_model::truth")]
    pub progress: Option<bool>,
}

/// Every key of the load spec, with its help text.
pub const KEYS: &[(&str, &str)] = &[
    ("url", "server to load, http://HOST:PORT[/PATH]; PATH is the target when no mix is given"),
    ("clients", "closed loop: clients, each with one request outstanding"),
    ("think", "closed loop: think-time distribution in ms between a response and the next request; default det:0"),
    ("rate", "open loop: requests per second, all threads together"),
    ("arrival", "open loop: poisson or constant with `rate`, or an inter-arrival distribution in ms (exp:MEAN, ...)"),
    ("burst", "scripted burst: groups {at (ms), count, path, class}, each request on its own connection"),
    ("targets", "catalogue: list of {path, weight, class}"),
    ("mix", "catalogue file: lines PATH [WEIGHT [CLASS]]"),
    ("zipf", "pick targets by a Zipf law of this exponent over the catalogue order (rank 1 first)"),
    ("classes", "request classes: {name, fraction, clients}; sent as X-Schedlab-Class"),
    ("jobs", "measured requests to send (after warmup)"),
    ("time", "stop sending after this many ms"),
    ("warmup", "requests sent first and left out of the results"),
    ("precision", "send until the mean response's 95% interval is this narrow (half-width over mean, e.g. 0.05), looking first after jobs requests; time caps the run"),
    ("seed", "random seed; default 1"),
    ("threads", "generator threads; default 1"),
    ("connections", "open loop: connections at most; default 1000"),
    ("timeout", "ms before a request counts as timed out; default 30000"),
    ("miss", "a send later than this many ms after its intended time counts as missed; default 1"),
    ("keep_alive", "reuse connections; default true"),
    ("keep_requests", "return the per-request table (warm-up requests flagged); default true"),
    ("hdr_log", "write an HdrHistogram interval log (1 s intervals, microseconds) here"),
    ("progress", "print a live progress line on stderr; default: when stderr is a terminal"),
];

pub enum Mode {
    Closed { clients: u32, think: Dist },
    Open { arrival: OpenArrival },
    Burst { sends: Vec<(u64, usize, i64)> },
}

pub enum OpenArrival {
    Poisson(f64),
    Constant(f64),
    Dist(Dist),
}

pub struct LoadConfig {
    pub addr: SocketAddr,
    pub host_header: String,
    pub base: String,
    pub workload: Workload,
    pub mode: Mode,
    pub jobs: Option<u64>,
    pub time_ms: Option<f64>,
    pub warmup: u64,
    /// Send until the mean response is this precise (the simulator's rule), at most `time_ms`.
    pub precision: Option<f64>,
    pub seed: u64,
    pub threads: usize,
    pub connections: usize,
    pub timeout_ms: f64,
    pub miss_ms: f64,
    pub keep_alive: bool,
    pub keep_requests: bool,
    pub hdr_log: Option<PathBuf>,
    pub progress: bool,
}

/// Splits `http://host:port/path` into (host, port, path).
pub fn parse_url(url: &str) -> Result<(String, u16, String), SpecError> {
    let bad = |why: &str| err("url", url, why);
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad("http://HOST[:PORT][/PATH] (https is not supported)"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(bad("a host after http://"));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
            let port = p
                .parse::<u16>()
                .map_err(|_| bad("a port from 1 to 65535"))?;
            (h.to_string(), port)
        }
        _ => (authority.to_string(), 80),
    };
    Ok((host, port, path.to_string()))
}

impl LoadSpec {
    pub fn validate(&self) -> Result<LoadConfig, SpecError> {
        let url = self
            .url
            .clone()
            .ok_or_else(|| err("url", "(missing)", "http://HOST:PORT[/PATH]"))?;
        let (host, port, path) = parse_url(&url)?;
        let addr = (host.trim_matches(['[', ']']), port)
            .to_socket_addrs()
            .map_err(|e| err("url", &url, &format!("a resolvable host ({e})")))?
            .next()
            .ok_or_else(|| err("url", &url, "a resolvable host"))?;
        let host_header = if port == 80 {
            host.clone()
        } else {
            format!("{host}:{port}")
        };
        let mut specs: Vec<TargetSpec> = self.targets.clone().unwrap_or_default();
        if let Some(mix) = &self.mix {
            let text = std::fs::read_to_string(mix)
                .map_err(|e| err("mix", mix, &format!("a readable file ({e})")))?;
            specs.extend(workload::parse_mix(mix, &text)?);
        }
        let base = if specs.is_empty() {
            String::new()
        } else {
            path.trim_end_matches('/').to_string()
        };
        let burst = match &self.burst {
            None => Vec::new(),
            Some(BurstSpec::Groups(g)) => g.clone(),
            Some(BurstSpec::Text(t)) => workload::parse_burst(t)?,
        };
        if specs.is_empty() && burst.is_empty() {
            specs.push(TargetSpec {
                path: path.clone(),
                weight: None,
                class: None,
            });
        }
        let classes = self.classes.clone().unwrap_or_default();
        let modes = [
            self.clients.is_some(),
            self.rate.is_some() || self.arrival.is_some(),
            !burst.is_empty(),
        ];
        if modes.iter().filter(|m| **m).count() != 1 {
            let mut given: Vec<String> = Vec::new();
            if let Some(c) = self.clients {
                given.push(format!("clients {c}"));
            }
            if let Some(r) = self.rate {
                given.push(format!("rate {r}"));
            }
            if let Some(a) = &self.arrival {
                given.push(format!("arrival {a}"));
            }
            if !burst.is_empty() {
                given.push("burst".into());
            }
            let given = if given.is_empty() {
                "(none)".to_string()
            } else {
                given.join(" and ")
            };
            return Err(err(
                "clients",
                given,
                "exactly one of clients (closed loop), rate/arrival (open loop) or burst",
            ));
        }
        let mut workload = if specs.is_empty() {
            Workload::new(
                &[TargetSpec {
                    path: "/".into(),
                    weight: None,
                    class: None,
                }],
                &classes,
                None,
            )?
        } else {
            Workload::new(&specs, &classes, self.zipf)?
        };
        let mode = if let Some(clients) = self.clients {
            if clients == 0 || clients > MAX_CLIENTS {
                return Err(err(
                    "clients",
                    clients,
                    &format!("a whole number from 1 to {MAX_CLIENTS} (a connection each)"),
                ));
            }
            let think = Dist::parse("think", self.think.as_deref().unwrap_or("det:0"))?;
            Mode::Closed { clients, think }
        } else if !burst.is_empty() {
            let mut sends = Vec::new();
            for g in &burst {
                if !(g.at >= 0.0 && g.at.is_finite()) || g.count == 0 || !g.path.starts_with('/') {
                    return Err(err(
                        "burst",
                        format!("{}x{}@{}", g.count, g.path, g.at),
                        workload::BURST_SYNTAX,
                    ));
                }
                let class = match &g.class {
                    Some(c) => workload
                        .classes
                        .iter()
                        .position(|n| n == c)
                        .ok_or_else(|| err("burst", c, "a class named in classes"))?
                        as i64,
                    None => -1,
                };
                let t = workload.target_of(&g.path, class);
                for _ in 0..g.count {
                    sends.push(((g.at * 1e6) as u64, t, class));
                }
            }
            sends.sort_by_key(|s| s.0);
            Mode::Burst { sends }
        } else {
            let arrival =
                match (self.rate, self.arrival.as_deref()) {
                    (Some(r), kind) => {
                        if !(r > 0.0 && r.is_finite()) {
                            return Err(err("rate", r, "requests per second > 0"));
                        }
                        match kind.unwrap_or("poisson") {
                            "poisson" => OpenArrival::Poisson(r),
                            "constant" => OpenArrival::Constant(r),
                            other => return Err(err(
                                "arrival",
                                other,
                                "poisson or constant with rate (or a distribution without rate)",
                            )),
                        }
                    }
                    (None, Some(text)) => OpenArrival::Dist(Dist::parse("arrival", text)?),
                    (None, None) => unreachable!("checked above"),
                };
            Mode::Open { arrival }
        };
        // Clients given to classes are among the closed loop's clients, the rest drawn by
        // the classes' fractions.
        let given: u64 = classes
            .iter()
            .map(|c| u64::from(c.clients.unwrap_or(0)))
            .sum();
        if let Some(i) = classes.iter().rposition(|c| c.clients.unwrap_or(0) > 0) {
            let key = format!("classes[{i}].clients");
            let value = classes[i].clients.unwrap_or(0);
            match &mode {
                Mode::Closed { clients, .. } if given > u64::from(*clients) => {
                    return Err(err(
                        &key,
                        value,
                        &format!("at most clients ({clients}) in all the classes together"),
                    ));
                }
                Mode::Closed { .. } => {}
                _ => {
                    return Err(err(
                        &key,
                        value,
                        "a closed loop (clients): an open loop or a burst has no clients",
                    ));
                }
            }
        }
        let threads = self.threads.unwrap_or(1) as usize;
        if threads == 0 || threads > 256 {
            return Err(err("threads", threads, "a whole number from 1 to 256"));
        }
        if matches!(mode, Mode::Burst { .. }) && threads > 1 {
            return Err(err("threads", threads, "1 for a scripted burst"));
        }
        if let Mode::Open {
            arrival: OpenArrival::Dist(d),
        } = &mode
        {
            if threads > 1 && !matches!(d, Dist::Exp(_) | Dist::Det(_)) {
                return Err(err(
                    "threads",
                    threads,
                    "1 for arrival distributions other than exp and det (streams of several \
                     threads superpose exactly only for Poisson and constant rates)",
                ));
            }
        }
        if self.jobs == Some(0) {
            return Err(err("jobs", 0, "a whole number >= 1 of measured requests"));
        }
        if self.think.is_some() && !matches!(mode, Mode::Closed { .. }) {
            return Err(err(
                "think",
                self.think.as_deref().unwrap_or(""),
                "nothing: a think time is the closed loop's (clients); an open loop sends \
                 at its rate",
            ));
        }
        if self.zipf.is_some() && self.mix.is_none() && self.targets.is_none() {
            return Err(err(
                "zipf",
                self.zipf.unwrap_or(0.0),
                "a mix too: the Zipf law weighs the catalogue's files (--mix FILE)",
            ));
        }
        if !matches!(mode, Mode::Burst { .. }) && self.jobs.is_none() && self.time.is_none() {
            return Err(err(
                "jobs",
                "(missing)",
                "jobs or time (when to stop sending)",
            ));
        }
        if let Some(t) = self.time {
            if !(t > 0.0 && t.is_finite()) {
                return Err(err("time", t, "milliseconds > 0"));
            }
        }
        if let Some(p) = self.precision {
            if !(p > 0.0 && p < 1.0) {
                return Err(err(
                    "precision",
                    p,
                    "a relative half-width > 0 and < 1, e.g. 0.05",
                ));
            }
            if self.time.is_none() || matches!(mode, Mode::Burst { .. }) {
                return Err(err(
                    "precision",
                    p,
                    "a run with a time cap (time) and a workload that goes on (clients, \
                     arrival or rate)",
                ));
            }
        }
        let timeout_ms = self.timeout.unwrap_or(30_000.0);
        if !(timeout_ms > 0.0 && timeout_ms.is_finite()) {
            return Err(err("timeout", timeout_ms, "milliseconds > 0"));
        }
        let miss_ms = self.miss.unwrap_or(1.0);
        if !(miss_ms >= 0.0 && miss_ms.is_finite()) {
            return Err(err("miss", miss_ms, "milliseconds >= 0"));
        }
        let connections = self.connections.unwrap_or(1000) as usize;
        if connections == 0 || connections > MAX_CLIENTS as usize {
            return Err(err(
                "connections",
                connections,
                &format!("a whole number from 1 to {MAX_CLIENTS}"),
            ));
        }
        let progress = self
            .progress
            .unwrap_or_else(|| std::io::IsTerminal::is_terminal(&std::io::stderr()));
        Ok(LoadConfig {
            addr,
            host_header,
            base,
            workload,
            mode,
            jobs: self.jobs,
            time_ms: self.time,
            warmup: self.warmup.unwrap_or(0),
            precision: self.precision,
            seed: self.seed.unwrap_or(1),
            threads,
            connections,
            timeout_ms,
            miss_ms,
            keep_alive: self.keep_alive.unwrap_or(true),
            keep_requests: self.keep_requests.unwrap_or(true),
            hdr_log: self.hdr_log.clone().map(PathBuf::from),
            progress,
        })
    }
}

/// Counters shared by the threads, for the progress line; and, in a run until precise, the
/// responses so far and the flag that stops every thread's sending.
pub struct Progress {
    pub sent: AtomicU64,
    pub done: AtomicU64,
    pub errors: AtomicU64,
    pub missed: AtomicU64,
    last_ns: AtomicU64,
    last_done: AtomicU64,
    pub precise: AtomicBool,
    watch: Option<Mutex<PrecisionWatch>>,
}

impl Progress {
    fn new(cfg: &LoadConfig) -> Progress {
        Progress {
            sent: AtomicU64::new(0),
            done: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            last_ns: AtomicU64::new(0),
            last_done: AtomicU64::new(0),
            precise: AtomicBool::new(false),
            watch: cfg
                .precision
                .map(|p| Mutex::new(PrecisionWatch::new(p, cfg.jobs))),
        }
    }

    /// A measured response (ms) of a run until precise; sets `precise` once the rule says so.
    pub fn measured(&self, response_ms: f64) {
        let Some(watch) = &self.watch else {
            return;
        };
        let mut w = watch.lock().unwrap_or_else(|e| e.into_inner());
        if w.add(response_ms) {
            self.precise.store(true, Relaxed);
        }
    }

    /// Prints the live line about once a second (thread 0 calls this).
    pub fn tick(&self, cfg: &LoadConfig, start: u64, now: u64) {
        if !cfg.progress {
            return;
        }
        let last = self.last_ns.load(Relaxed);
        if last == 0 {
            self.last_ns.store(now, Relaxed);
            return;
        }
        if now - last < 1_000_000_000 {
            return;
        }
        let done = self.done.load(Relaxed);
        let rate = (done - self.last_done.load(Relaxed)) as f64 / ((now - last) as f64 / 1e9);
        self.last_ns.store(now, Relaxed);
        self.last_done.store(done, Relaxed);
        let mut err = io::stderr().lock();
        let _ = write!(
            err,
            "\rschedlab load: {:6.1} s  sent {:>9}  done {:>9}  {:>9.0} req/s  errors {}  missed {}   ",
            ms_since(start, now) / 1e3,
            self.sent.load(Relaxed),
            done,
            rate,
            self.errors.load(Relaxed),
            self.missed.load(Relaxed),
        );
        let _ = err.flush();
    }
}

/// The per-request table, column by column; times in ms since the run's start.
#[derive(Default)]
pub struct Requests {
    pub id: Vec<u64>,
    pub client: Vec<i64>,
    pub class: Vec<i64>,
    pub target: Vec<u32>,
    pub arrival: Vec<f64>,
    pub sent: Vec<f64>,
    pub completion: Vec<f64>,
    pub bytes: Vec<u64>,
    pub status: Vec<u16>,
    pub error: Vec<u8>,
    /// Sent during the warm-up: in no summary, kept so the run can be replayed whole.
    pub warm: Vec<bool>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LoadSummary {
    pub mode: String,
    /// Measured requests that completed with a response.
    pub requests: u64,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    pub status: BTreeMap<String, u64>,
    pub sent: u64,
    pub missed_sends: u64,
    pub warmup: u64,
    pub bytes: u64,
    /// ms from the start to the last completion.
    pub duration: f64,
    /// ms from the start to the moment the last thread stopped sending (its time, its quota or
    /// the precision rule); the requests in flight then were still served.
    pub sending_ended: f64,
    /// Measured requests completed per second of the measured interval: from the first
    /// measured request's intended send (after the warm-up) to the last completion.
    pub throughput_rps: f64,
    /// Its 95% interval: the one summary code's throughput interval (batch means of the times
    /// between completions), scaled to requests per second.
    pub throughput_rps_ci: Vec<f64>,
    /// Requests per second asked for (open loop), else NaN.
    pub offered_rate: f64,
    /// The measured responses (ms) as every world summarizes them, by the one summary code
    /// (`schedlab_model::summary::summarize`, in completion order): the lower empirical
    /// quantiles, the sample standard deviation, and 95% intervals of one run (batch means
    /// for the mean, sectioning for every quantile, p90 and p99.9 too).
    pub response_mean: f64,
    pub response_std: f64,
    pub response_p50: f64,
    pub response_p90: f64,
    pub response_p95: f64,
    pub response_p99: f64,
    pub response_p999: f64,
    pub response_max: f64,
    pub response_mean_ci: Vec<f64>,
    pub response_p50_ci: Vec<f64>,
    pub response_p95_ci: Vec<f64>,
    pub response_p99_ci: Vec<f64>,
    pub response_p90_ci: Vec<f64>,
    pub response_p999_ci: Vec<f64>,
    /// Whether the mean's batches were shown uncorrelated (false: too few requests to tell,
    /// and the intervals are not to be trusted).
    pub ci_uncorrelated: bool,
    pub connections: u64,
    pub threads: usize,
    pub hdr_log: Option<String>,
    /// CLOCK_MONOTONIC ns of the run's time 0 (to align the server's log).
    pub start_ns: u64,
    /// A run until precise: the precision asked for, whether the measured mean reached it,
    /// and the mean's precision, in completion order (the summary's definitions); whether
    /// the rule stopped the sending (false: the time cap did). When it did, the responses are
    /// measured up to the one that met it (`precise_prefix`): the requests in flight then are
    /// served, counted in `status`, `bytes` and the HDR log, not measured.
    pub precision: Option<f64>,
    pub precision_reached: Option<bool>,
    pub response_mean_precision: Option<f64>,
    pub stopped_precise: Option<bool>,
}

pub struct LoadOutput {
    pub requests: Requests,
    pub summary: LoadSummary,
    pub targets: Vec<String>,
    pub classes: Vec<String>,
}

fn thread_plans(cfg: &LoadConfig) -> Vec<ThreadPlan> {
    let n = cfg.threads;
    (0..n)
        .map(|i| {
            let share = |total: u64| total / n as u64 + u64::from((i as u64) < total % n as u64);
            let plan = match &cfg.mode {
                Mode::Closed { clients, think } => {
                    let fixed = &cfg.workload.fixed_clients;
                    Plan::Closed {
                        clients: (0..*clients)
                            .filter(|c| *c as usize % n == i)
                            .map(|c| (c, fixed.get(c as usize).copied()))
                            .collect(),
                        think: think.clone(),
                    }
                }
                Mode::Open { arrival } => Plan::Open {
                    arrivals: match arrival {
                        OpenArrival::Poisson(r) => Arrivals::Dist(Dist::Exp(1e3 * n as f64 / r)),
                        OpenArrival::Constant(r) => Arrivals::Constant {
                            period_ns: 1e9 * n as f64 / r,
                            phase_ns: 1e9 * i as f64 / r,
                        },
                        OpenArrival::Dist(Dist::Exp(m)) => Arrivals::Dist(Dist::Exp(m * n as f64)),
                        OpenArrival::Dist(Dist::Det(v)) => Arrivals::Constant {
                            period_ns: v * 1e6 * n as f64,
                            phase_ns: v * 1e6 * i as f64,
                        },
                        OpenArrival::Dist(d) => Arrivals::Dist(d.clone()),
                    },
                },
                Mode::Burst { sends } => Plan::Script {
                    sends: sends.clone(),
                },
            };
            let preconnect = match &cfg.mode {
                Mode::Burst { sends } => sends.len(),
                _ => 16,
            };
            ThreadPlan {
                index: i,
                threads: n,
                plan,
                // Until precise, `jobs` is the first look, not a quota.
                jobs: cfg.jobs.filter(|_| cfg.precision.is_none()).map(share),
                warmup: share(cfg.warmup),
                seed: cfg.seed,
                preconnect,
                max_connections: match &cfg.mode {
                    Mode::Burst { sends } => sends.len().max(1),
                    _ => cfg.connections.div_ceil(n).max(1),
                },
            }
        })
        .collect()
}

/// Runs the load and returns what it measured.
pub fn run(cfg: &LoadConfig) -> io::Result<LoadOutput> {
    let progress = Arc::new(Progress::new(cfg));
    let plans = thread_plans(cfg);
    let n = plans.len();
    let gate = Arc::new(Barrier::new(n));
    let start = Arc::new(AtomicU64::new(0));
    let outs: Vec<engine::ThreadOut> = std::thread::scope(|s| {
        let handles: Vec<_> = plans
            .into_iter()
            .map(|plan| {
                let progress = progress.clone();
                let (gate, start) = (gate.clone(), start.clone());
                std::thread::Builder::new()
                    .name(format!("schedlab-load{}", plan.index))
                    .spawn_scoped(s, move || -> io::Result<engine::ThreadOut> {
                        crate::clock::tight_timer_slack(1_000);
                        let index = plan.index;
                        let mut e = Engine::new(cfg, plan, progress)?;
                        e.preconnect();
                        gate.wait();
                        if index == 0 {
                            start.store(now_ns() + 1_000_000, Relaxed);
                        }
                        gate.wait();
                        Ok(e.run(start.load(Relaxed)))
                    })
            })
            .collect::<io::Result<_>>()?;
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| io::Error::other("a load thread panicked"))?
            })
            .collect::<io::Result<Vec<_>>>()
    })?;
    if cfg.progress {
        eprintln!();
    }
    let start_ns = start.load(Relaxed);
    merge(cfg, outs, start_ns, progress.precise.load(Relaxed))
}

/// The measured responses' part of the summary: `measured` holds (intended send, completion)
/// in ns of every measured request that got a response, `start_ns` is the run's time 0.
fn summarize_responses(
    s: &mut LoadSummary,
    mut measured: Vec<(u64, u64)>,
    start_ns: u64,
    precision: Option<f64>,
) {
    measured.sort_by_key(|&(intended, done)| (done, intended));
    let n = measured.len();
    let arrival: Vec<f64> = measured
        .iter()
        .map(|&(i, _)| ms_since(start_ns, i))
        .collect();
    let completion: Vec<f64> = measured
        .iter()
        .map(|&(_, d)| ms_since(start_ns, d))
        .collect();
    let response = completion
        .iter()
        .zip(&arrival)
        .map(|(c, a)| c - a)
        .collect();
    // What a client cannot know (the server's side of a request) is NaN, as in the server
    // world without the server's log.
    let unknown = vec![f64::NAN; n];
    let jobs = JobTable {
        job: (0..n as u64).collect(),
        client: vec![-1; n],
        class: vec![0; n],
        cpu: vec![-1; n],
        arrival,
        first_run: unknown.clone(),
        completion,
        size: unknown.clone(),
        wait: unknown.clone(),
        response,
        slowdown: unknown.clone(),
        context_switches: unknown.clone(),
        migrations: unknown,
    };
    let first = jobs.arrival.iter().copied().fold(f64::INFINITY, f64::min);
    let counters = Counters {
        measure_start: if n > 0 { first } else { 0.0 },
        measure_end: jobs.completion.last().copied().unwrap_or(0.0),
        precision,
        ..Counters::default()
    };
    let (summary, _, _) = summarize(&jobs, &[], vec!["all".into()], &counters);
    // p90 and p99.9 as the summary makes p50-p99, responses in completion order.
    let (tail, tail_ci) = quantiles_with_intervals(&jobs.response, &[0.9, 0.999]);
    s.response_p90_ci = tail_ci[0].to_vec();
    s.response_p999_ci = tail_ci[1].to_vec();
    s.response_mean = summary.response_mean;
    s.response_std = summary.response_std;
    s.response_p50 = summary.response_p50;
    s.response_p90 = tail[0];
    s.response_p95 = summary.response_p95;
    s.response_p99 = summary.response_p99;
    s.response_p999 = tail[1];
    s.response_max = summary.response_max;
    s.response_mean_ci = summary.response_mean_ci.to_vec();
    s.response_p50_ci = summary.response_p50_ci.to_vec();
    s.response_p95_ci = summary.response_p95_ci.to_vec();
    s.response_p99_ci = summary.response_p99_ci.to_vec();
    s.ci_uncorrelated = summary.ci_uncorrelated;
    if precision.is_some() {
        s.precision = precision;
        s.precision_reached = summary.precision_reached;
        s.response_mean_precision = Some(summary.response_mean_precision);
    }
    s.throughput_rps_ci = summary
        .throughput_ci
        .iter()
        .map(|x| x / summary.throughput * s.throughput_rps)
        .collect();
}

fn merge(
    cfg: &LoadConfig,
    outs: Vec<engine::ThreadOut>,
    start_ns: u64,
    stopped_precise: bool,
) -> io::Result<LoadOutput> {
    let mut measured: Vec<(u64, u64)> = Vec::new();
    let mut intervals: Vec<Histogram<u64>> = Vec::new();
    let mut s = LoadSummary {
        mode: match &cfg.mode {
            Mode::Closed { .. } => "closed",
            Mode::Open { .. } => "open",
            Mode::Burst { .. } => "burst",
        }
        .into(),
        threads: cfg.threads,
        start_ns,
        offered_rate: match &cfg.mode {
            Mode::Open { arrival } => match arrival {
                OpenArrival::Poisson(r) | OpenArrival::Constant(r) => *r,
                OpenArrival::Dist(d) => 1e3 / d.mean(),
            },
            _ => f64::NAN,
        },
        ..Default::default()
    };
    let mut errors = [0u64; 5];
    let mut last_done = start_ns;
    let mut first_measured = u64::MAX;
    let mut stopped = start_ns;
    let mut recs: Vec<Rec> = Vec::new();
    for o in outs {
        measured.extend(o.measured);
        for (i, h) in o.intervals.iter().enumerate() {
            while intervals.len() <= i {
                intervals.push(Histogram::new(3).expect("3 significant digits"));
            }
            intervals[i]
                .add(h)
                .map_err(|e| io::Error::other(format!("{e:?}")))?;
        }
        s.missed_sends += o.missed;
        s.sent += o.sent;
        s.bytes += o.bytes;
        s.connections += o.connections;
        s.warmup += o.warm_done;
        for (k, v) in &o.status {
            *s.status.entry(k.to_string()).or_default() += v;
        }
        for (i, e) in o.errors.iter().enumerate() {
            errors[i] += e;
        }
        last_done = last_done.max(o.last_done_ns);
        first_measured = first_measured.min(o.first_measured_ns);
        stopped = stopped.max(o.stopped_ns);
        recs.extend(o.done);
    }
    for (i, e) in errors.iter().enumerate().skip(1) {
        if *e > 0 {
            s.errors_by_kind.insert(ERROR_NAMES[i].to_string(), *e);
        }
        s.errors += e;
    }
    s.duration = ms_since(start_ns, last_done);
    s.sending_ended = ms_since(start_ns, stopped);
    s.stopped_precise = cfg.precision.map(|_| stopped_precise);
    if let (Some(target), true) = (cfg.precision, stopped_precise) {
        // The rule stopped the sending while requests were in flight: measured up to the
        // response that met it, so that the interval is the one it stopped on (the
        // simulator, which can, finishes the jobs present instead: a handful).
        measured.sort_by_key(|&(intended, done)| (done, intended));
        let response: Vec<f64> = measured.iter().map(|&(i, d)| ms_since(i, d)).collect();
        if let Some(n) = precise_prefix(&response, target, cfg.jobs) {
            measured.truncate(n);
            last_done = measured.last().map_or(last_done, |&(_, done)| done);
            first_measured = measured
                .iter()
                .map(|&(i, _)| i)
                .min()
                .unwrap_or(first_measured);
        }
    }
    s.requests = measured.len() as u64;
    // The warm-up's time is not the measured requests' own: it is left out of the interval.
    let measured_ms = ms_since(first_measured.min(last_done), last_done);
    s.throughput_rps = if measured_ms > 0.0 {
        s.requests as f64 / (measured_ms / 1e3)
    } else {
        f64::NAN
    };
    summarize_responses(&mut s, measured, start_ns, cfg.precision);
    if let Some(path) = &cfg.hdr_log {
        write_hdr_log(path, &intervals, start_ns)?;
        s.hdr_log = Some(path.display().to_string());
    }
    recs.sort_by_key(|r| (r.intended, r.id));
    let mut t = Requests::default();
    for r in recs {
        t.id.push(r.id);
        t.client.push(r.client);
        t.class.push(r.class);
        t.target.push(r.target);
        t.arrival.push(ms_since(start_ns, r.intended));
        t.sent.push(ms_since(start_ns, r.sent));
        t.completion.push(ms_since(start_ns, r.done));
        t.bytes.push(r.bytes);
        t.status.push(r.status);
        t.error.push(r.error);
        t.warm.push(r.warm);
    }
    Ok(LoadOutput {
        requests: t,
        summary: s,
        targets: cfg
            .workload
            .targets
            .iter()
            .map(|t| format!("{}{}", cfg.base, t.path))
            .collect(),
        classes: cfg.workload.classes.clone(),
    })
}

/// An HdrHistogram interval log: one histogram per second of the run, values in microseconds.
fn write_hdr_log(
    path: &std::path::Path,
    intervals: &[Histogram<u64>],
    start_ns: u64,
) -> io::Result<()> {
    let wall_start = SystemTime::now() - Duration::from_nanos(now_ns().saturating_sub(start_ns));
    let mut buf = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    {
        let mut w = IntervalLogWriterBuilder::new()
            .add_comment(
                "schedlab load: response time from the intended send time, in microseconds",
            )
            .with_start_time(wall_start)
            .with_base_time(wall_start)
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut buf, &mut ser)?;
        for (i, h) in intervals.iter().enumerate() {
            if h.is_empty() {
                continue;
            }
            w.write_histogram(
                h,
                Duration::from_secs(i as u64),
                Duration::from_secs(1),
                None,
            )
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
        }
    }
    let tmp = path.with_extension("hlog.tmp");
    std::fs::write(&tmp, buf)?;
    std::fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_summarized_by_the_one_summary_code() {
        // 1000 requests sent at 0 (in ns after time 0 = 5 s), the k-th answered after k ms,
        // handed over out of completion order.
        let start = 5_000_000_000;
        let measured: Vec<(u64, u64)> = (1..=1000u64)
            .rev()
            .map(|k| (start, start + k * 1_000_000))
            .collect();
        let mut s = LoadSummary::default();
        summarize_responses(&mut s, measured, start, None);
        assert_eq!(s.response_mean, 500.5);
        assert!((s.response_std - (1000.0f64 * 1001.0 / 12.0).sqrt()).abs() < 1e-9);
        // The lower empirical quantile: the ceil(p n)-th smallest.
        let got = [
            s.response_p50,
            s.response_p90,
            s.response_p95,
            s.response_p99,
        ];
        assert_eq!(got, [500.0, 900.0, 950.0, 990.0]);
        assert_eq!((s.response_p999, s.response_max), (999.0, 1000.0));
        assert_eq!(s.response_mean_ci.len(), 2);

        // Independent responses (uniform in 1..=20000 us, a fixed seed): the mean's interval
        // is about the textbook one, 1.96 sd / sqrt(n).
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let n = 20_000u64;
        let responses: Vec<u64> = (0..n).map(|_| rng.random_range(1..=20_000u64)).collect();
        let measured: Vec<(u64, u64)> = responses
            .iter()
            .enumerate()
            .map(|(i, r)| (i as u64 * 1_000_000, i as u64 * 1_000_000 + 1_000 * r))
            .collect();
        let mut s = LoadSummary::default();
        summarize_responses(&mut s, measured, 0, None);
        let mean = responses.iter().sum::<u64>() as f64 / n as f64 / 1000.0;
        assert!((s.response_mean - mean).abs() < 1e-9);
        let textbook = 1.96 * s.response_std / (n as f64).sqrt();
        let half = (s.response_mean_ci[1] - s.response_mean_ci[0]) / 2.0;
        assert!(
            (half / textbook - 1.0).abs() < 0.3,
            "{half} against {textbook}"
        );
        let half50 = (s.response_p50_ci[1] - s.response_p50_ci[0]) / 2.0;
        assert!(half50 > 0.0 && s.response_p50_ci[0] <= s.response_p50);
        // p90 and p99.9 have theirs too, by the same sectioning: each holds the true
        // quantile of uniform 1..20 ms (18.0 and 19.98 ms), and p90's is about the textbook
        // one, 1.96 sqrt(p (1 - p) / n) / f(x_p) with density f = 1 / 19.999 per ms.
        for (ci, truth) in [(&s.response_p90_ci, 18.0), (&s.response_p999_ci, 19.98)] {
            assert!(ci[0] <= truth && truth <= ci[1], "{ci:?} against {truth}");
        }
        let textbook90 = 1.96 * (0.9f64 * 0.1 / n as f64).sqrt() * 19.999;
        let half90 = (s.response_p90_ci[1] - s.response_p90_ci[0]) / 2.0;
        assert!(
            (half90 / textbook90 - 1.0).abs() < 0.5,
            "{half90} against {textbook90}"
        );
        // Nothing measured: NaN, not zeros.
        let mut s = LoadSummary::default();
        summarize_responses(&mut s, Vec::new(), 0, None);
        assert!(s.response_mean.is_nan() && s.response_p999.is_nan());
        assert!(s.response_p999_ci.iter().all(|x| x.is_nan()));
    }

    #[test]
    fn urls_split_into_host_port_path() {
        assert_eq!(
            parse_url("http://127.0.0.1:8080/a/b").unwrap(),
            ("127.0.0.1".into(), 8080, "/a/b".into())
        );
        assert_eq!(parse_url("http://h").unwrap(), ("h".into(), 80, "/".into()));
        for bad in ["https://h/", "h:1/", "http://", "http://h:99999/"] {
            assert_eq!(parse_url(bad).unwrap_err().key, "url", "{bad}");
        }
    }

    #[test]
    fn spec_errors_name_the_key() {
        let base = || LoadSpec {
            url: Some("http://127.0.0.1:1/".into()),
            jobs: Some(1),
            ..Default::default()
        };
        let mut s = base();
        assert_eq!(s.validate().err().unwrap().key, "clients", "no mode");
        s.clients = Some(2);
        s.rate = Some(5.0);
        assert_eq!(s.validate().err().unwrap().key, "clients", "two modes");
        let mut s = base();
        s.rate = Some(-1.0);
        assert_eq!(s.validate().err().unwrap().key, "rate");
        let mut s = base();
        s.rate = Some(10.0);
        s.arrival = Some("bursty".into());
        assert_eq!(s.validate().err().unwrap().key, "arrival");
        let mut s = base();
        s.clients = Some(1);
        s.think = Some("exp".into());
        assert_eq!(s.validate().err().unwrap().key, "think");
        let mut s = base();
        s.clients = Some(1);
        s.jobs = None;
        assert_eq!(s.validate().err().unwrap().key, "jobs");
        let mut s = base();
        s.arrival = Some("uniform:1,2".into());
        s.threads = Some(2);
        assert_eq!(s.validate().err().unwrap().key, "threads");
        // Clients of classes: among the closed loop's, never more, never in an open loop.
        let class = |name: &str, clients: u32| ClassSpec {
            name: name.into(),
            fraction: None,
            clients: Some(clients),
        };
        let mut s = base();
        s.clients = Some(2);
        s.classes = Some(vec![class("a", 1), class("b", 2)]);
        let e = s.validate().err().unwrap();
        assert_eq!(
            (e.key.as_str(), e.value.as_str()),
            ("classes[1].clients", "2")
        );
        assert!(e.allowed.contains("at most clients (2)"), "{}", e.allowed);
        s.classes = Some(vec![class("a", 1), class("b", 1)]);
        assert!(s.validate().is_ok());
        let mut s = base();
        s.rate = Some(10.0);
        s.classes = Some(vec![class("a", 1)]);
        assert_eq!(s.validate().err().unwrap().key, "classes[0].clients");
        let mut s = base();
        s.clients = Some(3);
        let c = s.validate().unwrap();
        let plans = thread_plans(&LoadConfig { threads: 2, ..c });
        let sizes: Vec<usize> = plans
            .iter()
            .map(|p| match &p.plan {
                Plan::Closed { clients, .. } => clients.len(),
                _ => 0,
            })
            .collect();
        assert_eq!(sizes, vec![2, 1]);
    }
}
