//! A CFS-like weighted fair scheduler (Linux 2.6.23 to 6.5): the runnable job with the least
//! virtual runtime runs; virtual runtime grows by ran * 1024 / weight; a turn lasts the job's
//! weighted part of the target latency, but never less than the minimum granularity.

use crate::{
    Enqueue, JobId, JobView, KeyedQueue, ParamError, ParamInfo, ParamKind, Params, Policy,
    PolicyInfo,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "cfs",
    aliases: &["fair"],
    summary: "CFS-like: least virtual runtime first, weights from nice, slices from latency.",
    params: &[
        ParamInfo {
            name: "latency",
            kind: ParamKind::Positive,
            default: "6",
            help: "target latency: every runnable job runs once per period (sched_latency)",
        },
        ParamInfo {
            name: "min_granularity",
            kind: ParamKind::Positive,
            default: "0.75",
            help: "shortest slice (sched_min_granularity)",
        },
        ParamInfo {
            name: "wakeup_granularity",
            kind: ParamKind::NonNegative,
            default: "1",
            help: "a waking job preempts when its vruntime is this much smaller",
        },
    ],
    build,
};

/// The kernel's sched_prio_to_weight table: nice -20..=19, 1024 at nice 0, ~1.25x per step.
pub const NICE_TO_WEIGHT: [f64; 40] = [
    88761.0, 71755.0, 56483.0, 46273.0, 36291.0, 29154.0, 23254.0, 18705.0, 14949.0, 11916.0,
    9548.0, 7620.0, 6100.0, 4904.0, 3906.0, 3121.0, 2501.0, 1991.0, 1586.0, 1277.0, 1024.0, 820.0,
    655.0, 526.0, 423.0, 335.0, 272.0, 215.0, 172.0, 137.0, 110.0, 87.0, 70.0, 56.0, 45.0, 36.0,
    29.0, 23.0, 18.0, 15.0,
];

/// Weight of a nice value (clamped to -20..=19), relative to nice 0 = 1.
pub fn nice_to_weight(nice: f64) -> f64 {
    let i = (nice.round().clamp(-20.0, 19.0) + 20.0) as usize;
    NICE_TO_WEIGHT[i] / 1024.0
}

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, ParamError> {
    Ok(Box::new(Cfs {
        latency: p.num_or("latency", 6.0),
        min_granularity: p.num_or("min_granularity", 0.75),
        wakeup_granularity: p.num_or("wakeup_granularity", 1.0),
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
    fn enqueue(&mut self, job: &JobView, _: f64, why: Enqueue) {
        let i = job.id.index();
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Entity::default());
        }
        match why {
            Enqueue::Arrival | Enqueue::Wakeup => {
                let e = self.slots[i];
                let own = if why == Enqueue::Wakeup && e.sleeping {
                    Some(e.vruntime)
                } else if why == Enqueue::Wakeup {
                    self.task_vruntime.get(job.task as usize).copied()
                } else {
                    None
                };
                self.slots[i] = Entity {
                    weight: job.weight,
                    charged: job.attained,
                    ..Entity::default()
                };
                self.join(i);
                // A new job starts one weighted slice behind (START_DEBIT); a waking job keeps
                // its vruntime but gets at most half a latency of credit for its sleep.
                self.slots[i].vruntime = match own {
                    Some(v) => v.max(self.min_vruntime - self.latency / 2.0),
                    None => self.min_vruntime + self.period() / self.runnable_weight,
                };
            }
            Enqueue::Migrated => {
                // Vruntime travels relative to the runqueue's min_vruntime (see dequeue).
                self.slots[i].vruntime += self.min_vruntime;
                self.slots[i].weight = job.weight;
                self.join(i);
            }
            Enqueue::Expired | Enqueue::Preempted => {}
        }
        self.queue.push(job.id, self.slots[i].vruntime);
    }
    fn dequeue(&mut self, id: JobId) {
        if self.queue.remove(id) {
            let i = id.index();
            self.leave(i);
            self.slots[i].vruntime -= self.min_vruntime;
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
    fn sleep(&mut self, job: &JobView, _: f64) {
        let i = job.id.index();
        self.leave(i);
        self.slots[i].sleeping = true;
    }
    fn exit(&mut self, job: &JobView, _: f64) {
        let i = job.id.index();
        self.leave(i);
        self.slots[i].sleeping = false;
        let t = job.task as usize;
        if t >= self.task_vruntime.len() {
            self.task_vruntime.resize(t + 1, f64::NAN);
        }
        self.task_vruntime[t] = self.slots[i].vruntime;
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
    fn entitlement(&self, job: &JobView) -> f64 {
        job.weight
    }
}
