//! Where a task goes with per-CPU runqueues (the kernel's `select_task_rq`).
//!
//! Two families: assignment strategies (rr, last, least-*) give a task a home CPU when it is
//! created and send it back there when it wakes, as a kernel does; dispatch strategies
//! (random, pod, jsq) place every new job and every wake-up afresh, as a load balancer in
//! front of k servers does. A balancer may still move a task afterwards.

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::SpecError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Tasks,
    Weight,
    Tickets,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A new task's ideal CPU is the next in turn; it wakes on its ideal CPU.
    RoundRobin,
    /// A new task as RoundRobin; it wakes on the CPU it last ran on.
    Last,
    /// A new task goes to the CPU with the least assigned load; it wakes there.
    Least(Metric),
    /// Every job and wake-up: a CPU chosen uniformly.
    Random,
    /// Every job and wake-up: the least loaded of `d` CPUs sampled uniformly.
    PowerOf(usize),
    /// Every job and wake-up: the CPU with the fewest runnable jobs.
    ShortestQueue,
}

pub const NAMES: &[&str] = &[
    "rr",
    "last",
    "least-tasks",
    "least-weight",
    "least-tickets",
    "random",
    "pod",
    "jsq",
];

/// What placement may know about one CPU.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuLoad {
    /// Jobs queued or running on the CPU.
    pub runnable: u32,
    /// Tasks assigned to the CPU (their home), running, queued or asleep.
    pub tasks: u32,
    pub weight: f64,
    pub tickets: f64,
}

/// What placement may know about the task.
pub struct TaskPlace<'a> {
    /// True for a task's first job (fork), false for a wake-up.
    pub new: bool,
    pub home: usize,
    pub ideal: usize,
    pub last: usize,
    /// CPUs allowed (empty: all).
    pub affinity: &'a [u32],
}

impl Placement {
    pub fn parse(
        text: Option<&str>,
        choices: Option<u32>,
        cpus: usize,
    ) -> Result<Placement, SpecError> {
        let name = text.unwrap_or("rr").to_ascii_lowercase();
        if choices.is_some() && name != "pod" {
            return Err(SpecError {
                key: "choices".into(),
                value: choices.unwrap_or(0).to_string(),
                allowed: "placement = pod (choices is its d)".into(),
            });
        }
        Ok(match name.as_str() {
            "rr" => Placement::RoundRobin,
            "last" => Placement::Last,
            "least-tasks" => Placement::Least(Metric::Tasks),
            "least-weight" => Placement::Least(Metric::Weight),
            "least-tickets" => Placement::Least(Metric::Tickets),
            "random" => Placement::Random,
            "jsq" => Placement::ShortestQueue,
            "pod" => {
                let d = choices.unwrap_or(2) as usize;
                if d == 0 || d > cpus {
                    return Err(SpecError {
                        key: "choices".into(),
                        value: d.to_string(),
                        allowed: format!("a whole number from 1 to cpus ({cpus})"),
                    });
                }
                Placement::PowerOf(d)
            }
            _ => {
                return Err(SpecError {
                    key: "placement".into(),
                    value: text.unwrap_or_default().into(),
                    allowed: format!("one of {}", NAMES.join(", ")),
                })
            }
        })
    }

    /// Whether a waking task is placed afresh (dispatch) or returns to its assignment.
    pub fn places_wakeups(self) -> bool {
        matches!(
            self,
            Placement::Random | Placement::PowerOf(_) | Placement::ShortestQueue
        )
    }

