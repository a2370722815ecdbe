//! Entitlement: the CPU time a task is owed. At each instant the runnable tasks split the CPUs
//! in proportion to their weights (tickets, weights from nice), no task getting more than one
//! CPU (water-filling); a task that is not runnable is owed nothing, so its share passes to
//! the others. Integrated over time, that is each task's entitled CPU time, the yardstick of
//! `share_ratio` and `jain_share` in every world.

/// Rates (CPUs) of the tasks in `set`: `capacity` CPUs shared by weight, none above 1.
/// Tasks outside `set` are left untouched in `rate`.
pub fn water_fill(set: &[usize], weight: &[f64], capacity: f64, rate: &mut [f64]) {
    let mut open: Vec<usize> = set.iter().copied().filter(|&i| weight[i] > 0.0).collect();
    for &i in set {
        rate[i] = 0.0;
    }
    let mut free = capacity.min(open.len() as f64);
    loop {
        let total: f64 = open.iter().map(|&i| weight[i]).sum();
        if open.is_empty() || total <= 0.0 || free <= 0.0 {
            return;
        }
        let capped: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| free * weight[i] / total >= 1.0)
            .collect();
        if capped.is_empty() {
            for &i in &open {
                rate[i] = free * weight[i] / total;
            }
            return;
        }
        for &i in &capped {
            rate[i] = 1.0;
            free -= 1.0;
        }
        open.retain(|i| !capped.contains(i));
    }
}

/// Entitled CPU time per task, integrated over a window as tasks become runnable or not.
#[derive(Clone, Debug)]
pub struct Entitlement {
    capacity: f64,
    /// Weight of each task while runnable (0: not runnable).
    weight: Vec<f64>,
    rate: Vec<f64>,
    entitled: Vec<f64>,
    last: f64,
    dirty: bool,
    window: (f64, f64),
}

impl Entitlement {
    /// `tasks` tasks sharing `capacity` CPUs; the clock starts at 0 and all time counts
    /// until `set_window` says otherwise.
    pub fn new(tasks: usize, capacity: f64) -> Entitlement {
        Entitlement {
            capacity,
            weight: vec![0.0; tasks],
            rate: vec![0.0; tasks],
            entitled: vec![0.0; tasks],
            last: 0.0,
            dirty: false,
            window: (f64::NEG_INFINITY, f64::INFINITY),
        }
    }

    pub fn tasks(&self) -> usize {
        self.weight.len()
    }

    /// Only time inside [start, end] counts (the measured interval).
    pub fn set_window(&mut self, start: f64, end: f64) {
        self.window = (start, end);
    }

    /// Moves the clock to `now`: the rates set since the last call (at that instant) hold
    /// until `now`, and count over the part inside the window.
    pub fn advance(&mut self, now: f64) {
        if self.dirty {
            self.recompute();
        }
        let a = self.last.max(self.window.0);
        let b = now.min(self.window.1);
        if b > a {
            for (e, r) in self.entitled.iter_mut().zip(&self.rate) {
                *e += r * (b - a);
            }
        }
        self.last = self.last.max(now);
    }

    /// The task's weight from the last `advance` on (0 while it is not runnable). Several
    /// changes at one instant cost one water-filling, at the next `advance`.
    pub fn set(&mut self, task: usize, weight: f64) {
        if task < self.weight.len() && self.weight[task] != weight {
            self.weight[task] = weight;
            self.dirty = true;
        }
    }

    fn recompute(&mut self) {
        self.dirty = false;
        let all: Vec<usize> = (0..self.weight.len()).collect();
        water_fill(&all, &self.weight, self.capacity, &mut self.rate);
    }

    /// Entitled CPU time of each task so far.
    pub fn entitled(&self) -> &[f64] {
        &self.entitled
    }
}

/// Entitled time per task from the intervals in which each was runnable, `(task, start,
/// end)`, counted inside `window`: the same integral as [`Entitlement`] for a world that knows
/// the runnable intervals after the run (a request from its arrival to its completion in the
/// file server; the sampled runnable sets of real processes).
pub fn from_intervals(
    intervals: &[(usize, f64, f64)],
    weights: &[f64],
    capacity: f64,
    window: (f64, f64),
) -> Vec<f64> {
    let mut events: Vec<(f64, usize, i32)> = Vec::with_capacity(2 * intervals.len());
    for &(task, start, end) in intervals {
        if task < weights.len() && end > start {
            events.push((start, task, 1));
            events.push((end, task, -1));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut e = Entitlement::new(weights.len(), capacity);
    e.set_window(window.0, window.1);
    let mut open = vec![0i32; weights.len()];
    let mut last = window.0;
    for (time, task, delta) in events {
        e.advance(time);
        open[task] += delta;
        e.set(task, if open[task] > 0 { weights[task] } else { 0.0 });
        last = time;
    }
    e.advance(if window.1.is_finite() { window.1 } else { last });
    e.entitled().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_give_the_same_integral() {
        // The sleeping-task example as intervals: task 0 runnable throughout, task 1 but for
        // [4, 6]; window [2, 8].
        let got = from_intervals(
            &[(0, 0.0, 10.0), (1, 0.0, 4.0), (1, 6.0, 10.0)],
            &[1.0, 1.0],
            1.0,
            (2.0, 8.0),
        );
        assert_eq!(got, vec![4.0, 2.0]);
        // Weights 3 and 1 on two CPUs: each gets at most one CPU, so 1 and 1.
        let got = from_intervals(
            &[(0, 0.0, 1.0), (1, 0.0, 1.0)],
            &[3.0, 1.0],
            2.0,
            (0.0, 1.0),
        );
        assert_eq!(got, vec![1.0, 1.0]);
    }

    #[test]
    fn water_filling_caps_at_one_cpu() {
        let w = [30.0, 20.0, 10.0];
        let mut r = [0.0; 3];
        water_fill(&[0, 1, 2], &w, 2.0, &mut r);
        assert!((r[0] - 1.0).abs() < 1e-12);
        assert!((r[1] - 2.0 / 3.0).abs() < 1e-12);
        assert!((r[2] - 1.0 / 3.0).abs() < 1e-12);
        let w = [60.0, 20.0, 20.0];
        water_fill(&[0, 1, 2], &w, 2.0, &mut r);
        assert_eq!(r, [1.0, 0.5, 0.5]);
        // One runnable task on two CPUs gets one CPU, not two.
        let mut r = [0.0; 3];
        water_fill(&[1], &w, 2.0, &mut r);
        assert_eq!(r, [0.0, 1.0, 0.0]);
    }

    #[test]
    fn a_sleeping_task_passes_its_share_on_and_only_the_window_counts() {
        // Two equal tasks on one CPU; task 1 sleeps over [4, 6]; the window is [2, 8].
        let mut e = Entitlement::new(2, 1.0);
        e.set_window(2.0, 8.0);
        e.set(0, 1.0);
        e.set(1, 1.0);
        e.advance(0.0);
        e.advance(4.0);
        e.set(1, 0.0);
        e.advance(6.0);
        e.set(1, 1.0);
        e.advance(10.0);
        // Task 0: 2 x 1/2 + 2 x 1 + 2 x 1/2 = 4; task 1: 2 x 1/2 + 2 x 1/2 = 2.
        assert_eq!(e.entitled(), &[4.0, 2.0]);
    }
}
