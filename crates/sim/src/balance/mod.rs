//! Load balancers for per-CPU runqueues, one file each. A balancer sees the machine through
//! [`View`] and moves queued jobs with [`View::migrate`], which the engine carries out at once
//! (so the next decision sees the new loads). Hooks follow the kernel's: a periodic pass
//! (`tick`), a CPU going idle (`idle`) and a task waking up (`wake`).

mod linux;
mod linux26;
mod none;
mod steal;
mod windows;

use schedlab_policy::JobId;

use crate::SpecError;

pub const NAMES: &[&str] = &["none", "linux", "linux26", "windows", "steal"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    None,
    Linux,
    /// Linux 2.6.22's balancer, with its reluctance (one file, `linux26.rs`).
    Linux26,
    Windows,
    Steal,
}

/// The balancer and its parameters, as validated from the spec.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub kind: Kind,
    pub interval: f64,
    pub interval_max: f64,
    pub imbalance: f64,
}

/// The balancer keys of a spec, as given.
#[derive(Clone, Copy, Debug, Default)]
pub struct Given<'a> {
    pub balancer: Option<&'a str>,
    pub balance_interval: Option<f64>,
    pub balance_interval_max: Option<f64>,
    pub imbalance: Option<f64>,
}

impl Settings {
    pub fn parse(spec: Given) -> Result<Settings, SpecError> {
        let bad = |key: &str, value: String, allowed: &str| SpecError {
            key: key.into(),
            value,
            allowed: allowed.into(),
        };
        let kind = match spec.balancer.map(str::to_ascii_lowercase).as_deref() {
            None | Some("none") => Kind::None,
            Some("linux") => Kind::Linux,
            Some("linux26") => Kind::Linux26,
            Some("windows") => Kind::Windows,
            Some("steal") => Kind::Steal,
            Some(other) => {
                return Err(bad(
                    "balancer",
                    other.into(),
                    &format!("one of {}", NAMES.join(", ")),
                ))
            }
        };
        let positive = |key: &str, v: Option<f64>, default: f64| match v {
            Some(x) if !(x > 0.0 && x.is_finite()) => Err(bad(key, x.to_string(), "a number > 0")),
            Some(x) => Ok(x),
            None => Ok(default),
        };
        // linux26: SD_CPU_INIT's min_interval and max_interval (before the busy factor).
        let (default_min, default_max) = if kind == Kind::Linux26 {
            (1.0, 4.0)
        } else {
            (4.0, 128.0)
        };
        let interval = positive("balance_interval", spec.balance_interval, default_min)?;
        let interval_max = positive(
            "balance_interval_max",
            spec.balance_interval_max,
            default_max,
        )?;
        if interval_max < interval {
            return Err(bad(
                "balance_interval_max",
                interval_max.to_string(),
                &format!("a number >= balance_interval ({interval})"),
            ));
        }
        let imbalance = match spec.imbalance {
            Some(x) if !(x >= 1.0 && x.is_finite()) => {
                return Err(bad("imbalance", x.to_string(), "a ratio >= 1"))
            }
            Some(x) => x,
            None => 1.25,
        };
        let linux_only = [
            ("balance_interval_max", spec.balance_interval_max),
            ("imbalance", spec.imbalance),
        ];
        let linux = matches!(kind, Kind::Linux | Kind::Linux26);
        for (key, given) in linux_only {
            if let (Some(value), false) = (given, linux) {
                return Err(bad(
                    key,
                    value.to_string(),
                    "balancer = linux or linux26 (it is a parameter of those balancers)",
                ));
            }
        }
        if let (Some(value), false) = (spec.balance_interval, linux || kind == Kind::Steal) {
            return Err(bad(
                "balance_interval",
                value.to_string(),
                "balancer = linux, linux26 or steal (it is a parameter of those balancers)",
            ));
        }
        Ok(Settings {
            kind,
            interval,
            interval_max,
            imbalance,
        })
    }
}

/// A queued job the balancer may move, as it sees it.
#[derive(Clone, Copy, Debug)]
pub struct Queued {
    pub job: JobId,
    pub weight: f64,
    /// Ran on this CPU recently (within `cache_hot`): moving it costs a cache refill.
    pub cache_hot: bool,
}

/// What a balancer may read of the machine.
pub trait View {
    fn cpus(&self) -> usize;
    /// Jobs queued or running on the CPU.
    fn runnable(&self, cpu: usize) -> u32;
    /// Sum of the weights of those jobs.
    fn load(&self, cpu: usize) -> f64;
    fn is_idle(&self, cpu: usize) -> bool;
    /// The jobs queued (not running) on the CPU, oldest first.
    fn queued(&self, cpu: usize, out: &mut Vec<Queued>);
    /// Whether the job's affinity lets it run on the CPU.
    fn allowed(&self, job: JobId, cpu: usize) -> bool;
    /// A uniform draw in 0..n from the run's seeded generator.
    fn draw(&mut self, n: usize) -> usize;
    /// Moves a queued job of `from` to the runqueue of `to`.
    fn migrate(&mut self, job: JobId, from: usize, to: usize);
    /// The busiest CPU other than `cpu` with a queued job ([`busiest_by`]).
    fn busiest(&self, cpu: usize) -> Option<usize> {
        busiest_by(self.cpus(), cpu, |c| self.runnable(c), |c| self.load(c))
    }
    /// The sum of every CPU's load, in CPU order.
    fn total_load(&self) -> f64 {
        (0..self.cpus()).map(|c| self.load(c)).sum()
    }
}

