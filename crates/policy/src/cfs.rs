//! A CFS-like weighted fair scheduler (Linux 2.6.23 to 6.5): the runnable job with the least
//! virtual runtime runs; virtual runtime grows by ran * 1024 / weight; a turn lasts the job's
//! weighted part of the target latency, but never less than the minimum granularity.

use crate::{
    Carry, Dequeue, Enqueue, JobId, JobView, KeyedQueue, ParamDefault, ParamInfo, ParamKind,
    Params, Policy, PolicyInfo, SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "cfs",
    aliases: &["fair"],
    summary: "CFS-like: least virtual runtime first, weights from nice, slices from latency.",
    params: &[
        ParamInfo {
            name: "latency",
            kind: ParamKind::Positive,
            unit: Unit::Work,
            default: ParamDefault::Num(6.0),
            help: "target latency: every runnable job runs once per period (sched_latency)",
        },
        ParamInfo {
            name: "min_granularity",
            kind: ParamKind::Positive,
            unit: Unit::Work,
            default: ParamDefault::Num(0.75),
            help: "shortest slice (sched_min_granularity)",
        },
        ParamInfo {
            name: "wakeup_granularity",
            kind: ParamKind::NonNegative,
            unit: Unit::Work,
            default: ParamDefault::Num(1.0),
            help: "a waking job preempts when its vruntime is this much smaller",
        },
    ],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(Box::new(Cfs {
        latency: p.number("latency"),
        min_granularity: p.number("min_granularity"),
        wakeup_granularity: p.number("wakeup_granularity"),
        queue: KeyedQueue::default(),
        slots: Vec::new(),
        task_vruntime: Vec::new(),
        min_vruntime: 0.0,
        runnable_weight: 0.0,
        runnable: 0,
    }))
}

/// What CFS keeps per job slot.
#[derive(Clone, Copy, Default)]
struct Entity {
    vruntime: f64,
    weight: f64,
    /// Attained service at the last charge, to read a running job's vruntime mid-slice.
    charged: f64,
    /// Blocked in I/O: its vruntime is kept for the wake-up.
    sleeping: bool,
}

pub struct Cfs {
    latency: f64,
    min_granularity: f64,
    wakeup_granularity: f64,
    queue: KeyedQueue,
    slots: Vec<Entity>,
    /// Vruntime of each task's last job, so a task's next job does not start afresh.
    task_vruntime: Vec<f64>,
    min_vruntime: f64,
    /// Weight and count of the runnable jobs, queued or running.
    runnable_weight: f64,
    runnable: usize,
}

impl Cfs {
    fn period(&self) -> f64 {
        self.latency
            .max(self.runnable as f64 * self.min_granularity)
    }
    fn current_vruntime(&self, job: &JobView) -> f64 {
        let e = &self.slots[job.id.index()];
        e.vruntime + (job.attained - e.charged) / e.weight
    }
    fn join(&mut self, i: usize) {
        self.runnable += 1;
        self.runnable_weight += self.slots[i].weight;
    }
    fn leave(&mut self, i: usize) {
        self.runnable -= 1;
        self.runnable_weight -= self.slots[i].weight;
        if self.runnable == 0 {
            self.runnable_weight = 0.0;
        }
    }
}

