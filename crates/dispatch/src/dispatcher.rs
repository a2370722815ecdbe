//! The user-space dispatcher: a schedlab policy (the same `crates/policy` object the simulator
//! drives) decides, for each CPU, which worker runs; the dispatcher enforces it.
//!
//! Enforcement: exactly the chosen workers run. A chosen worker is pinned to its CPU
//! (sched_setaffinity) and resumed — with SIGCONT if the dispatcher stopped it, or by a grant
//! (a futex word in shared memory) if it is waiting after a block. At the end of its slice it is
//! charged with the CPU time the kernel measured (its CPU clock), re-enqueued and, unless the
//! policy picks it again, stopped with SIGSTOP. Workers tell the dispatcher when they are about
//! to block (I/O, think) and when they are back; a blocked worker is never stopped, so its I/O
//! completes on time, and its CPU goes to another worker at once. Its entitlement passes to the
//! runnable workers meanwhile: entitlement is integrated over the runnable set only, by the
//! model's water-filling over all the CPUs (the simulator's definition, whatever the view).
//!
//! With per-CPU runqueues each task is placed once, at the start, where the policy's
//! `select_cpu` says or else by least tickets (xv6's fork-time placement; the simulator's
//! `placement = least-tickets`, the same code), and never moved.

use std::sync::atomic::Ordering;

use rand::SeedableRng;
use schedlab_model::entitlement::Entitlement;
use schedlab_model::placement::{CpuLoad, Metric, Placement, TaskPlace};
use schedlab_policy::{Dequeue, Enqueue, JobId, JobView, Policy};

