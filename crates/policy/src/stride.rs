//! Stride scheduling (Waldspurger): each job advances a pass value by stride = 1/tickets per
//! quantum of service; the lowest pass runs. Deterministic proportional share. A task keeps its
//! pass while it sleeps (I/O, think time), and a job that migrates keeps its distance to the
//! runqueue's global pass.

use crate::{
    Carry, Dequeue, Enqueue, JobId, JobView, KeyedQueue, ParamDefault, ParamInfo, ParamKind,
    Params, Policy, PolicyInfo, SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "stride",
    aliases: &[],
    summary: "Stride scheduling: deterministic proportional share by tickets.",
    params: &[ParamInfo {
        name: "quantum",
        kind: ParamKind::Positive,
        unit: Unit::Work,
        default: ParamDefault::Num(10.0),
        help: "longest turn on the CPU",
    }],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(Box::new(Stride {
        quantum: p.number("quantum"),
        queue: KeyedQueue::default(),
        pass: Vec::new(),
        task_pass: Vec::new(),
        global_pass: 0.0,
    }))
}

pub struct Stride {
    quantum: f64,
    queue: KeyedQueue,
    pass: Vec<f64>,
    /// Pass of each task when it last left (slept or finished a job), so it wakes where it was.
    task_pass: Vec<f64>,
    /// Pass of the job chosen last: where newcomers join.
    global_pass: f64,
}

impl Policy for Stride {
    fn name(&self) -> &'static str {
        "stride"
    }
    fn enqueue(&mut self, job: &JobView, _: f64, why: Enqueue<'_>) {
        let i = job.id.index();
        if i >= self.pass.len() {
            self.pass.resize(i + 1, 0.0);
        }
        match why {
            Enqueue::Arrival => self.pass[i] = self.global_pass,
            Enqueue::Wakeup => {
                let t = job.task as usize;
                let own = self.task_pass.get(t).copied().unwrap_or(0.0);
                self.pass[i] = own.max(self.global_pass);
            }
            // A job that slept elsewhere catches up as after a local wake-up.
            Enqueue::Migrated(c) if c.asleep => self.pass[i] = self.global_pass + c.lag.max(0.0),
            Enqueue::Migrated(c) => self.pass[i] = self.global_pass + c.lag,
            Enqueue::Expired | Enqueue::Preempted { .. } => {}
        }
        self.queue.push(job.id, self.pass[i]);
    }
    fn dequeue(&mut self, job: &JobView, _: f64, why: Dequeue) -> Carry {
        let queued = self.queue.remove(job.id);
        let t = job.task as usize;
        if t >= self.task_pass.len() {
            self.task_pass.resize(t + 1, f64::NAN);
        }
        let pass = if why == Dequeue::Migrate && !queued {
            // Not runnable here: a sleeper that wakes elsewhere, or a task's next job, takes
            // the task's pass along (none known: where newcomers join).
            let own = std::mem::replace(&mut self.task_pass[t], f64::NAN);
            if own.is_nan() {
                self.global_pass
            } else {
                own
            }
        } else {
            self.pass
                .get(job.id.index())
                .copied()
                .unwrap_or(self.global_pass)
        };
        if why != Dequeue::Migrate {
            self.task_pass[t] = pass;
        }
        Carry {
            lag: pass - self.global_pass,
            ..Carry::NONE
        }
    }
    fn pick_next(&mut self, _: f64) -> Option<JobId> {
        let id = self.queue.pop()?;
        self.global_pass = self.global_pass.max(self.pass[id.index()]);
        Some(id)
    }
    fn slice(&self, _: &JobView, _: f64) -> Option<f64> {
        Some(self.quantum)
    }
    fn charge(&mut self, job: &JobView, ran: f64, _: f64) {
        self.pass[job.id.index()] += ran / self.quantum / job.tickets;
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
    fn entitlement(&self, job: &JobView) -> f64 {
        job.tickets
    }
}

#[cfg(test)]
mod tests {
    use super::Stride;
    use crate::{Dequeue, Enqueue, JobId, JobView, KeyedQueue, Policy};

    fn stride() -> Stride {
        Stride {
            quantum: 10.0,
            queue: KeyedQueue::default(),
            pass: Vec::new(),
            task_pass: Vec::new(),
            global_pass: 0.0,
        }
    }

    #[test]
    fn a_sleeper_that_wakes_on_another_runqueue_catches_up_there() {
        let (mut here, mut there) = (stride(), stride());
        let (mut s, mut h) = (
            JobView::new(JobId(0), 0.0, 1e6),
            JobView::new(JobId(1), 0.0, 1e6),
        );
        s.task = 0;
        h.task = 1;
        here.enqueue(&s, 0.0, Enqueue::Arrival);
        assert_eq!(here.pick_next(0.0), Some(s.id));
        here.charge(&s, 10.0, 10.0); // pass 1
        here.dequeue(&s, 10.0, Dequeue::Sleep);
        here.enqueue(&h, 10.0, Enqueue::Arrival);
        for k in 0..5 {
            assert_eq!(here.pick_next(10.0 * k as f64), Some(h.id));
            here.charge(&h, 10.0, 0.0);
            here.enqueue(&h, 0.0, Enqueue::Expired);
        }
        // here's global pass is 4 (h's pass when last picked); s left at pass 1.
        let mut carry = here.dequeue(&s, 60.0, Dequeue::Migrate);
        assert_eq!(carry.lag, -3.0);
        carry.asleep = true;
        there.global_pass = 20.0;
        there.enqueue(&s, 60.0, Enqueue::Migrated(&carry));
        assert_eq!(there.pass[0], 20.0); // catches up, as after a local wake-up
                                         // The task is forgotten where it left: a second hand-off knows nothing.
        assert_eq!(here.dequeue(&s, 60.0, Dequeue::Migrate).lag, 0.0);
        // A queued job that the balancer moves keeps its place relative to the global pass.
        let moved = here.dequeue(&h, 60.0, Dequeue::Migrate);
        assert_eq!(moved.lag, 1.0);
        let mut other = stride();
        other.global_pass = 7.0;
        other.enqueue(&h, 60.0, Enqueue::Migrated(&moved));
        assert_eq!(other.pass[1], 8.0);
    }
}