    /// The CPU for a new task or a wake-up. `next_ideal` is the round-robin counter.
    pub fn select(
        self,
        task: &TaskPlace,
        loads: &[CpuLoad],
        next_ideal: &mut usize,
        rng: &mut Xoshiro256PlusPlus,
    ) -> usize {
        let k = loads.len();
        let allowed = |c: usize| task.affinity.is_empty() || task.affinity.contains(&(c as u32));
        let first_allowed = || (0..k).find(|&c| allowed(c)).unwrap_or(0);
        let or_allowed = |c: usize| if allowed(c) { c } else { first_allowed() };
        match self {
            Placement::RoundRobin | Placement::Last | Placement::Least(_) if !task.new => {
                match self {
                    Placement::RoundRobin => or_allowed(task.ideal),
                    Placement::Last => or_allowed(task.last),
                    _ => or_allowed(task.home),
                }
            }
            Placement::RoundRobin | Placement::Last => {
                let c = *next_ideal % k;
                *next_ideal += 1;
                or_allowed(c)
            }
            Placement::Least(metric) => {
                let load = |c: usize| match metric {
                    Metric::Tasks => loads[c].tasks as f64,
                    Metric::Weight => loads[c].weight,
                    Metric::Tickets => loads[c].tickets,
                };
                (0..k)
                    .filter(|&c| allowed(c))
                    .min_by(|&a, &b| load(a).total_cmp(&load(b)))
                    .unwrap_or(0)
            }
            Placement::Random => {
                let n = (0..k).filter(|&c| allowed(c)).count().max(1);
                let pick = rng.random_range(0..n);
                (0..k).filter(|&c| allowed(c)).nth(pick).unwrap_or(0)
            }
            Placement::PowerOf(d) => {
                // Sample d distinct allowed CPUs (partial Fisher-Yates over the allowed set).
                let mut pool: Vec<usize> = (0..k).filter(|&c| allowed(c)).collect();
                let d = d.min(pool.len());
                let mut best = pool[0];
                for i in 0..d {
                    let j = rng.random_range(i..pool.len());
                    pool.swap(i, j);
                    if i == 0 || loads[pool[i]].runnable < loads[best].runnable {
                        best = pool[i];
                    }
                }
                best
            }
            Placement::ShortestQueue => {
                // Ties are broken uniformly at random (reservoir sampling over the minima).
                let mut best = usize::MAX;
                let mut least = u32::MAX;
                let mut ties = 0u32;
                for c in (0..k).filter(|&c| allowed(c)) {
                    let r = loads[c].runnable;
                    if r < least {
                        least = r;
                        best = c;
                        ties = 1;
                    } else if r == least {
                        ties += 1;
                        if rng.random_range(0..ties) == 0 {
                            best = c;
                        }
                    }
                }
                if best == usize::MAX {
                    0
                } else {
                    best
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn loads(runnable: &[u32]) -> Vec<CpuLoad> {
        runnable
            .iter()
            .map(|&r| CpuLoad {
                runnable: r,
                tasks: r,
                weight: r as f64,
                tickets: r as f64,
            })
            .collect()
    }

    fn fresh<'a>(affinity: &'a [u32]) -> TaskPlace<'a> {
        TaskPlace {
            new: true,
            home: 0,
            ideal: 0,
            last: 0,
            affinity,
        }
    }

    #[test]
    fn jsq_takes_a_shortest_queue_and_respects_affinity() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut rr = 0;
        let l = loads(&[3, 1, 2, 1]);
        for _ in 0..100 {
            let c = Placement::ShortestQueue.select(&fresh(&[]), &l, &mut rr, &mut rng);
            assert!(c == 1 || c == 3);
        }
        let c = Placement::ShortestQueue.select(&fresh(&[0, 2]), &l, &mut rr, &mut rng);
        assert_eq!(c, 2);
    }

    #[test]
    fn round_robin_assigns_in_turn_and_wakes_on_the_ideal_cpu() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut rr = 0;
        let l = loads(&[0, 0, 0]);
        let got: Vec<usize> = (0..5)
            .map(|_| Placement::RoundRobin.select(&fresh(&[]), &l, &mut rr, &mut rng))
            .collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1]);
        let waking = TaskPlace {
            new: false,
            home: 0,
            ideal: 2,
            last: 1,
            affinity: &[],
        };
        assert_eq!(
            Placement::RoundRobin.select(&waking, &l, &mut rr, &mut rng),
            2
        );
        assert_eq!(Placement::Last.select(&waking, &l, &mut rr, &mut rng), 1);
    }

    #[test]
    fn power_of_two_never_picks_the_longer_of_its_sample() {
        // With two CPUs and d = 2 the sample is both: it must always pick the shorter.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut rr = 0;
        let l = loads(&[4, 2]);
        for _ in 0..50 {
            assert_eq!(
                Placement::PowerOf(2).select(&fresh(&[]), &l, &mut rr, &mut rng),
                1
            );
        }
    }
}
