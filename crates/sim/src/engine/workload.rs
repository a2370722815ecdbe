//! Tasks and jobs: the open stream, closed clients (think, submit), trace rows, and what a
//! task does when its job completes (think and submit again, continue on its CPU as a thread,
//! or leave).

use rand::Rng;
use schedlab_policy::{Dequeue, JobId, JobView};

use super::{Engine, Job, Task, Timer, EPS, NONE};
use crate::spec::Workload;
use crate::trace::TraceRow;

impl Engine<'_> {
    pub(super) fn start(&mut self) {
        for t in 0..self.persistent {
            let class = match &self.cfg.workload {
                Workload::Closed { clients, .. } => clients[t],
                _ => 0,
            };
            self.new_task(class, t as i64);
        }
        match &self.cfg.workload {
            Workload::Open { arrival } => {
                if self.issue_limit > 0 {
                    // Every job reaches the machine `dispatch_delay` after it is sent.
                    let sent = arrival.sample(&mut self.rng_arrival);
                    if self.sent_before_sending_ends(sent) {
                        self.next_open = sent + self.delay;
                    }
                }
            }
            Workload::Closed { .. } => {
                for c in 0..self.persistent {
                    if self.issued + self.pending < self.issue_limit {
                        let think = self.next_think(c);
                        if let Some(think) = think.filter(|&t| self.sent_before_sending_ends(t)) {
                            self.pending += 1;
                            self.timer(think + self.delay, Timer::Think(c as u32));
                        }
                    }
                }
            }
            Workload::Trace { .. } => {}
        }
        if self.cfg.load_sample.is_some() {
            self.timer(0.0, Timer::Sample);
        }
    }

    /// Whether a request sent at `at` is sent at all: with `drain`, nothing is sent from
    /// `time` on (the jobs in the system still finish). A sent request reaches the machine
    /// `dispatch_delay` later.
    #[inline]
    fn sent_before_sending_ends(&self, at: f64) -> bool {
        at < self.sending_ends
    }

    #[inline(always)]
    pub(super) fn next_arrival(&self) -> f64 {
        // Asked several times per event: an open run (or a closed one, whose `next_open`
        // stays infinite) answers without matching on the workload.
        if !self.trace {
            return self.next_open;
        }
        match &self.cfg.workload {
            Workload::Open { .. } => self.next_open,
            Workload::Closed { .. } => f64::INFINITY,
            Workload::Trace { rows } => {
                if (self.trace_at as u64) < self.issue_limit
                    && self.sent_before_sending_ends(rows[self.trace_at].arrival)
                {
                    rows[self.trace_at].arrival + self.delay
                } else {
                    f64::INFINITY
                }
            }
        }
    }

    #[inline(always)]
    pub(super) fn new_task(&mut self, class: u32, client: i64) -> u32 {
        let m = &self.cfg.machine;
        // Only placement on per-CPU runqueues reads a task's ideal CPU; a global runqueue
        // skips the rule (a division per task).
        let ideal = if self.per_cpu {
            m.ideal.at_creation(self.tasks_created, m.cpus)
        } else {
            None
        };
        self.tasks_created += 1;
        let task = Task {
            class,
            client,
            home: 0,
            ideal: ideal.unwrap_or(0),
            last_cpu: NONE,
            slice_left: 0.0,
            submitted: 0,
            assigned: false,
            weight: 0.0,
            tickets: 0.0,
            entity: None,
            migrations: 0,
            boost: 0.0,
            sleep_avg: 0.0,
            slept_at: f64::NAN,
        };
        match self.free_tasks.pop() {
            Some(t) => {
                self.tasks[t as usize] = task;
                t
            }
            None => {
                self.tasks.push(task);
                (self.tasks.len() - 1) as u32
            }
        }
    }

    /// A persistent task (closed client or trace task) submits its next job now.
    pub(super) fn submit(&mut self, task: u32) {
        let class = self.tasks[task as usize].class as usize;
        let size = self.next_size(task as usize, class);
        self.issued += 1;
        let reuse = self.tasks[task as usize].entity;
        let id = self.new_job(class, task, size, None, reuse);
        self.note_idle_arrival(id);
        self.ready.push(id);
    }

    /// With `idle_wake`: notes whether job `id`, just arrived, found the machine empty (it is
    /// the only job in it; a thread going on with its next job in place is not an arrival).
    #[inline]
    fn note_idle_arrival(&mut self, id: JobId) {
        if self.idle_wake && self.acct.in_system == 1 {
            self.jobs[id.index()].woke_machine = true;
        }
    }

    /// A closed client's next size: drawn, or its closed trace's next row.
    fn next_size(&mut self, task: usize, class: usize) -> f64 {
        match &self.cfg.workload {
            Workload::Closed {
                script: Some(s), ..
            } => {
                let row = s[task][self.script_at[task]];
                self.script_at[task] += 1;
                row.size
            }
            _ => self.cfg.classes[class].size.sample(&mut self.rng_size),
        }
    }

    /// A closed client's next think: drawn, or its closed trace's next row (None: it has no
    /// row left).
    fn next_think(&mut self, task: usize) -> Option<f64> {
        match &self.cfg.workload {
            Workload::Closed {
                script: Some(s), ..
            } => s[task].get(self.script_at[task]).map(|r| r.think),
            _ => {
                let class = &self.cfg.classes[self.tasks[task].class as usize];
                Some(class.think.sample(&mut self.rng_think))
            }
        }
    }

    /// Creates the jobs arriving now (open or trace) and lists them in `ready`.
    pub(super) fn admit_arrivals(&mut self) {
        while self.next_arrival() <= self.now {
            self.acct.events += 1;
            match &self.cfg.workload {
                Workload::Open { arrival } => {
                    let class = self.pick_class();
                    self.issued += 1;
                    self.next_open = if self.issued < self.issue_limit {
                        let next = self.now + arrival.sample(&mut self.rng_arrival);
                        if self.sent_before_sending_ends(next - self.delay) {
                            next
                        } else {
                            f64::INFINITY
                        }
                    } else {
                        f64::INFINITY
                    };
                    let size = self.cfg.classes[class].size.sample(&mut self.rng_size);
                    let task = self.new_task(class as u32, -1);
                    let id = self.new_job(class, task, size, None, None);
                    self.note_idle_arrival(id);
                    self.ready.push(id);
                }
                Workload::Trace { rows } => {
                    let row = rows[self.trace_at].clone();
                    self.trace_at += 1;
                    self.issued += 1;
                    let class = row.class as usize;
                    let task = match row.task {
                        Some(t) => t,
                        None => self.new_task(class as u32, -1),
                    };
                    let id = self.new_job(class, task, row.size, Some(row), None);
                    self.note_idle_arrival(id);
                    self.ready.push(id);
                }
                Workload::Closed { .. } => unreachable!("closed clients submit by timer"),
            }
        }
    }

    fn pick_class(&mut self) -> usize {
        if self.cfg.classes.len() == 1 {
            return 0;
        }
        let u: f64 = self.rng_class.random();
        self.cfg
            .classes
            .iter()
            .position(|c| u < c.cumulative)
            .unwrap_or(self.cfg.classes.len() - 1)
    }

    /// A new job in a fresh slot, or in `reuse` (a thread's entity, timeslice mode).
    fn new_job(
        &mut self,
        class: usize,
        task: u32,
        size: f64,
        row: Option<TraceRow>,
        reuse: Option<JobId>,
    ) -> JobId {
        let now = self.now;
        let seq = self.issued - 1;
        let measured = seq >= self.warmup && now >= self.cfg.warmup_time;
        if measured {
            self.start_measuring();
            self.acct.measured_arrivals += 1;
        }
        let c = &self.cfg.classes[class];
        let id = match reuse.or_else(|| self.free_jobs.pop().map(JobId)) {
            Some(id) => id,
            None => {
                self.jobs.push(Job {
                    view: JobView::new(JobId(self.jobs.len() as u32), 0.0, 0.0),
                    seq: 0,
                    task: 0,
                    first_run: f64::NAN,
                    cpu: NONE,
                    on_cpu: NONE,
                    rq: 0,
                    switches: 0,
                    migrations: 0,
                    alive: false,
                    measured: false,
                    queued: false,
                    queued_at: 0,
                    ready_since: 0.0,
                    burst_size: 0.0,
                    burst_left: 0.0,
                    bursts_left: 0,
                    io_time: 0.0,
                    io_since: 0.0,
                    waited: 0.0,
                    last_ran: f64::NEG_INFINITY,
                    wakes: false,
                    woke_machine: false,
                    base_priority: 0.0,
                    woke_from_io: false,
                });
                JobId((self.jobs.len() - 1) as u32)
            }
        };
        let size = if self.scaled {
            let m = &self.cfg.machine;
            (m.service_scale * size + m.service_offset).max(0.0)
        } else {
            size
        };
        let mut view = JobView::new(id, now, size);
        view.class = class as u32;
        view.task = task;
        view.priority = c.priority;
        view.tickets = c.tickets;
        view.weight = c.weight;
        view.deadline = c.deadline.map_or(f64::INFINITY, |d| now + d);
        if let Some(r) = row {
            view.priority = r.priority.unwrap_or(view.priority);
            view.tickets = r.tickets.unwrap_or(view.tickets);
            view.weight = r.weight.unwrap_or(view.weight);
            view.deadline = r.deadline.map_or(view.deadline, |d| now + d);
        }
        let t = &mut self.tasks[task as usize];
        // A task's first job is a fork; later ones wake it up.
        let wakes = t.submitted > 0;
        t.submitted += 1;
        let bursts = c.bursts;
        // With a final I/O, one more run of no time after it ends the job.
        let extra = u32::from(c.final_io);
        let old = &self.jobs[id.index()];
        let (cpu, last_ran) = if reuse.is_some() {
            (old.cpu, old.last_ran)
        } else {
            (NONE, f64::NEG_INFINITY)
        };
        self.jobs[id.index()] = Job {
            seq,
            task,
            first_run: f64::NAN,
            cpu,
            on_cpu: NONE,
            rq: old.rq,
            switches: 0,
            migrations: 0,
            alive: true,
            measured,
            queued: false,
            queued_at: 0,
            ready_since: now,
            burst_size: size / bursts as f64,
            burst_left: size / bursts as f64,
            bursts_left: bursts - 1 + extra,
            io_time: 0.0,
            io_since: 0.0,
            waited: 0.0,
            last_ran,
            wakes,
            woke_machine: false,
            base_priority: view.priority,
            woke_from_io: false,
            view,
        };
        if self.threads && task < self.persistent as u32 {
            self.tasks[task as usize].entity = Some(id);
        }
        self.set_in_system(1);
        id
    }

    /// The job's last burst is done (on CPU `cpu`, or in a fluid runqueue): it is measured,
    /// and its task thinks and submits again, goes on with its next job on the same CPU (a
    /// thread whose next request starts at once), or leaves.
    pub(super) fn job_done(&mut self, id: JobId, cpu: Option<usize>) {
        let now = self.now;
        self.record(id);
        let j = &self.jobs[id.index()];
        let (task, r, w) = (j.task as usize, j.rq as usize, j.view.weight);
        let persistent = task < self.persistent;
        let closed = matches!(self.cfg.workload, Workload::Closed { .. });
        let next_think = if closed && persistent && self.issued + self.pending < self.issue_limit {
            // The next request travels to the machine after the client thinks.
            let think = self.next_think(task);
            think
                .filter(|&t| self.sent_before_sending_ends(now + t))
                .map(|t| t + self.delay)
        } else {
            None
        };
        if self.threads && closed && persistent {
            if let Some(think) = next_think {
                if let (true, Some(c)) = (think <= 0.0, cpu) {
                    // The thread starts its next request at once: it keeps the CPU and
                    // whatever is left of its slice, and stays runnable (and entitled).
                    self.in_place_next(task);
                    if self.tasks[task].slice_left > EPS {
                        self.dispatch(c, id, true);
                    } else {
                        self.expired.push(id);
                    }
                    return;
                }
                // The thread sleeps while it thinks and wakes with the same entity.
                self.leave_runqueue(r, id, Dequeue::Sleep);
                self.set_runnable(r, -1, w);
                self.set_entitlement(task, 0.0);
                self.tasks[task].slept_at = now;
                self.pending += 1;
                self.timer(now + think, Timer::Think(task as u32));
                return;
            }
        }
        self.leave_runqueue(r, id, Dequeue::Exit);
        self.set_runnable(r, -1, w);
        self.set_entitlement(task, 0.0);
        self.jobs[id.index()].alive = false;
        if self.tasks[task].entity == Some(id) {
            self.tasks[task].entity = None;
        }
        self.free_jobs.push(id.0);
        match next_think {
            Some(think) => {
                self.tasks[task].slept_at = now;
                if think <= 0.0 {
                    self.submit(task as u32);
                } else {
                    self.pending += 1;
                    self.timer(now + think, Timer::Think(task as u32));
                }
            }
            None if !persistent => {
                self.release_task(task);
                self.free_tasks.push(task as u32);
            }
            // A closed client with no next job has finished its jobs.
            None if closed => self.close_shares(task),
            None => {}
        }
    }

    /// Thread mode: the task's entity takes its next job now, without leaving the CPU.
    fn in_place_next(&mut self, task: usize) {
        let class = self.tasks[task].class as usize;
        let size = self.next_size(task, class);
        self.issued += 1;
        let id = self.tasks[task].entity.expect("thread entity");
        let (cpu, rq, last_ran) = {
            let j = &self.jobs[id.index()];
            (j.cpu, j.rq, j.last_ran)
        };
        self.new_job(class, task as u32, size, None, Some(id));
        let j = &mut self.jobs[id.index()];
        j.cpu = cpu;
        j.rq = rq;
        j.last_ran = last_ran;
    }
}
