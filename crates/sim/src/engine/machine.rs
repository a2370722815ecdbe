//! The machine: where a job goes (placement, balancers, migration), how it waits (its
//! runqueue's policy), and how CPUs run it (dispatch, end of a run, preemption).

use rand::Rng;
use schedlab_model::placement::{CpuLoad, Placement, TaskPlace};
use schedlab_policy::{Carry, Dequeue, Enqueue, JobId, JobView};

use super::results::Segment;
use super::{earliest, latest, Cpu, Engine, Job, EPS, NONE};
use crate::balance::{self, Queued};
use crate::spec::{Boost, Ideal, Machine};

impl Engine<'_> {
    /// A bounded buffer: new arrivals beyond its room wait outside, in order, behind any
    /// already waiting (a server's master stops reading requests while its buffer is full).
    #[cold]
    #[inline(never)]
    pub(super) fn hold_arrivals(&mut self, ready: &mut Vec<JobId>) {
        let cap = self.cfg.machine.buffer.unwrap_or(usize::MAX);
        let mut queued = self.rqs[0].policy.len();
        ready.retain(|&id| {
            // A new job (not one back from I/O) arrives at the buffer.
            let arrival = self.jobs[id.index()].first_run.is_nan();
            if arrival && (queued >= cap || !self.admission.is_empty()) {
                self.admission.push_back(id);
                false
            } else {
                queued += arrival as usize;
                true
            }
        });
    }

    /// Dispatches made room in a bounded buffer: admits the next arrivals, fills idle CPUs
    /// again, and lists the admitted in `ready` (for the preemption check).
    #[cold]
    #[inline(never)]
    pub(super) fn refill_from_buffer(&mut self, ready: &mut Vec<JobId>) {
        if self.admit_held() > 0 {
            self.fill_idle();
            ready.append(&mut self.ready);
        }
    }

    /// Moves held arrivals into the runqueue while the buffer has room (listed in
    /// `self.ready`). Returns how many.
    fn admit_held(&mut self) -> usize {
        let cap = self.cfg.machine.buffer.unwrap_or(usize::MAX);
        let mut n = 0;
        while self.rqs[0].policy.len() < cap {
            let Some(id) = self.admission.pop_front() else {
                break;
            };
            self.make_ready(id);
            self.ready.push(id);
            n += 1;
        }
        n
    }

    /// Places a newly runnable job (new task, wake-up) and enqueues it.
    // Inlined into the event loop as before the bounded buffer's cold path called it too.
    #[inline(always)]
    pub(super) fn make_ready(&mut self, id: JobId) {
        let why = if self.jobs[id.index()].wakes {
            Enqueue::Wakeup
        } else {
            Enqueue::Arrival
        };
        self.wake_boost(id);
        // The runqueue a waking task slept on (or its last job left), before placement moves
        // its home.
        let slept_on = if self.per_cpu && why == Enqueue::Wakeup {
            let t = &self.tasks[self.jobs[id.index()].task as usize];
            t.assigned.then_some(t.home as usize)
        } else {
            None
        };
        let r = if self.per_cpu { self.place(id, why) } else { 0 };
        let j = &self.jobs[id.index()];
        let entitled = self.rqs[r].policy.entitlement(&j.view);
        self.set_entitlement(j.task as usize, entitled);
        match slept_on {
            Some(from)
                if from != r
                    && !self.rqs[from].fluid
                    && !self.rqs[from].policy.forgets_sleepers() =>
            {
                // Waking on another runqueue is a migration: the one it slept on lets the task
                // go and says what it keeps (Linux: migrate_task_rq on a remote wake-up).
                let now = self.now;
                let mut carry = self.rqs[from].policy.dequeue(
                    &self.jobs[id.index()].view,
                    now,
                    Dequeue::Migrate,
                );
                carry.asleep = true;
                self.enqueue(r, id, Enqueue::Migrated(&carry));
            }
            _ => self.enqueue(r, id, why),
        }
    }

    fn loads(&self) -> Vec<CpuLoad> {
        self.rqs
            .iter()
            .zip(&self.runnable)
            .map(|(rq, &runnable)| CpuLoad {
                runnable,
                tasks: rq.tasks,
                weight: rq.task_weight,
                tickets: rq.task_tickets,
            })
            .collect()
    }

    /// The CPU (runqueue) for a new task or a waking one: the policy's choice if it makes
    /// one (`select_cpu`), else the machine's placement; then the balancer's wake-up hook.
    fn place(&mut self, id: JobId, why: Enqueue<'_>) -> usize {
        let m = &self.cfg.machine;
        let (task, class) = {
            let j = &self.jobs[id.index()];
            (j.task as usize, j.view.class as usize)
        };
        let new = why == Enqueue::Arrival;
        // With `ideal = start` a task's ideal CPU is where it starts; other rules fixed it
        // when the task was created.
        let ideal_at_start = m.ideal == Ideal::Start;
        if new {
            if let Some(pinned) = m.start_pinned {
                let c = pinned as usize;
                if ideal_at_start {
                    self.tasks[task].ideal = c as u32;
                }
                self.assign(task, id, c);
                return c;
            }
        }
        let home = self.tasks[task].home as usize;
        let chosen = if new || m.placement.places_wakeups() {
            let loads = self.loads();
            let view = &self.jobs[id.index()].view;
            self.rqs[home].policy.select_cpu(view, &loads).or_else(|| {
                let t = &self.tasks[task];
                let place = TaskPlace {
                    new,
                    home,
                    ideal: t.ideal as usize,
                    last: t.last_cpu.max(0) as usize,
                    affinity: &self.cfg.classes[class].affinity,
                };
                let mut ideal = self.next_ideal;
                let c = m
                    .placement
                    .select(&place, &loads, &mut ideal, &mut self.rng_place);
                self.next_ideal = ideal;
                Some(c)
            })
        } else {
            None
        };
        let placed = match chosen {
            Some(c) => {
                if new && ideal_at_start {
                    self.tasks[task].ideal = c as u32;
                }
                c
            }
            None => {
                let t = &self.tasks[task];
                match m.placement {
                    Placement::RoundRobin => t.ideal as usize,
                    Placement::Last => t.last_cpu.max(t.home as i32) as usize,
                    _ => t.home as usize,
                }
            }
        };
        let last = match self.tasks[task].last_cpu {
            NONE => placed,
            c => c as usize,
        };
        let mut c = placed;
        self.with_balancer(|b, e| c = b.wake(id, placed, last, e));
        if let Some(pin) = self.pinned_now() {
            c = pin;
        }
        self.assign(task, id, c);
        c
    }

    /// The CPU every task is confined to now: `start_pinned`'s until `release_after`.
    fn pinned_now(&self) -> Option<usize> {
        let m = &self.cfg.machine;
        m.start_pinned
            .filter(|_| self.now < m.release_after)
            .map(|c| c as usize)
    }

    /// Makes `c` the home CPU of the task (for placement by least load).
    fn assign(&mut self, task: usize, id: JobId, c: usize) {
        let t = &self.tasks[task];
        if t.assigned && t.home as usize == c {
            return;
        }
        self.release_task(task);
        let v = &self.jobs[id.index()].view;
        let t = &mut self.tasks[task];
        t.assigned = true;
        t.home = c as u32;
        t.weight = v.weight;
        t.tickets = v.tickets;
        let rq = &mut self.rqs[c];
        rq.tasks += 1;
        rq.task_weight += t.weight;
        rq.task_tickets += t.tickets;
    }

    pub(super) fn release_task(&mut self, task: usize) {
        let t = &mut self.tasks[task];
        if !t.assigned {
            return;
        }
        t.assigned = false;
        let rq = &mut self.rqs[t.home as usize];
        rq.tasks -= 1;
        rq.task_weight -= t.weight;
        rq.task_tickets -= t.tickets;
    }

    #[inline(always)]
    pub(super) fn enqueue(&mut self, r: usize, id: JobId, why: Enqueue<'_>) {
        let now = self.now;
        if matches!(
            why,
            Enqueue::Arrival | Enqueue::Wakeup | Enqueue::Migrated(_)
        ) {
            let w = self.jobs[id.index()].view.weight;
            self.set_runnable(r, 1, w);
        }
        let j = &mut self.jobs[id.index()];
        j.rq = r as u32;
        j.ready_since = now;
        if self.rqs[r].fluid {
            self.fluid_enqueue(r, id);
            return;
        }
        j.queued = true;
        self.rqs[r].policy.enqueue(&j.view, now, why);
        if self.per_cpu {
            j.queued_at = self.rqs[r].queued.len() as u32;
            self.rqs[r].queued.push(id);
            self.cpus[r].idle_told = false;
            self.to_fill.insert(r);
        }
    }

    /// The job leaves runqueue `r`'s runnable set (it sleeps or completes). A fluid policy
    /// has let it go already, when its work was done.
    pub(super) fn leave_runqueue(&mut self, r: usize, id: JobId, why: Dequeue) {
        if !self.rqs[r].fluid {
            let now = self.now;
            self.rqs[r]
                .policy
                .dequeue(&self.jobs[id.index()].view, now, why);
        }
    }

    /// Bookkeeping of a job leaving its runqueue's queue (picked, moved, or out of a fluid).
    pub(super) fn unqueue(&mut self, id: JobId) {
        let j = &mut self.jobs[id.index()];
        j.queued = false;
        if self.per_cpu {
            let r = j.rq as usize;
            let at = j.queued_at as usize;
            let list = &mut self.rqs[r].queued;
            list.swap_remove(at);
            if let Some(&moved) = list.get(at) {
                self.jobs[moved.index()].queued_at = at as u32;
            }
        }
    }

    #[inline(always)]
    pub(super) fn fill_idle(&mut self) {
        if self.per_cpu {
            self.fill_idle_per_cpu();
            return;
        }
        let now = self.now;
        if self.cpus.len() == 1 {
            // One CPU: nowhere else to go back to.
            if self.cpus[0].job.is_none() {
                if let Some(id) = self.rqs[0].policy.pick_next(now) {
                    self.unqueue(id);
                    self.dispatch(0, id, false);
                }
            }
            return;
        }
        let mut c = 0;
        while c < self.cpus.len() {
            if self.cpus[c].job.is_some() {
                c += 1;
                continue;
            }
            let Some(id) = self.rqs[0].policy.pick_next(now) else {
                break;
            };
            self.unqueue(id);
            // A job that ran before goes back to its CPU when that one is idle too: a quantum
            // that expires with nobody waiting goes on where it was, not on the first idle CPU
            // (a migration, and a context switch, that nothing asked for).
            let last = self.jobs[id.index()].cpu;
            if last > c as i32 && self.cpus[last as usize].job.is_none() {
                self.dispatch(last as usize, id, false);
                continue;
            }
            self.dispatch(c, id, false);
            c += 1;
        }
    }

    /// Per-CPU runqueues: each idle CPU, in order, runs its runqueue's next job, or asks the
    /// balancer once (it may pull work) and then waits. Only the CPUs in `to_fill` are
    /// visited: a busy CPU, or an idle one with nothing queued whose balancer was told, would
    /// find nothing (64 CPUs: visiting every one was most of an event's work).
    fn fill_idle_per_cpu(&mut self) {
        let now = self.now;
        let mut from = 0;
        while let Some(c) = self.to_fill.first_from(from) {
            from = c + 1;
            if self.cpus[c].job.is_some()
                || (self.cpus[c].idle_told && self.rqs[c].queued.is_empty())
            {
                self.to_fill.remove(c);
                continue;
            }
            let r = c;
            let mut next = self.rqs[r].policy.pick_next(now);
            if next.is_none() && !self.cpus[c].idle_told {
                self.cpus[c].idle_told = true;
                self.with_balancer(|b, e| b.idle(c, e.now, e));
                next = self.rqs[r].policy.pick_next(now);
            }
            match next {
                Some(id) => {
                    self.unqueue(id);
                    self.dispatch(c, id, false);
                    self.to_fill.remove(c);
                }
                None if self.cpus[c].idle_told && self.rqs[c].queued.is_empty() => {
                    self.to_fill.remove(c);
                }
                None => {}
            }
        }
    }

    /// The CPU whose job the incoming job should preempt: among those it preempts, one whose
    /// job preempts none of the others (the least important).
    fn victim(&self, incoming: JobId) -> Option<usize> {
        let inc = &self.jobs[incoming.index()];
        let r = inc.rq as usize;
        let policy = &self.rqs[r].policy;
        let range = if self.per_cpu {
            r..r + 1
        } else {
            0..self.cpus.len()
        };
        let mut best: Option<(usize, JobView)> = None;
        for c in range {
            let Some(running) = self.cpus[c].job else {
                continue;
            };
            let running = self.current_view(c, running);
            if !policy.preempts(&inc.view, &running, self.now) {
                continue;
            }
            match &best {
                Some((_, b)) if !policy.preempts(b, &running, self.now) => {}
                _ => best = Some((c, running)),
            }
        }
        best.map(|(c, _)| c)
    }

    pub(super) fn maybe_preempt(&mut self, id: JobId) {
        let Some(c) = self.victim(id) else { return };
        let now = self.now;
        let ran = self.end_run(c, true);
        let victim = self.expired.pop().expect("preempted job");
        let r = self.jobs[victim.index()].rq as usize;
        self.enqueue(r, victim, Enqueue::Preempted { ran });
        if let Some(next) = self.rqs[r].policy.pick_next(now) {
            self.unqueue(next);
            self.dispatch(c, next, false);
        }
    }

    /// A running job's view with its service brought up to now.
    pub(super) fn current_view(&self, c: usize, id: JobId) -> JobView {
        let cpu = &self.cpus[c];
        let mut v = self.jobs[id.index()].view.clone();
        let ran = (self.now - cpu.run_start).clamp(0.0, cpu.run_len);
        v.remaining -= ran;
        v.attained += ran;
        v
    }

    /// Starts `id` on CPU `c`. `continuing`: the same thread goes on with its next job.
    #[inline(always)]
    pub(super) fn dispatch(&mut self, c: usize, id: JobId, continuing: bool) {
        let now = self.now;
        let cfg = self.cfg;
        let m = &cfg.machine;
        let j = &mut self.jobs[id.index()];
        let first = j.first_run.is_nan();
        let start = j.start_cost(now, m);
        let seq = j.seq;
        self.count_switch(c, seq);
        let cpu = &mut self.cpus[c];
        let j = &mut self.jobs[id.index()];
        // A run after another job's pays a switch; one that goes on with the job the CPU ran
        // just before (its slice expired, nobody else came first) pays a turn.
        let mut overhead = start
            + if continuing {
                0.0
            } else if cpu.last_seq == j.seq {
                m.turn_cost
            } else {
                m.context_switch
            };
        if j.cpu != NONE && j.cpu != c as i32 {
            j.migrations += 1;
            overhead += m.migration_cost;
        }
        if self.held {
            if m.dispatcher_cost > 0.0 {
                overhead += self.dispatcher_works(c, first, m.dispatcher_cost);
            }
            if m.end_cost > 0.0 {
                overhead += (self.cpus[c].ending_until - now).max(0.0);
            }
        }
        let cpu = &mut self.cpus[c];
        let j = &mut self.jobs[id.index()];
        let t = &mut self.tasks[j.task as usize];
        if t.last_cpu != NONE && t.last_cpu != c as i32 {
            t.migrations += 1;
        }
        j.cpu = c as i32;
        j.on_cpu = c as i32;
        if !continuing {
            j.waited += now + overhead - j.ready_since;
        }
        t.last_cpu = c as i32;
        let slice = match m.timeslice {
            Some(ts) => {
                if t.slice_left <= EPS {
                    t.slice_left = ts;
                }
                Some(t.slice_left)
            }
            None => self.rqs[j.rq as usize].policy.slice(&j.view, now),
        };
        let run_len = slice.map_or(j.burst_left, |s| earliest(s, j.burst_left));
        cpu.job = Some(id);
        cpu.dispatched = now;
        cpu.run_start = now + overhead;
        cpu.run_len = run_len;
        cpu.last_seq = j.seq;
        cpu.idle_told = false;
        if cpu.busy_since.is_nan() {
            cpu.busy_since = now;
        }
        self.cpu_until.set(c, now + overhead + run_len);
    }

    /// CPU `c` starts the job numbered `seq`: the job it took off unfinished, if another one,
    /// counts a context switch.
    #[inline(always)]
    pub(super) fn count_switch(&mut self, c: usize, seq: u64) {
        if let Some((prev, prev_seq)) = self.cpus[c].left_unfinished.take() {
            if prev_seq != seq {
                let p = &mut self.jobs[prev.index()];
                if p.alive && p.seq == prev_seq {
                    p.switches += 1;
                }
            }
        }
    }

    /// `dispatcher_cost`: the dispatcher, on CPU 0 above the jobs, works `cost` for a job's
    /// first run on CPU `c`. Returns the delay of the run starting on `c`: on CPU 0, the
    /// dispatcher's work still under way there and this job's; elsewhere none, and the job CPU
    /// 0 runs (if any) is held up by `cost`.
    fn dispatcher_works(&mut self, c: usize, first: bool, cost: f64) -> f64 {
        let now = self.now;
        let work = if first { cost } else { 0.0 };
        if c == 0 {
            let busy = (self.dispatcher_until - now).max(0.0);
            self.dispatcher_until = now + busy + work;
            return busy + work;
        }
        if first {
            let cpu0 = &mut self.cpus[0];
            if cpu0.job.is_some() {
                cpu0.run_start += work;
                self.cpu_until.set(0, cpu0.run_start + cpu0.run_len);
            } else {
                self.dispatcher_until = self.dispatcher_until.max(now) + work;
            }
        }
        0.0
    }

    /// Ends the run on CPU `c` now: burst done, slice expired or (`preempted`) preemption.
    /// Returns the service the job received in this run.
    #[inline(always)]
    pub(super) fn end_run(&mut self, c: usize, preempted: bool) -> f64 {
        let now = self.now;
        let cpu = &mut self.cpus[c];
        let id = cpu.job.take().expect("busy CPU");
        self.to_fill.insert(c);
        let (ran, overhead) = cpu.ended_run(now, preempted);
        self.acct.overhead += overhead;
        let start = cpu.run_start;
        self.cpu_until.set(c, f64::INFINITY);
        let j = &mut self.jobs[id.index()];
        let burst_done = j.ran(now, ran, preempted);
        let task = j.task as usize;
        if self.threads {
            self.tasks[task].slice_left -= ran;
        }
        if let Some(sched) = &mut self.acct.schedule {
            if ran > 0.0 {
                let client = self.tasks[task].client;
                sched.push(Segment {
                    cpu: c as u32,
                    job: j.seq,
                    task: client,
                    start,
                    end: start + ran,
                });
            }
        }
        self.acct.served(task, start, start + ran);
        if let Boost::Linux26 { sleep_avg_max, .. } = self.cfg.machine.boost {
            let t = &mut self.tasks[task];
            t.sleep_avg = (t.sleep_avg - ran).clamp(0.0, sleep_avg_max);
        }
        let r = j.rq as usize;
        self.rqs[r].policy.charge(&j.view, ran, now);
        if burst_done {
            self.close_busy(c);
            if self.jobs[id.index()].bursts_left > 0 {
                self.block(id);
            } else {
                if self.cfg.machine.end_cost > 0.0 {
                    self.cpus[c].ending_until = now + self.cfg.machine.end_cost;
                }
                self.job_done(id, Some(c));
            }
            return ran;
        }
        if !preempted && self.cfg.machine.boost == Boost::Windows {
            // A quantum used up costs one level of boost.
            let t = &mut self.tasks[task];
            t.boost = (t.boost - 1.0).max(0.0);
        }
        self.apply_boost(id);
        let seq = self.jobs[id.index()].seq;
        self.cpus[c].left_unfinished = Some((id, seq));
        self.expired.push(id);
        if !preempted {
            self.close_busy(c);
        }
        ran
    }

    /// Closes CPU `c`'s busy interval; a dispatch at this instant reopens it.
    pub(super) fn close_busy(&mut self, c: usize) {
        let now = self.now;
        let since = std::mem::replace(&mut self.cpus[c].busy_since, f64::NAN);
        let window = self.acct.clip(since, now);
        let cpu = &mut self.cpus[c];
        cpu.busy_total += now - since;
        cpu.busy_window += window;
    }
}

