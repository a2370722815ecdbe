//! Linux 2.6.22's load balancer (the O(1) scheduler, `kernel/sched.c`), in one SMP
//! scheduling domain with the constants of `SD_CPU_INIT` (include/linux/topology.h):
//! `min_interval` 1 ms and `max_interval` 4 ms (keys `balance_interval`,
//! `balance_interval_max`), `busy_factor` 64, `imbalance_pct` 125 (key `imbalance` 1.25),
//! `cache_nice_tries` 1, and `SD_BALANCE_NEWIDLE` set. What it keeps from the kernel, each
//! where the kernel does it:
//!
//! - `rebalance_domains`: a CPU balances every `balance_interval` ms, times `busy_factor` when
//!   it is not idle (a busy CPU every 64 to 256 ms, an idle one every 1 to 4 ms).
//! - `find_busiest_group`: balanced (nothing to do) when this CPU's load is at or above the
//!   average, when the busiest's is within `imbalance_pct` of this one's, or when the busiest
//!   holds at most one task's load; else the imbalance is
//!   min(busiest - average, busiest - one task, average - this). Less than one task to move
//!   counts as balanced unless the difference is at least two tasks (`fix_small_imbalance`:
//!   4/2 moves one, 2/1 and 4/3 stay).
//! - `can_migrate_task`: the running task never moves, and a cache-hot one (it ran within
//!   `cache_hot` ms, the kernel's `task_hot` against the boot-calibrated `cache_hot_time`)
//!   only once more than `cache_nice_tries` passes in a row have failed.
//! - `load_balance`: whole tasks up to the imbalance; a pass that moves nothing counts a
//!   failure (`nr_balance_failed`), and past `cache_nice_tries + 2` failures the busiest
//!   CPU's migration thread pushes one task over whatever its cache state ("active
//!   balancing"), leaving the count at `cache_nice_tries + 1`. After an unbalanced pass the
//!   interval returns to its minimum (doubles instead when it had to push); after a balanced
//!   one the count is cleared and the interval doubles, up to its maximum — or up to
//!   `MAX_PINNED_INTERVAL` (512 ms) when every task that could move is pinned elsewhere
//!   (`all_pinned`), so that a CPU kept from a pinned start's tasks may take up to half a
//!   second (times the busy factor when busy) to notice their release.
//! - `idle_balance` / `load_balance_newidle`: a CPU that runs out of work pulls at once, by
//!   the same rules, without active balancing and without touching the interval.
//! - `try_to_wake_up` without `SD_WAKE_IDLE` (not in `SD_CPU_INIT`): a waking task goes back
//!   to the CPU it last ran on, not to an idle one.
//!
//! Simplified: loads are the runnable tasks' weights at the instant of the pass (the kernel
//! reads `cpu_load[]`, averages decayed per tick), and the tasks move in the order of
//! [`movable`] (cache-cold first, then oldest) rather than the expired array first.

use super::{earliest_pass, movable, staggered_passes, Balancer, Queued, Settings, View};
use schedlab_policy::JobId;

/// `SD_CPU_INIT.busy_factor`: a busy CPU balances this many times less often.
const BUSY_FACTOR: f64 = 64.0;
/// `SD_CPU_INIT.cache_nice_tries`: failed passes before cache-hot tasks may move.
const CACHE_NICE_TRIES: u32 = 1;
/// `MAX_PINNED_INTERVAL` (ms): how far the interval may double while every task that could
/// move is pinned elsewhere.
const MAX_PINNED_INTERVAL: f64 = 512.0;

pub struct Linux26 {
    min: f64,
    max: f64,
    imbalance: f64,
    /// Per CPU: `sd->balance_interval` (before the busy factor), `sd->nr_balance_failed`,
    /// and when it balances next.
    interval: Vec<f64>,
    failed: Vec<u32>,
    next: Vec<f64>,
    earliest: f64,
    buf: Vec<Queued>,
}

/// What one balancing attempt found.
#[derive(PartialEq)]
enum Pass {
    Balanced,
    /// Every task that could move may not run here (`all_pinned`): balanced, for the kernel.
    AllPinned,
    Moved,
    Failed,
}

