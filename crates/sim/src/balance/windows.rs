//! Windows-like balancing (Server 2003 / Vista): no periodic pass. A readied thread goes to
//! its ideal processor if idle, else to the processor it last ran on if idle, else to the
//! first idle one; with none idle it queues on its ideal processor. Threads move between
//! processors only when one goes idle and takes a queued thread from the busiest.

use super::{movable, Balancer, Queued, View};
use schedlab_policy::JobId;

#[derive(Default)]
pub struct Windows {
    buf: Vec<Queued>,
}

impl Balancer for Windows {
    fn idle(&mut self, cpu: usize, _now: f64, view: &mut dyn View) {
        if let Some(from) = view.busiest(cpu) {
            movable(view, from, cpu, &mut self.buf);
            if let Some(q) = self.buf.first() {
                view.migrate(q.job, from, cpu);
            }
        }
    }

    fn wake(&mut self, job: JobId, ideal: usize, last: usize, view: &mut dyn View) -> usize {
        if view.is_idle(ideal) {
            return ideal;
        }
        if view.is_idle(last) && view.allowed(job, last) {
            return last;
        }
        (0..view.cpus())
            .find(|&c| view.is_idle(c) && view.allowed(job, c))
            .unwrap_or(ideal)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_view::Fake;
    use super::*;

    #[test]
    fn an_idle_cpu_takes_exactly_one_and_nothing_moves_after() {
        let mut view = Fake::new(&[6, 0], &[true, false]);
        let mut b = Windows::default();
        b.idle(1, 0.0, &mut view);
        assert_eq!(view.moves.len(), 1);
        assert_eq!(b.next_tick(), f64::INFINITY);
    }

    #[test]
    fn wake_prefers_ideal_then_last_then_first_idle() {
        let mut view = Fake::new(&[0, 0, 0], &[true, false, false]);
        let mut b = Windows::default();
        assert_eq!(b.wake(JobId(0), 1, 2, &mut view), 1);
        assert_eq!(b.wake(JobId(0), 0, 2, &mut view), 2);
        view.running[2] = true;
        assert_eq!(b.wake(JobId(0), 0, 2, &mut view), 1);
        view.running[1] = true;
        assert_eq!(b.wake(JobId(0), 0, 2, &mut view), 0);
    }
}
