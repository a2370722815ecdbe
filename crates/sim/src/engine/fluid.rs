//! Fluid runqueues (PS, GPS, FB): every job present is served at once, at a rate the policy
//! computes; the engine asks it for exact completion times instead of running turns.

use schedlab_policy::JobId;

use super::{Engine, NONE};

impl Engine<'_> {
    /// Serves every fluid runqueue up to `t`, and integrates its busy CPUs.
    pub(super) fn advance_fluid(&mut self, t: f64) {
        let now = self.now;
        let window = self.acct.clip(now, t);
        for rq in &mut self.rqs {
            let f = rq.policy.fluid().expect("fluid");
            let busy = f.busy_cpus();
            f.advance(t);
            rq.fluid_busy += busy * (t - now);
            rq.fluid_busy_window += busy * window;
        }
    }

    /// Adds a runnable job to fluid runqueue `r`: it is served from now on.
    pub(super) fn fluid_enqueue(&mut self, r: usize, id: JobId) {
        let now = self.now;
        let j = &mut self.jobs[id.index()];
        let mut v = j.view.clone();
        // The fluid serves the current burst: it sees that as the whole job.
        v.size = j.burst_left;
        v.remaining = j.burst_left;
        v.attained = 0.0;
        if j.first_run.is_nan() {
            j.first_run = now;
        }
        j.queued = true;
        if self.per_cpu {
            // A fluid serves a job from the moment it joins: one that joins another CPU's
            // runqueue than its last (moved by a balancer, or woken elsewhere) migrates.
            if j.cpu != NONE && j.cpu != r as i32 {
                j.migrations += 1;
            }
            j.cpu = r as i32;
            let t = &mut self.tasks[j.task as usize];
            if t.last_cpu != NONE && t.last_cpu != r as i32 {
                t.migrations += 1;
            }
            t.last_cpu = r as i32;
            self.cpus[r].idle_told = false;
            // Every job of a fluid runqueue is served and may be moved: the balancers see
            // them in the runqueue's list, as they see a turn-based runqueue's waiting jobs.
            j.queued_at = self.rqs[r].queued.len() as u32;
            self.rqs[r].queued.push(id);
        }
        let f = self.rqs[r].policy.fluid().expect("fluid");
        f.advance(now);
        f.add(&v, now);
        let next = f.next_event(now).unwrap_or(f64::INFINITY);
        self.fluid_next.set(r, next);
    }

    /// Takes a job out of fluid runqueue `r` (migration), with the service it received there.
    pub(super) fn fluid_remove(&mut self, r: usize, id: JobId) {
        let now = self.now;
        let f = self.rqs[r].policy.fluid().expect("fluid");
        let served = f.attained(id);
        let view = self.jobs[id.index()].view.clone();
        self.rqs[r]
            .policy
            .dequeue(&view, now, schedlab_policy::Dequeue::Migrate);
        self.unqueue(id);
        let j = &mut self.jobs[id.index()];
        j.burst_left -= served;
        j.view.remaining -= served;
        j.view.attained += served;
        let task = j.task as usize;
        self.acct.served_fluid(task, served);
        let f = self.rqs[r].policy.fluid().expect("fluid");
        let next = f.next_event(now).unwrap_or(f64::INFINITY);
        self.fluid_next.set(r, next);
    }

    /// Jobs of fluid runqueue `r` whose burst is done now.
    pub(super) fn fluid_done(&mut self, r: usize) {
        let now = self.now;
        // Advancing by zero still settles the fluid (FB merges groups whose levels differ by
        // less than the clock resolves), so the next event moves past `now`.
        self.rqs[r].policy.fluid().expect("fluid").advance(now);
        loop {
            let f = self.rqs[r].policy.fluid().expect("fluid");
            let Some(id) = f.pop_done() else { break };
            let j = &mut self.jobs[id.index()];
            let served = j.burst_left;
            j.burst_left = 0.0;
            j.view.remaining -= served;
            j.view.attained += served;
            let task = j.task as usize;
            self.acct.served_fluid(task, served);
            self.unqueue(id);
            if self.jobs[id.index()].bursts_left > 0 {
                self.block(id);
            } else {
                let j = &mut self.jobs[id.index()];
                j.view.remaining = 0.0;
                j.view.attained = j.view.size;
                self.job_done(id, None);
            }
        }
        let f = self.rqs[r].policy.fluid().expect("fluid");
        let next = f.next_event(now).unwrap_or(f64::INFINITY);
        self.fluid_next.set(r, next);
    }

    /// Per-CPU fluid runqueues: an empty one asks the balancer once (it may pull work), as an
    /// idle CPU of a turn-based runqueue does, after the instant's arrivals have come (a
    /// CPU idle from the start asks too, so that `steal` and `windows` fill it).
    pub(super) fn tell_idle_fluid(&mut self) {
        for r in 0..self.rqs.len() {
            if self.runnable[r] == 0 && !self.cpus[r].idle_told {
                self.cpus[r].idle_told = true;
                self.with_balancer(|b, e| b.idle(r, e.now, e));
            }
        }
    }
}
