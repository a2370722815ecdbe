//! Work stealing: a CPU that runs dry takes one queued job from a victim chosen uniformly
//! among the CPUs that have one; if there is none it tries again every `balance_interval`
//! while it stays idle. Busy CPUs never push work.

use super::{movable, Balancer, Queued, Settings, View};

pub struct Steal {
    retry: f64,
    waiting: Vec<bool>,
    next: f64,
    buf: Vec<Queued>,
}

impl Steal {
    pub fn new(s: &Settings, cpus: usize) -> Steal {
        Steal {
            retry: s.interval,
            waiting: vec![false; cpus],
            next: f64::INFINITY,
            buf: Vec::new(),
        }
    }

    fn try_steal(&mut self, cpu: usize, view: &mut dyn View) -> bool {
        let victims: Vec<usize> = (0..view.cpus())
            .filter(|&c| c != cpu && view.runnable(c) >= 2)
            .collect();
        let mut order = victims.clone();
        // Start at a random victim and go round, so a job some victim can give is found.
        let start = if victims.is_empty() {
            0
        } else {
            view.draw(victims.len())
        };
        order.rotate_left(start);
        for from in order {
            movable(view, from, cpu, &mut self.buf);
            if let Some(q) = self.buf.first() {
                view.migrate(q.job, from, cpu);
                return true;
            }
        }
        false
    }
}

impl Balancer for Steal {
    fn next_tick(&self) -> f64 {
        self.next
    }

    fn tick(&mut self, now: f64, view: &mut dyn View) {
        for cpu in 0..self.waiting.len() {
            if self.waiting[cpu] {
                self.waiting[cpu] = view.is_idle(cpu) && !self.try_steal(cpu, view);
            }
        }
        self.next = if self.waiting.iter().any(|&w| w) {
            now + self.retry
        } else {
            f64::INFINITY
        };
    }

    fn idle(&mut self, cpu: usize, now: f64, view: &mut dyn View) {
        if !self.try_steal(cpu, view) {
            self.waiting[cpu] = true;
            self.next = self.next.min(now + self.retry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_view::Fake;
    use super::*;
    use crate::balance::Kind;

    #[test]
    fn idle_cpu_steals_one_from_the_drawn_victim_or_retries_later() {
        let s = Settings {
            kind: Kind::Steal,
            interval: 2.0,
            interval_max: 2.0,
            imbalance: 1.0,
        };
        let mut b = Steal::new(&s, 3);
        let mut view = Fake::new(&[0, 0, 0], &[true, true, false]);
        b.idle(2, 1.0, &mut view);
        assert!(view.moves.is_empty());
        assert_eq!(b.next_tick(), 3.0);
        view.queues[0].push((7, 1.0));
        view.queues[1].push((8, 1.0));
        view.draws = vec![1];
        b.tick(3.0, &mut view);
        assert_eq!(view.moves, vec![(8, 1, 2)]);
        assert_eq!(b.next_tick(), f64::INFINITY);
    }
}