impl Policy for Cfs {
    fn name(&self) -> &'static str {
        "cfs"
    }
    fn enqueue(&mut self, job: &JobView, _: f64, why: Enqueue<'_>) {
        let i = job.id.index();
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Entity::default());
        }
        // Where a job entering the runnable set starts: its own vruntime if it has one, and
        // whether it wakes (and so gets the sleeper's credit).
        let entering = match why {
            Enqueue::Arrival => Some((None, false)),
            Enqueue::Wakeup => {
                let e = self.slots[i];
                let own = if e.sleeping {
                    Some(e.vruntime)
                } else {
                    self.task_vruntime.get(job.task as usize).copied()
                };
                Some((own, true))
            }
            // Vruntime travels relative to the runqueues' min_vruntime (see dequeue).
            Enqueue::Migrated(c) => Some((
                (!c.lag.is_nan()).then_some(self.min_vruntime + c.lag),
                c.asleep,
            )),
            Enqueue::Expired | Enqueue::Preempted { .. } => None,
        };
        if let Some((own, wakes)) = entering {
            self.slots[i] = Entity {
                weight: job.weight,
                charged: job.attained,
                ..Entity::default()
            };
            self.join(i);
            // A new job starts one weighted slice behind (START_DEBIT); a waking job keeps its
            // vruntime but gets at most half a latency of credit for its sleep; a migrating
            // one keeps its place.
            self.slots[i].vruntime = match own {
                Some(v) if wakes => v.max(self.min_vruntime - self.latency / 2.0),
                Some(v) => v,
                None => self.min_vruntime + self.period() / self.runnable_weight,
            };
        }
        self.queue.push(job.id, self.slots[i].vruntime);
    }
    fn dequeue(&mut self, job: &JobView, _: f64, why: Dequeue) -> Carry {
        let i = job.id.index();
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Entity::default());
        }
        let t = job.task as usize;
        if t >= self.task_vruntime.len() {
            self.task_vruntime.resize(t + 1, f64::NAN);
        }
        let queued = self.queue.remove(job.id);
        match why {
            Dequeue::Sleep => {
                self.leave(i);
                self.slots[i].sleeping = true;
            }
            Dequeue::Exit => {
                self.leave(i);
                self.slots[i].sleeping = false;
                self.task_vruntime[t] = self.slots[i].vruntime;
            }
            Dequeue::Migrate if queued => self.leave(i),
            Dequeue::Migrate => {
                // Not runnable here: a sleeper that wakes elsewhere, or a task's next job.
                // Both take the task's vruntime along (NaN: none known) and leave nothing.
                let e = &mut self.slots[i];
                let v = if e.sleeping {
                    e.vruntime
                } else {
                    self.task_vruntime[t]
                };
                e.sleeping = false;
                self.task_vruntime[t] = f64::NAN;
                return Carry {
                    lag: v - self.min_vruntime,
                    ..Carry::NONE
                };
            }
        }
        Carry {
            lag: self.slots[i].vruntime - self.min_vruntime,
            ..Carry::NONE
        }
    }
    fn pick_next(&mut self, _: f64) -> Option<JobId> {
        let id = self.queue.pop()?;
        self.min_vruntime = self.min_vruntime.max(self.slots[id.index()].vruntime);
        Some(id)
    }
    fn slice(&self, job: &JobView, _: f64) -> Option<f64> {
        let share = job.weight / self.runnable_weight.max(job.weight);
        Some((self.period() * share).max(self.min_granularity))
    }
    fn preempts(&self, incoming: &JobView, running: &JobView, _: f64) -> bool {
        let gran = self.wakeup_granularity / incoming.weight;
        self.slots[incoming.id.index()].vruntime + gran < self.current_vruntime(running)
    }
    fn charge(&mut self, job: &JobView, ran: f64, _: f64) {
        let e = &mut self.slots[job.id.index()];
        e.vruntime += ran / e.weight;
        e.charged = job.attained;
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
    fn entitlement(&self, job: &JobView) -> f64 {
        job.weight
    }
}

#[cfg(test)]
mod tests {
    use super::Cfs;
    use crate::{build, Dequeue, Enqueue, JobId, JobView, Params, Policy};

    fn cfs() -> Cfs {
        Cfs {
            latency: 6.0,
            min_granularity: 0.75,
            wakeup_granularity: 1.0,
            queue: crate::KeyedQueue::default(),
            slots: Vec::new(),
            task_vruntime: Vec::new(),
            min_vruntime: 0.0,
            runnable_weight: 0.0,
            runnable: 0,
        }
    }