impl Cpu {
    /// The run on this CPU ends now (`preempted`: before its length): the service it gave,
    /// and the part of the CPU's time since the dispatch that went to overhead.
    #[inline(always)]
    pub(super) fn ended_run(&self, now: f64, preempted: bool) -> (f64, f64) {
        let ran = if preempted {
            (now - self.run_start).clamp(0.0, self.run_len)
        } else {
            self.run_len
        };
        (ran, earliest(self.run_start, now) - self.dispatched)
    }
}

impl Job {
    /// A run of the job starts now: its first pays the machine's start (and, if it found the
    /// machine empty, its wake-up).
    #[inline(always)]
    pub(super) fn start_cost(&mut self, now: f64, m: &Machine) -> f64 {
        if !self.first_run.is_nan() {
            return 0.0;
        }
        self.first_run = now;
        if self.woke_machine {
            m.start_cost + m.idle_wake
        } else {
            m.start_cost
        }
    }

    /// A run of `ran` ended now (`preempted`: taken off its CPU early): the job's service, its
    /// burst and what is left of both. Returns whether the burst is done.
    #[inline(always)]
    pub(super) fn ran(&mut self, now: f64, ran: f64, preempted: bool) -> bool {
        self.on_cpu = NONE;
        self.last_ran = now;
        let burst_done = !preempted && ran >= self.burst_left - EPS * latest(self.burst_size, 1.0);
        let served = if burst_done { self.burst_left } else { ran };
        self.burst_left -= served;
        if burst_done {
            self.burst_left = 0.0;
        }
        self.view.remaining -= served;
        self.view.attained += served;
        if burst_done && self.bursts_left == 0 {
            self.view.remaining = 0.0;
            self.view.attained = self.view.size;
        }
        burst_done
    }
}