impl Linux26 {
    pub fn new(s: &Settings, cpus: usize) -> Linux26 {
        let next = staggered_passes(s.interval, cpus);
        Linux26 {
            min: s.interval,
            max: s.interval_max,
            imbalance: s.imbalance,
            interval: vec![s.interval; cpus],
            failed: vec![0; cpus],
            earliest: earliest_pass(&next),
            next,
            buf: Vec::new(),
        }
    }

    /// One `load_balance` attempt of `cpu` (newly idle or periodic).
    fn attempt(&mut self, cpu: usize, view: &mut dyn View) -> Pass {
        let Some(from) = view.busiest(cpu) else {
            return Pass::Balanced;
        };
        let (busiest, this) = (view.load(from), view.load(cpu));
        let avg = view.total_load() / view.cpus() as f64;
        let per_task = busiest / f64::from(view.runnable(from).max(1));
        if this >= avg || busiest <= this * self.imbalance || busiest <= per_task {
            return Pass::Balanced;
        }
        let mut amount = (busiest - avg).min(busiest - per_task).min(avg - this);
        if amount < per_task - 1e-9 {
            // fix_small_imbalance: one task moves only where that takes a whole task's
            // difference away without reversing it.
            if busiest - this >= 2.0 * per_task - 1e-9 {
                amount = per_task;
            } else {
                return Pass::Balanced;
            }
        }
        let hot_ok = self.failed[cpu] > CACHE_NICE_TRIES;
        movable(view, from, cpu, &mut self.buf);
        if self.buf.is_empty() {
            return Pass::AllPinned;
        }
        let mut moved = 0.0;
        for q in &self.buf {
            if q.cache_hot && !hot_ok {
                continue;
            }
            if moved + q.weight <= amount + 1e-9 {
                view.migrate(q.job, from, cpu);
                moved += q.weight;
            }
            if moved >= amount - 1e-9 {
                break;
            }
        }
        if moved > 0.0 {
            Pass::Moved
        } else {
            Pass::Failed
        }
    }

    /// The periodic pass of `cpu` (`load_balance`), with its interval and failure count.
    fn periodic(&mut self, cpu: usize, view: &mut dyn View) {
        match self.attempt(cpu, view) {
            Pass::Balanced => {
                self.failed[cpu] = 0;
                self.interval[cpu] = (self.interval[cpu] * 2.0).min(self.max);
            }
            Pass::AllPinned => {
                self.failed[cpu] = 0;
                self.interval[cpu] =
                    (self.interval[cpu] * 2.0).min(self.max.max(MAX_PINNED_INTERVAL));
            }
            Pass::Moved => {
                self.failed[cpu] = 0;
                self.interval[cpu] = self.min;
            }
            Pass::Failed => {
                self.failed[cpu] += 1;
                if self.failed[cpu] > CACHE_NICE_TRIES + 2 {
                    self.push_one(cpu, view);
                    self.failed[cpu] = CACHE_NICE_TRIES + 1;
                    self.interval[cpu] = (self.interval[cpu] * 2.0).min(self.max);
                } else {
                    self.interval[cpu] = self.min;
                }
            }
        }
    }

    /// Active balancing: the busiest CPU's migration thread pushes one queued task to `cpu`,
    /// whatever its cache state.
    fn push_one(&mut self, cpu: usize, view: &mut dyn View) {
        let Some(from) = view.busiest(cpu) else {
            return;
        };
        movable(view, from, cpu, &mut self.buf);
        if let Some(q) = self.buf.first() {
            view.migrate(q.job, from, cpu);
        }
    }
}

impl Balancer for Linux26 {
    fn next_tick(&self) -> f64 {
        self.earliest
    }

    fn tick(&mut self, now: f64, view: &mut dyn View) {
        for cpu in 0..self.next.len() {
            if self.next[cpu] > now {
                continue;
            }
            // rebalance_domains: the interval is read as the CPU was at this tick.
            let idle = view.is_idle(cpu);
            self.periodic(cpu, view);
            let factor = if idle { 1.0 } else { BUSY_FACTOR };
            self.next[cpu] = now + self.interval[cpu] * factor;
        }
        self.earliest = earliest_pass(&self.next);
    }

    fn idle(&mut self, cpu: usize, _now: f64, view: &mut dyn View) {
        match self.attempt(cpu, view) {
            Pass::Failed => self.failed[cpu] += 1,
            Pass::Balanced | Pass::AllPinned | Pass::Moved => self.failed[cpu] = 0,
        }
    }