pub trait Balancer: Send {
    /// When `tick` wants to run next (infinity: never).
    fn next_tick(&self) -> f64 {
        f64::INFINITY
    }
    /// The periodic pass.
    fn tick(&mut self, _now: f64, _view: &mut dyn View) {}
    /// `cpu` has nothing to run.
    fn idle(&mut self, _cpu: usize, _now: f64, _view: &mut dyn View) {}
    /// A task wakes up; placement chose `placed`, it last ran on `last`. The CPU to use.
    fn wake(&mut self, _job: JobId, placed: usize, _last: usize, _view: &mut dyn View) -> usize {
        placed
    }
}

pub fn build(settings: &Settings, cpus: usize) -> Box<dyn Balancer> {
    match settings.kind {
        Kind::None => Box::new(none::NoBalancer),
        Kind::Linux => Box::new(linux::Linux::new(settings, cpus)),
        Kind::Linux26 => Box::new(linux26::Linux26::new(settings, cpus)),
        Kind::Windows => Box::<windows::Windows>::default(),
        Kind::Steal => Box::new(steal::Steal::new(settings, cpus)),
    }
}

/// The first periodic pass of each CPU: staggered over one interval, so that the CPUs do not
/// all balance at the same instant.
pub(crate) fn staggered_passes(interval: f64, cpus: usize) -> Vec<f64> {
    (0..cpus)
        .map(|c| interval * (1.0 + c as f64 / cpus as f64))
        .collect()
}

/// The earliest of the CPUs' next passes (kept by a balancer: the engine asks after every
/// balancer call).
pub(crate) fn earliest_pass(next: &[f64]) -> f64 {
    next.iter().copied().fold(f64::INFINITY, f64::min)
}

/// Queued jobs of `from` that may run on `to`, cache-cold first, each group oldest first.
pub(crate) fn movable(view: &dyn View, from: usize, to: usize, buf: &mut Vec<Queued>) {
    buf.clear();
    view.queued(from, buf);
    buf.retain(|q| view.allowed(q.job, to));
    // Stable: keeps queue order within the cold and the hot group.
    buf.sort_by_key(|q| q.cache_hot);
}

/// The CPU with the highest load among those other than `cpu` that have a queued job (the
/// lowest-numbered on ties). Generic over how the counts are read, so that a view holding
/// them in arrays scans them without a call per CPU (`View::busiest`).
pub fn busiest_by(
    cpus: usize,
    cpu: usize,
    runnable: impl Fn(usize) -> u32,
    load: impl Fn(usize) -> f64,
) -> Option<usize> {
    (0..cpus)
        .filter(|&c| c != cpu && runnable(c) >= 2)
        .max_by(|&a, &b| load(a).total_cmp(&load(b)).then(b.cmp(&a)))
}

#[cfg(test)]
pub(crate) mod test_view {
    use super::*;

    /// A machine given as queued jobs (id, weight) per CPU, and whether each CPU runs one.
    pub struct Fake {
        pub queues: Vec<Vec<(u32, f64)>>,
        pub running: Vec<bool>,
        pub draws: Vec<usize>,
        pub moves: Vec<(u32, usize, usize)>,
        /// Jobs that ran recently on their CPU.
        pub hot: Vec<u32>,
        /// Every job may run only on this CPU.
        pub pinned_to: Option<usize>,
    }

    impl Fake {
        /// Queues given as counts of unit-weight jobs; ids are numbered from 0 across CPUs.
        pub fn new(queued: &[usize], running: &[bool]) -> Fake {
            let mut next = 0;
            let queues = queued
                .iter()
                .map(|&n| {
                    (0..n)
                        .map(|_| {
                            next += 1;
                            (next - 1, 1.0)
                        })
                        .collect()
                })
                .collect();
            Fake {
                queues,
                running: running.to_vec(),
                draws: Vec::new(),
                moves: Vec::new(),
                hot: Vec::new(),
                pinned_to: None,
            }
        }
        pub fn runnable_all(&self) -> Vec<u32> {
            (0..self.queues.len()).map(|c| self.runnable(c)).collect()
        }
    }

    impl View for Fake {
        fn cpus(&self) -> usize {
            self.queues.len()
        }
        fn runnable(&self, cpu: usize) -> u32 {
            self.queues[cpu].len() as u32 + u32::from(self.running[cpu])
        }
        fn load(&self, cpu: usize) -> f64 {
            let queued: f64 = self.queues[cpu].iter().map(|q| q.1).sum();
            queued + if self.running[cpu] { 1.0 } else { 0.0 }
        }
        fn is_idle(&self, cpu: usize) -> bool {
            !self.running[cpu]
        }
        fn queued(&self, cpu: usize, out: &mut Vec<Queued>) {
            for &(id, w) in &self.queues[cpu] {
                out.push(Queued {
                    job: JobId(id),
                    weight: w,
                    cache_hot: self.hot.contains(&id),
                });
            }
        }
        fn allowed(&self, _: JobId, cpu: usize) -> bool {
            self.pinned_to.is_none_or(|p| p == cpu)
        }
        fn draw(&mut self, n: usize) -> usize {
            self.draws.pop().unwrap_or(0) % n
        }
        fn migrate(&mut self, job: JobId, from: usize, to: usize) {
            let i = self.queues[from]
                .iter()
                .position(|q| q.0 == job.0)
                .expect("queued");
            let q = self.queues[from].remove(i);
            self.queues[to].push(q);
            self.moves.push((job.0, from, to));
        }
    }
}
