//! Stride scheduling (Waldspurger): each job advances a pass value by stride = 1/tickets per
//! quantum of service; the lowest pass runs. Deterministic proportional share.

use crate::{
    Enqueue, JobId, JobView, KeyedQueue, ParamError, ParamInfo, ParamKind, Params, Policy,
    PolicyInfo,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "stride",
    aliases: &[],
    summary: "Stride scheduling: deterministic proportional share by tickets.",
    params: &[ParamInfo {
        name: "quantum",
        kind: ParamKind::Positive,
        default: "10",
        help: "longest turn on the CPU",
    }],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, ParamError> {
    Ok(Box::new(Stride {
        quantum: p.num_or("quantum", 10.0),
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
    /// Pass of each task's last job, so a task's next job does not start afresh.
    task_pass: Vec<f64>,
    /// Pass of the job chosen last: where newcomers join.
    global_pass: f64,
}

impl Policy for Stride {
    fn name(&self) -> &'static str {
        "stride"
    }
    fn enqueue(&mut self, job: &JobView, _: f64, why: Enqueue) {
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
            _ => {}
        }
        self.queue.push(job.id, self.pass[i]);
    }
    fn dequeue(&mut self, id: JobId) {
        self.queue.remove(id);
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
    fn exit(&mut self, job: &JobView, _: f64) {
        let t = job.task as usize;
        if t >= self.task_pass.len() {
            self.task_pass.resize(t + 1, 0.0);
        }
        self.task_pass[t] = self.pass[job.id.index()];
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
    fn entitlement(&self, job: &JobView) -> f64 {
        job.tickets
    }
}