    fn wake(&mut self, job: JobId, placed: usize, last: usize, view: &mut dyn View) -> usize {
        if view.allowed(job, last) {
            last
        } else {
            placed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_view::Fake;
    use super::*;
    use crate::balance::Kind;

    fn linux26(cpus: usize) -> Linux26 {
        let s = Settings {
            kind: Kind::Linux26,
            interval: 1.0,
            interval_max: 4.0,
            imbalance: 1.25,
        };
        Linux26::new(&s, cpus)
    }

    #[test]
    fn newly_idle_cpu_pulls_three_of_seven_and_four_three_stays() {
        // 7 on CPU 0 (1 running, 6 queued), CPU 1 idle: average 3.5, imbalance
        // min(3.5, 6, 3.5) = 3.5, so three whole tasks move.
        let mut view = Fake::new(&[6, 0], &[true, false]);
        let mut b = linux26(2);
        b.idle(1, 0.0, &mut view);
        assert_eq!(view.runnable_all(), vec![4, 3]);
        // 4/3 with CPU 1 running one of its three: 4 > 1.25 * 3, but half a task is to move
        // and the difference is less than two tasks: balanced, the interval doubles.
        view.queues[1].pop();
        view.running[1] = true;
        b.tick(10.0, &mut view);
        assert_eq!(view.runnable_all(), vec![4, 3]);
        assert_eq!(b.interval, vec![2.0, 2.0]);
        assert_eq!(b.failed, vec![0, 0]);
    }

    #[test]
    fn small_imbalance_of_two_tasks_moves_one() {
        let mut view = Fake::new(&[3, 1], &[true, true]);
        let mut b = linux26(2);
        b.periodic(1, &mut view);
        assert_eq!(view.runnable_all(), vec![3, 3]);
    }

    #[test]
    fn cache_hot_tasks_move_only_after_cache_nice_tries_failures() {
        // Both queued tasks ran recently: the first two newly-idle pulls fail; the third
        // (more than cache_nice_tries = 1 failures before it) takes one anyway.
        let mut view = Fake::new(&[2, 0], &[true, false]);
        view.hot = vec![0, 1];
        let mut b = linux26(2);
        b.idle(1, 0.0, &mut view);
        b.idle(1, 0.0, &mut view);
        assert!(view.moves.is_empty());
        assert_eq!(b.failed[1], 2);
        b.idle(1, 0.0, &mut view);
        assert_eq!(view.runnable_all(), vec![2, 1]);
        assert_eq!(b.failed[1], 0);
    }

    #[test]
    fn hot_tasks_leave_a_busy_cpu_from_the_third_failed_pass() {
        // A busy CPU 1 (1 task) against 4 on CPU 0, the queued ones hot: the passes fail
        // twice (the interval stays at its minimum), then hotness is ignored and one moves.
        let mut view = Fake::new(&[3, 0], &[true, true]);
        view.hot = vec![0, 1, 2];
        let mut b = linux26(2);
        b.periodic(1, &mut view);
        assert_eq!((b.failed[1], b.interval[1]), (1, 1.0));
        b.periodic(1, &mut view);
        assert_eq!((b.failed[1], b.interval[1]), (2, 1.0));
        b.periodic(1, &mut view);
        assert_eq!(view.runnable_all(), vec![3, 2]);
        assert_eq!(b.failed[1], 0);
    }

    #[test]
    fn pinned_tasks_stretch_the_interval_to_half_a_second() {
        let mut view = Fake::new(&[6, 0], &[true, false]);
        view.pinned_to = Some(0);
        let mut b = linux26(2);
        let mut t = 0.0;
        for _ in 0..12 {
            t = b.next[1];
            b.tick(t, &mut view);
        }
        assert!(view.moves.is_empty());
        assert_eq!(b.interval[1], 512.0);
        assert!(t > 1000.0);
    }

    #[test]
    fn a_busy_cpu_balances_sixty_four_times_less_often() {
        let mut view = Fake::new(&[0, 0], &[true, true]);
        let mut b = linux26(2);
        b.tick(1.5, &mut view);
        // Balanced: interval 1 -> 2 ms, times the busy factor.
        assert_eq!(b.next[0], 1.5 + 2.0 * 64.0);
        assert_eq!(b.next[1], 1.5 + 2.0 * 64.0);
    }
}
