//! Linux-like balancing (2.6.22 `load_balance`, simplified to one scheduling domain): each
//! CPU periodically pulls from the busiest CPU when that one's load exceeds its own by the
//! `imbalance` ratio, moving about half the difference; the period doubles while the CPU
//! finds nothing to do and resets when it moves work. A CPU going idle pulls at once, and a
//! waking task goes to an idle CPU when its own is busy. Cache-hot jobs are moved last.

use super::{earliest_pass, movable, staggered_passes, Balancer, Queued, Settings, View};
use schedlab_policy::JobId;

pub struct Linux {
    min: f64,
    max: f64,
    imbalance: f64,
    interval: Vec<f64>,
    next: Vec<f64>,
    /// The earliest of `next`, kept because the engine asks after every balancer call.
    earliest: f64,
    buf: Vec<Queued>,
}

impl Linux {
    pub fn new(s: &Settings, cpus: usize) -> Linux {
        let next = staggered_passes(s.interval, cpus);
        Linux {
            min: s.interval,
            max: s.interval_max,
            imbalance: s.imbalance,
            interval: vec![s.interval; cpus],
            earliest: earliest_pass(&next),
            next,
            buf: Vec::new(),
        }
    }

    /// Pulls work to `cpu`; true when something moved.
    fn balance(&mut self, cpu: usize, idle: bool, view: &mut dyn View) -> bool {
        let Some(from) = view.busiest(cpu) else {
            return false;
        };
        let (busy, this) = (view.load(from), view.load(cpu));
        if !idle && busy <= this * self.imbalance {
            return false;
        }
        let avg = view.total_load() / view.cpus() as f64;
        let amount = (busy - avg).min(avg - this);
        movable(view, from, cpu, &mut self.buf);
        let mut moved = 0.0;
        let mut any = false;
        for q in &self.buf {
            // Whole jobs up to the amount; an idle CPU takes at least one.
            if moved + q.weight <= amount + 1e-9 || (idle && !any) {
                view.migrate(q.job, from, cpu);
                moved += q.weight;
                any = true;
            }
            if moved >= amount {
                break;
            }
        }
        if !any {
            // The kernel's fix_small_imbalance: when less than a job's weight is to move, move
            // one anyway if that lowers the busiest load below this one's new load (4 and 2
            // become 3 and 3; 4 and 3 stay).
            if let Some(q) = self.buf.iter().min_by(|a, b| a.weight.total_cmp(&b.weight)) {
                if busy - q.weight >= this + q.weight - 1e-9 {
                    view.migrate(q.job, from, cpu);
                    any = true;
                }
            }
        }
        any
    }
}

impl Balancer for Linux {
    fn next_tick(&self) -> f64 {
        self.earliest
    }

    fn tick(&mut self, now: f64, view: &mut dyn View) {
        for cpu in 0..self.next.len() {
            if self.next[cpu] > now {
                continue;
            }
            let idle = view.is_idle(cpu);
            self.interval[cpu] = if self.balance(cpu, idle, view) {
                self.min
            } else {
                (self.interval[cpu] * 2.0).min(self.max)
            };
            self.next[cpu] = now + self.interval[cpu];
        }
        self.earliest = earliest_pass(&self.next);
    }

    fn idle(&mut self, cpu: usize, _now: f64, view: &mut dyn View) {
        self.balance(cpu, true, view);
    }

    fn wake(&mut self, job: JobId, placed: usize, last: usize, view: &mut dyn View) -> usize {
        if view.is_idle(placed) {
            return placed;
        }
        if view.is_idle(last) && view.allowed(job, last) {
            return last;
        }
        (0..view.cpus())
            .find(|&c| view.is_idle(c) && view.allowed(job, c))
            .unwrap_or(placed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_view::Fake;
    use super::*;
    use crate::balance::Kind;

    fn linux(cpus: usize) -> Linux {
        let s = Settings {
            kind: Kind::Linux,
            interval: 4.0,
            interval_max: 128.0,
            imbalance: 1.25,
        };
        Linux::new(&s, cpus)
    }

    #[test]
    fn idle_cpu_pulls_half_of_seven_and_four_three_stays() {
        // Seven tasks on CPU 0 (one running, six queued), CPU 1 idle: the average is 3.5, so
        // three move and the split is 4/3; then 4 > 1.25 * 3 but half a task cannot move.
        let mut view = Fake::new(&[6, 0], &[true, false]);
        let mut b = linux(2);
        b.idle(1, 0.0, &mut view);
        view.running[1] = true;
        view.queues[1].pop();
        assert_eq!(view.runnable_all(), vec![4, 3]);
        b.tick(100.0, &mut view);
        assert_eq!(view.runnable_all(), vec![4, 3]);
    }

    #[test]
    fn interval_doubles_while_balanced_and_resets_after_a_move() {
        let mut view = Fake::new(&[1, 1], &[true, true]);
        let mut b = linux(2);
        let mut t = 0.0;
        for _ in 0..10 {
            t = b.next_tick();
            b.tick(t, &mut view);
        }
        assert_eq!(b.interval, vec![128.0, 128.0]);
        // CPU 0 gets five more jobs (7 runnable against 2): the next pass of CPU 1 finds
        // 7 > 1.25 * 2, the average is 4.5, so it pulls min(7 - 4.5, 4.5 - 2) = 2.5, that is
        // two whole jobs, and resets its interval.
        view.queues[0].extend((10..15).map(|i| (i, 1.0)));
        let next1 = b.next[1];
        b.tick(next1.max(t), &mut view);
        assert_eq!(b.interval[1], 4.0);
        assert_eq!(view.runnable_all(), vec![5, 4]);
    }
}