use crate::output::{DispatchStats, Segments};
use crate::plan::{Checked, DispatchPlan};
use crate::shm::Shm;
use crate::sys;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Hold {
    /// Waiting on its grant word (after a block, or before its first run).
    Grant,
    /// Stopped by the dispatcher's SIGSTOP.
    Stop,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum TState {
    Queued(Hold),
    Running(usize),
    Blocked,
    Done,
}

pub struct Dispatcher {
    pub plan: DispatchPlan,
    policies: Vec<Box<dyn Policy>>,
    cpus: Vec<usize>,
    running: Vec<Option<usize>>,
    /// Absolute end of the current slice per CPU (ns), u64::MAX: none.
    pub slice_end: Vec<u64>,
    run_since: Vec<f64>,
    home: Vec<usize>,
    pinned: Vec<Option<usize>>,
    state: Vec<TState>,
    views: Vec<JobView>,
    pids: Vec<i32>,
    clocks: Vec<Option<libc::clockid_t>>,
    mark: Vec<u64>,
    held_since: Vec<u64>,
    seen_seq: Vec<u32>,
    seen_jobs: Vec<u64>,
    job_attained: Vec<f64>,
    t0: u64,
    /// Entitled CPU (ms) integrated over the runnable set; received CPU (ms).
    shares: Entitlement,
    weights: Vec<f64>,
    pub received: Vec<f64>,
    pub dispatches: Vec<u64>,
    pub segments: Segments,
    pub stats: DispatchStats,
    lateness_sum: f64,
    lateness_n: u64,
    /// Set when the run stops: no more decisions, no more timers.
    stopped: bool,
}

const MAX_SEGMENTS: usize = 2_000_000;

impl Dispatcher {
    pub fn new(
        checked: &Checked,
        plan: &DispatchPlan,
        pids: &[i32],
        t0: u64,
    ) -> Result<Dispatcher, String> {
        let cpus = checked.plan.cpus.clone();
        let per_cpu = plan.per_cpu();
        let n_pol = if per_cpu { cpus.len() } else { 1 };
        let mut policies = Vec::new();
        for i in 0..n_pol {
            let mut p = schedlab_policy::build(&plan.policy, &checked.params, plan.seed + i as u64)
                .map_err(|e| e.to_string())?;
            p.serving_cpus(if per_cpu { 1 } else { cpus.len() });
            policies.push(p);
        }
        let n = pids.len();
        let cpus_n = cpus.len();
        let mut views = Vec::with_capacity(n);
        for (i, t) in checked.plan.tasks.iter().enumerate() {
            let mut v = JobView::new(JobId(i as u32), 0.0, f64::INFINITY);
            v.tickets = t.tickets;
            v.priority = t.priority;
            v.weight = t.weight;
            v.class = t.class;
            v.task = i as u32;
            v.remaining = 1e300;
            views.push(v);
        }
        let home = if per_cpu {
            place_at_fork(&mut policies[0], &views, cpus.len())
        } else {
            vec![0; n]
        };
        let weights: Vec<f64> = views.iter().map(|v| policies[0].entitlement(v)).collect();
        let stats = DispatchStats {
            policy: plan.policy.clone(),
            runqueues: plan.runqueues.clone(),
            enforce: plan.enforce.clone(),
            cpus: cpus.clone(),
            ..Default::default()
        };
        Ok(Dispatcher {
            plan: plan.clone(),
            policies,
            running: vec![None; cpus.len()],
            slice_end: vec![u64::MAX; cpus.len()],
            run_since: vec![0.0; cpus.len()],
            cpus,
            home,
            pinned: vec![None; n],
            state: vec![TState::Queued(Hold::Grant); n],
            views,
            pids: pids.to_vec(),
            clocks: pids.iter().map(|&p| sys::cpu_clock_of(p)).collect(),
            mark: vec![0; n],
            held_since: vec![t0; n],
            seen_seq: vec![0; n],
            seen_jobs: vec![0; n],
            job_attained: vec![0.0; n],
            t0,
            shares: Entitlement::new(n, cpus_n as f64),
            weights,
            received: vec![0.0; n],
            dispatches: vec![0; n],
            segments: Segments::default(),
            stats,
            lateness_sum: 0.0,
            lateness_n: 0,
            stopped: false,
        })
    }

    pub fn home_cpu(&self, t: usize) -> Option<usize> {
        self.plan.per_cpu().then(|| self.cpus[self.home[t]])
    }

    fn ms(&self, abs_ns: u64) -> f64 {
        abs_ns.saturating_sub(self.t0) as f64 / 1e6
    }

    fn policy_of(&mut self, t: usize) -> &mut Box<dyn Policy> {
        let i = if self.policies.len() > 1 {
            self.home[t]
        } else {
            0
        };
        &mut self.policies[i]
    }

    /// The runnable set changed at `now` (ms): entitlement up to now at the old rates, then
    /// each task's weight while runnable, 0 otherwise.
    fn runnable_changed(&mut self, now: f64) {
        self.shares.advance(now);
        for t in 0..self.state.len() {
            let runnable = matches!(self.state[t], TState::Queued(_) | TState::Running(_));
            self.shares
                .set(t, if runnable { self.weights[t] } else { 0.0 });
        }
    }

    fn enqueue(&mut self, t: usize, now: f64, why: Enqueue<'_>) {
        let view = self.views[t].clone();
        self.policy_of(t).enqueue(&view, now, why);
    }

    fn charge(&mut self, t: usize, now: f64) -> f64 {
        let Some(clock) = self.clocks[t] else {
            return 0.0;
        };
        let Some(cpu_ns) = sys::clock_read_ns(clock) else {
            return 0.0;
        };
        let ran = cpu_ns.saturating_sub(self.mark[t]) as f64 / 1e6;
        self.mark[t] = cpu_ns;
        self.received[t] += ran;
        let v = &mut self.views[t];
        v.attained += ran;
        let view = v.clone();
        self.policy_of(t).charge(&view, ran, now);
        ran
    }

    /// Refreshes what the policy may know about the task's current job from its slot.
    fn refresh_view(&mut self, t: usize, shm: &Shm, now: f64) {
        let slot = shm.slot(t);
        let jobs = slot.jobs_done.load(Ordering::Acquire);
        if jobs != self.seen_jobs[t] {
            self.seen_jobs[t] = jobs;
            self.job_attained[t] = self.views[t].attained;
        }
        let size = slot.job_size_ns.load(Ordering::Relaxed) as f64 / 1e6;
        let v = &mut self.views[t];
        if size > 0.0 {
            v.size = size;
            v.remaining = (size - (v.attained - self.job_attained[t])).max(1e-9);
        }
        let _ = now;
    }

    fn end_segment(&mut self, cpu_i: usize, t: usize, now: f64) {
        if self.segments.cpu.len() < MAX_SEGMENTS {
            self.segments.cpu.push(self.cpus[cpu_i] as u32);
            self.segments.task.push(t as u32);
            self.segments.start.push(self.run_since[cpu_i]);
            self.segments.end.push(now);
        }
    }

    fn resume(&mut self, t: usize, cpu_i: usize, shm: &Shm) {
        let cpu = self.cpus[cpu_i];
        if self.pinned[t] != Some(cpu) {
            if sys::set_affinity(self.pids[t], &[cpu]).is_ok() {
                self.pinned[t] = Some(cpu);
            }
            self.stats.affinity_changes += 1;
        }
        // Held until the grant itself, not the round's clock reading: a round handles many
        // notices on one reading, and a worker granted late in it was held that much longer.
        let held = sys::now_ns().saturating_sub(self.held_since[t]);
        shm.slot(t).held_ns.fetch_add(held, Ordering::AcqRel);
        match self.state[t] {
            TState::Queued(Hold::Stop) => {
                sys::kill(self.pids[t], libc::SIGCONT);
                self.stats.conts += 1;
            }
            TState::Queued(Hold::Grant) => {
                let slot = shm.slot(t);
                slot.grant.fetch_add(1, Ordering::AcqRel);
                sys::futex_wake(&slot.grant, 1);
                self.stats.grants += 1;
            }
            _ => {}
        }
        if let Some(clock) = self.clocks[t] {
            self.mark[t] = sys::clock_read_ns(clock).unwrap_or(self.mark[t]);
        }
        self.state[t] = TState::Running(cpu_i);
        self.dispatches[t] += 1;
        self.stats.switches += 1;
    }

    /// Gives CPU `cpu_i` to the policy's choice, if any.
    fn fill(&mut self, cpu_i: usize, shm: &Shm, now_ns: u64) {
        if self.stopped {
            return;
        }
        let now = self.ms(now_ns);
        let pol = if self.policies.len() > 1 { cpu_i } else { 0 };
        self.stats.decisions += 1;
        let Some(id) = self.policies[pol].pick_next(now) else {
            self.running[cpu_i] = None;
            self.slice_end[cpu_i] = u64::MAX;
            return;
        };
        let t = id.index();
        self.refresh_view(t, shm, now);
        self.resume(t, cpu_i, shm);
        self.running[cpu_i] = Some(t);
        self.run_since[cpu_i] = now;
        let slice = self.policies[pol].slice(&self.views[t], now);
        self.slice_end[cpu_i] = match slice {
            Some(s) if s.is_finite() => now_ns + (s * 1e6).max(1000.0) as u64,
            _ => u64::MAX,
        };
    }

    /// The first decisions: every worker is ready and waiting for its grant.
    pub fn start(&mut self, shm: &Shm, now_ns: u64) {
        let now = self.ms(now_ns);
        for t in 0..self.pids.len() {
            self.seen_seq[t] = shm.slot(t).seq.load(Ordering::Acquire);
            self.held_since[t] = now_ns;
            self.refresh_view(t, shm, now);
            self.state[t] = TState::Queued(Hold::Grant);
            self.enqueue(t, now, Enqueue::Arrival);
        }
        self.runnable_changed(now);
        for c in 0..self.cpus.len() {
            self.fill(c, shm, now_ns);
        }
    }

    /// Slices that ended by `now_ns`.
    pub fn expire(&mut self, shm: &Shm, now_ns: u64) {
        for c in 0..self.cpus.len() {
            if self.slice_end[c] > now_ns {
                continue;
            }
            self.lateness_sum += (now_ns - self.slice_end[c]) as f64 / 1e3;
            self.lateness_n += 1;
            let Some(t) = self.running[c] else {
                self.slice_end[c] = u64::MAX;
                continue;
            };
            let now = self.ms(now_ns);
            self.charge(t, now);
            self.refresh_view(t, shm, now);
            self.enqueue(t, now, Enqueue::Expired);
            let pol = if self.policies.len() > 1 { c } else { 0 };
            self.stats.decisions += 1;
            let next = self.policies[pol].pick_next(now).map(|id| id.index());
            if next == Some(t) {
                // Chosen again: it keeps running, a new slice begins.
                let slice = self.policies[pol].slice(&self.views[t], now);
                self.slice_end[c] = match slice {
                    Some(s) if s.is_finite() => now_ns + (s * 1e6).max(1000.0) as u64,
                    _ => u64::MAX,
                };
                self.dispatches[t] += 1;
                continue;
            }
            // Stop the current one, then run the choice (re-queued first so it is not lost).
            sys::kill(self.pids[t], libc::SIGSTOP);
            self.stats.stops += 1;
            self.state[t] = TState::Queued(Hold::Stop);
            self.held_since[t] = sys::now_ns(); // from the stop itself, as `resume` ends it
            self.end_segment(c, t, now);
            self.running[c] = None;
            if let Some(n) = next {
                self.refresh_view(n, shm, now);
                self.resume(n, c, shm);
                self.running[c] = Some(n);
                self.run_since[c] = now;
                let slice = self.policies[pol].slice(&self.views[n], now);
                self.slice_end[c] = match slice {
                    Some(s) if s.is_finite() => now_ns + (s * 1e6).max(1000.0) as u64,
                    _ => u64::MAX,
                };
            } else {
                self.slice_end[c] = u64::MAX;
            }
        }
    }

    /// Handles the state changes workers published (block, ready, done).
    pub fn notice(&mut self, shm: &Shm, now_ns: u64) {
        use crate::shm::state;
        let now = self.ms(now_ns);
        for t in 0..self.pids.len() {
            let slot = shm.slot(t);
            let seq = slot.seq.load(Ordering::Acquire);
            if seq == self.seen_seq[t] {
                continue;
            }
            let jumps = seq.wrapping_sub(self.seen_seq[t]);
            self.seen_seq[t] = seq;
            let s = slot.state.load(Ordering::Acquire);
            match s {
                state::BLOCK => self.on_block(t, shm, now_ns),
                state::READY => {
                    // Blocked and back already (two changes seen as one).
                    if !matches!(self.state[t], TState::Blocked) && jumps >= 2 {
                        self.on_block(t, shm, now_ns);
                    }
                    if matches!(self.state[t], TState::Blocked) {
                        self.on_ready(t, shm, now_ns);
                    }
                }
                state::DONE | state::FAILED => self.on_done(t, shm, now_ns),
                _ => {}
            }
        }
        let _ = now;
    }

    fn on_block(&mut self, t: usize, shm: &Shm, now_ns: u64) {
        let now = self.ms(now_ns);
        match self.state[t] {
            TState::Running(c) => {
                self.charge(t, now);
                self.end_segment(c, t, now);
                let view = self.views[t].clone();
                self.policy_of(t).dequeue(&view, now, Dequeue::Sleep);
                self.state[t] = TState::Blocked;
                self.runnable_changed(now);
                self.running[c] = None;
                self.fill(c, shm, now_ns);
            }
            TState::Queued(hold) => {
                // Stopped just as it blocked: let it finish its I/O.
                let view = self.views[t].clone();
                self.policy_of(t).dequeue(&view, now, Dequeue::Sleep);
                if hold == Hold::Stop {
                    sys::kill(self.pids[t], libc::SIGCONT);
                    self.stats.conts += 1;
                }
                let held = sys::now_ns().saturating_sub(self.held_since[t]);
                shm.slot(t).held_ns.fetch_add(held, Ordering::AcqRel);
                self.state[t] = TState::Blocked;
                self.runnable_changed(now);
            }
            _ => {}
        }
    }

    fn on_ready(&mut self, t: usize, shm: &Shm, now_ns: u64) {
        let now = self.ms(now_ns);
        self.state[t] = TState::Queued(Hold::Grant);
        self.held_since[t] = now_ns;
        self.refresh_view(t, shm, now);
        self.enqueue(t, now, Enqueue::Wakeup);
        self.runnable_changed(now);
        let per_cpu = self.policies.len() > 1;
        let candidates: Vec<usize> = if per_cpu {
            vec![self.home[t]]
        } else {
            (0..self.cpus.len()).collect()
        };
        if let Some(&c) = candidates.iter().find(|&&c| self.running[c].is_none()) {
            self.fill(c, shm, now_ns);
            return;
        }
        for c in candidates {
            let Some(r) = self.running[c] else { continue };
            let pol = if per_cpu { c } else { 0 };
            if self.policies[pol].preempts(&self.views[t], &self.views[r], now) {
                let ran = self.charge(r, now);
                sys::kill(self.pids[r], libc::SIGSTOP);
                self.stats.stops += 1;
                self.state[r] = TState::Queued(Hold::Stop);
                self.held_since[r] = sys::now_ns();
                self.end_segment(c, r, now);
                self.enqueue(r, now, Enqueue::Preempted { ran });
                self.running[c] = None;
                self.fill(c, shm, now_ns);
                return;
            }
        }
    }

    fn on_done(&mut self, t: usize, shm: &Shm, now_ns: u64) {
        let now = self.ms(now_ns);
        match self.state[t] {
            TState::Running(c) => {
                self.charge(t, now);
                self.end_segment(c, t, now);
                self.running[c] = None;
                self.state[t] = TState::Done;
                let view = self.views[t].clone();
                self.policy_of(t).dequeue(&view, now, Dequeue::Exit);
                self.runnable_changed(now);
                self.fill(c, shm, now_ns);
            }
            TState::Queued(_) => {
                let view = self.views[t].clone();
                self.policy_of(t).dequeue(&view, now, Dequeue::Exit);
                self.state[t] = TState::Done;
                self.runnable_changed(now);
            }
            TState::Blocked => {
                self.state[t] = TState::Done;
            }
            TState::Done => {}
        }
    }

    /// A worker exited (or was killed) without saying DONE.
    pub fn exited(&mut self, t: usize, shm: &Shm, now_ns: u64) {
        if self.stopped {
            self.state[t] = TState::Done;
            return;
        }
        if self.state[t] != TState::Done {
            self.on_done(t, shm, now_ns);
        }
    }

    /// The run stops: every held worker is let go so it can see the stop flag and exit.
    pub fn release_all(&mut self, shm: &Shm, now_ns: u64) {
        self.stopped = true;
        let now = self.ms(now_ns);
        self.shares.advance(now);
        for t in 0..self.pids.len() {
            match self.state[t] {
                TState::Queued(Hold::Stop) => {
                    sys::kill(self.pids[t], libc::SIGCONT);
                }
                TState::Queued(Hold::Grant) => {
                    let slot = shm.slot(t);
                    slot.grant.fetch_add(1, Ordering::AcqRel);
                    sys::futex_wake(&slot.grant, 1);
                }
                _ => {}
            }
            if let TState::Running(c) = self.state[t] {
                self.end_segment(c, t, now);
            }
        }
        for t in 0..self.pids.len() {
            // Make sure a worker that a stop raced with is running.
            sys::kill(self.pids[t], libc::SIGCONT);
        }
        self.slice_end.iter_mut().for_each(|s| *s = u64::MAX);
        self.running.iter_mut().for_each(|r| *r = None);
    }

    /// Entitled and received CPU (ms) so far; the policy is not charged (mid-slice).
    pub fn shares_now(&mut self, now_ns: u64) -> (Vec<f64>, Vec<f64>) {
        let now = self.ms(now_ns);
        self.shares.advance(now);
        let mut received = self.received.clone();
        for c in 0..self.cpus.len() {
            if let Some(t) = self.running[c] {
                if let Some(cur) = self.clocks[t].and_then(sys::clock_read_ns) {
                    received[t] += cur.saturating_sub(self.mark[t]) as f64 / 1e6;
                }
            }
        }
        (self.shares.entitled().to_vec(), received)
    }

    pub fn next_deadline(&self) -> u64 {
        if self.stopped {
            return u64::MAX;
        }
        self.slice_end.iter().copied().min().unwrap_or(u64::MAX)
    }

    pub fn finish_stats(&mut self) {
        self.stats.timer_lateness_us = if self.lateness_n > 0 {
            self.lateness_sum / self.lateness_n as f64
        } else {
            0.0
        };
    }
}

/// Per-CPU runqueues: each task's CPU, chosen once in task order where the policy's
/// `select_cpu` says, else on the CPU holding the fewest tickets so far (the machine placement
/// `least-tickets`, shared with the simulator). Returns indices into the dispatcher's CPUs.
fn place_at_fork(policy: &mut Box<dyn Policy>, views: &[JobView], cpus: usize) -> Vec<usize> {
    let mut loads = vec![CpuLoad::default(); cpus];
    let placement = Placement::Least(Metric::Tickets);
    // Least-tickets placement draws nothing; the generator is only there for the signature.
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0);
    let mut next_ideal = 0;
    views
        .iter()
        .map(|v| {
            let c = policy.select_cpu(v, &loads).unwrap_or_else(|| {
                let fresh = TaskPlace {
                    new: true,
                    home: 0,
                    ideal: 0,
                    last: 0,
                    affinity: &[],
                };
                placement.select(&fresh, &loads, &mut next_ideal, &mut rng)
            });
            loads[c].tasks += 1;
            loads[c].weight += v.weight;
            loads[c].tickets += v.tickets;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_time_placement_is_least_tickets_in_task_order() {
        // xv6's test: tickets 30, 20, 10 on two CPUs put A alone on one CPU.
        let views: Vec<JobView> = [30.0, 20.0, 10.0]
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                let mut v = JobView::new(JobId(i as u32), 0.0, 1.0);
                v.tickets = t;
                v
            })
            .collect();
        let mut p = schedlab_policy::build("lottery", &Default::default(), 1).unwrap();
        assert_eq!(place_at_fork(&mut p, &views, 2), vec![0, 1, 1]);
    }
}
