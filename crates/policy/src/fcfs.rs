//! First come, first served: run each job to completion in arrival order.

use crate::{Enqueue, FifoQueue, JobId, JobView, ParamError, Params, Policy, PolicyInfo};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "fcfs",
    aliases: &["fifo"],
    summary: "First come, first served; non-preemptive.",
    params: &[],
    build,
};

fn build(_: &Params, _: u64) -> Result<Box<dyn Policy>, ParamError> {
    Ok(Box::<Fcfs>::default())
}

#[derive(Default)]
pub struct Fcfs {
    queue: FifoQueue,
}

impl Policy for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
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
    fn len(&self) -> usize {
        self.queue.len()
    }
}