    /// Runs `job` alone on `p` for `ms` from `now`, as an engine does.
    fn run(p: &mut Cfs, job: &mut JobView, now: f64, ms: f64) {
        assert_eq!(p.pick_next(now), Some(job.id));
        job.attained += ms;
        p.charge(job, ms, now + ms);
    }

    #[test]
    fn a_sleeper_that_wakes_on_another_runqueue_gets_the_sleepers_credit_there() {
        // On `here`, the sleeper s ran 1 ms; then h runs 100 ms alone, so min_vruntime moves
        // far past s's vruntime. s wakes on `there`, where w has run 50 ms: it is placed half a
        // latency (3 ms) behind there's min_vruntime, as after a local wake-up, not 100 ms
        // behind (its raw lag) nor at its stale absolute vruntime.
        let (mut here, mut there) = (cfs(), cfs());
        let mut s = JobView::new(JobId(0), 0.0, 1000.0);
        let mut h = JobView::new(JobId(1), 0.0, 1000.0);
        s.task = 0;
        h.task = 1;
        here.enqueue(&s, 0.0, Enqueue::Arrival);
        run(&mut here, &mut s, 0.0, 1.0);
        here.dequeue(&s, 1.0, Dequeue::Sleep);
        here.enqueue(&h, 1.0, Enqueue::Arrival);
        run(&mut here, &mut h, 1.0, 100.0);
        here.enqueue(&h, 101.0, Enqueue::Expired);
        assert_eq!(here.pick_next(101.0), Some(h.id)); // min_vruntime catches up with h
        let mut w = JobView::new(JobId(2), 0.0, 1000.0);
        there.enqueue(&w, 0.0, Enqueue::Arrival);
        run(&mut there, &mut w, 0.0, 50.0);
        there.enqueue(&w, 50.0, Enqueue::Expired);
        assert_eq!(there.pick_next(50.0), Some(w.id));
        let min_there = there.min_vruntime;
        assert!(min_there > 40.0);
        let mut carry = here.dequeue(&s, 101.0, Dequeue::Migrate);
        assert!(carry.lag < -90.0, "lag {}", carry.lag);
        carry.asleep = true;
        there.enqueue(&s, 101.0, Enqueue::Migrated(&carry));
        assert_eq!(there.slots[0].vruntime, min_there - 3.0);
        assert!(!here.slots[0].sleeping);
        // A queued job that the balancer moves keeps its exact place (no credit).
        let moved = there.dequeue(&s, 101.0, Dequeue::Migrate);
        assert_eq!(moved.lag, -3.0);
        let mut other = cfs();
        other.min_vruntime = 7.0;
        other.enqueue(&s, 101.0, Enqueue::Migrated(&moved));
        assert_eq!(other.slots[0].vruntime, 4.0);
    }

    #[test]
    fn a_tasks_next_job_that_wakes_elsewhere_takes_the_tasks_vruntime() {
        let mut here = build("cfs", &Params::new(), 1).unwrap();
        let mut a = JobView::new(JobId(0), 0.0, 2.0);
        a.task = 5;
        here.enqueue(&a, 0.0, Enqueue::Arrival);
        assert_eq!(here.pick_next(0.0), Some(a.id));
        a.attained = 2.0;
        here.charge(&a, 2.0, 2.0);
        let left = here.dequeue(&a, 2.0, Dequeue::Exit);
        // The task's next request is a new job in a recycled slot; the runqueue it left
        // answers with the task's vruntime and forgets the task.
        let mut next = JobView::new(JobId(0), 10.0, 2.0);
        next.task = 5;
        let carry = here.dequeue(&next, 10.0, Dequeue::Migrate);
        assert_eq!(carry.lag, left.lag);
        assert!(here.dequeue(&next, 10.0, Dequeue::Migrate).lag.is_nan());
    }
}
