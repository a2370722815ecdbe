//! Round robin: FIFO order, each turn at most one quantum, then back of the queue.

use crate::{
    Enqueue, FifoQueue, JobId, JobView, ParamError, ParamInfo, ParamKind, Params, Policy,
    PolicyInfo,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "rr",
    aliases: &["round-robin"],
    summary: "Round robin with a fixed quantum; an expired job goes to the back of the queue.",
    params: &[ParamInfo {
        name: "quantum",
        kind: ParamKind::Positive,
        default: "10",
        help: "longest turn on the CPU",
    }],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, ParamError> {
    Ok(Box::new(RoundRobin::new(Some(p.num_or("quantum", 10.0)))))
}

/// One FIFO queue; each turn lasts at most `quantum` (FCFS when there is none).
pub struct RoundRobin {
    queue: FifoQueue,
    quantum: Option<f64>,
}

impl RoundRobin {
    pub fn new(quantum: Option<f64>) -> RoundRobin {
        RoundRobin {
            queue: FifoQueue::default(),
            quantum,
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
    fn enqueue(&mut self, job: &JobView, _: f64, _: Enqueue) {
        self.queue.push_back(job.id);
    }
    fn dequeue(&mut self, id: JobId) {
        self.queue.remove(id);
    }
    fn pick_next(&mut self, _: f64) -> Option<JobId> {
        self.queue.pop()
    }
    fn slice(&self, _: &JobView, _: f64) -> Option<f64> {
        self.quantum
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
}