impl balance::View for Engine<'_> {
    fn cpus(&self) -> usize {
        self.cpus.len()
    }
    fn runnable(&self, cpu: usize) -> u32 {
        self.runnable[cpu]
    }
    fn load(&self, cpu: usize) -> f64 {
        self.load[cpu]
    }
    fn is_idle(&self, cpu: usize) -> bool {
        self.runnable[cpu] == 0
    }
    fn busiest(&self, cpu: usize) -> Option<usize> {
        let (runnable, load) = (&self.runnable, &self.load);
        balance::busiest_by(runnable.len(), cpu, |c| runnable[c], |c| load[c])
    }
    fn total_load(&self) -> f64 {
        self.load.iter().sum()
    }
    fn queued(&self, cpu: usize, out: &mut Vec<Queued>) {
        let hot = self.cfg.machine.cache_hot;
        let mut list: Vec<(f64, Queued)> = self.rqs[cpu]
            .queued
            .iter()
            .map(|&id| {
                let j = &self.jobs[id.index()];
                let q = Queued {
                    job: id,
                    weight: j.view.weight,
                    cache_hot: j.cpu == cpu as i32 && self.now - j.last_ran < hot,
                };
                (j.ready_since, q)
            })
            .collect();
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.extend(list.into_iter().map(|(_, q)| q));
    }
    fn allowed(&self, job: JobId, cpu: usize) -> bool {
        if self.pinned_now().is_some_and(|pin| pin != cpu) {
            return false;
        }
        let a = &self.cfg.classes[self.jobs[job.index()].view.class as usize].affinity;
        a.is_empty() || a.contains(&(cpu as u32))
    }
    fn draw(&mut self, n: usize) -> usize {
        self.rng_balance.random_range(0..n)
    }
    /// Moves a queued job: its old runqueue's policy lets it go with what it keeps (lag, the
    /// rest of its slice), which its new runqueue's policy takes.
    fn migrate(&mut self, job: JobId, from: usize, to: usize) {
        let w = self.jobs[job.index()].view.weight;
        let carry = if self.rqs[from].fluid {
            self.fluid_remove(from, job);
            Carry::NONE
        } else {
            let now = self.now;
            let carry =
                self.rqs[from]
                    .policy
                    .dequeue(&self.jobs[job.index()].view, now, Dequeue::Migrate);
            self.unqueue(job);
            // Its time queued here is wait too: `enqueue` starts its wait anew on `to`.
            let j = &mut self.jobs[job.index()];
            j.waited += now - j.ready_since;
            carry
        };
        self.set_runnable(from, -1, w);
        let task = self.jobs[job.index()].task as usize;
        self.assign(task, job, to);
        self.enqueue(to, job, Enqueue::Migrated(&carry));
    }
}
