//! Round robin: FIFO order, each turn at most one quantum, then back of the queue. A job
//! preempted mid-turn (it is not, by round robin alone; a wrapper or a world may) resumes first
//! with the rest of its quantum.

use crate::keyed::SliceUse;
use crate::{
    Carry, Dequeue, Enqueue, FifoQueue, JobId, JobView, ParamDefault, ParamInfo, ParamKind, Params,
    Policy, PolicyInfo, SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "rr",
    aliases: &["round-robin"],
    summary: "Round robin with a fixed quantum; an expired job goes to the back of the queue.",
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
    Ok(Box::new(RoundRobin::new(Some(p.number("quantum")))))
}

/// One FIFO queue; each turn lasts at most `quantum` (FCFS when there is none).
pub struct RoundRobin {
    queue: FifoQueue,
    quantum: Option<f64>,
    slices: SliceUse,
}

impl RoundRobin {
    pub fn new(quantum: Option<f64>) -> RoundRobin {
        RoundRobin {
            queue: FifoQueue::default(),
            quantum,
            slices: SliceUse::default(),
        }
    }
}

impl RoundRobin {
    #[cold]
    #[inline(never)]
    fn enqueue_with_slices(&mut self, id: JobId, why: Enqueue<'_>) {
        if self.quantum.is_some() {
            self.slices.enqueue(id, why);
        }
        if matches!(why, Enqueue::Preempted { .. }) {
            self.queue.push_front(id);
        } else {
            self.queue.push_back(id);
        }
    }
}

impl Policy for RoundRobin {
    fn name(&self) -> &'static str {
        if self.quantum.is_some() {
            "rr"
        } else {
            "fcfs"
        }
    }
    fn enqueue(&mut self, job: &JobView, _: f64, why: Enqueue<'_>) {
        // The hot path (nothing about a slice to keep, so not preempted either: the job goes
        // to the back) ends in a tail call: the simulator enqueues several times per job.
        if self.slices.keeps_slice(why) {
            self.enqueue_with_slices(job.id, why);
        } else {
            self.queue.push_back(job.id);
        }
    }
    fn dequeue(&mut self, job: &JobView, _: f64, _: Dequeue) -> Carry {
        self.queue.remove(job.id);
        // FCFS (no quantum) records nothing: the carry is empty.
        self.slices.carry(job.id)
    }
    fn forgets_sleepers(&self) -> bool {
        true // a sleeping job's slice use is forgotten when it leaves
    }
    fn may_preempt(&self) -> bool {
        false // round robin takes no CPU from a running job
    }
    fn pick_next(&mut self, _: f64) -> Option<JobId> {
        self.queue.pop()
    }
    fn slice(&self, job: &JobView, _: f64) -> Option<f64> {
        self.quantum.map(|q| self.slices.rest(job.id, q))
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
}
