//! An EEVDF-like scheduler (Linux 6.6 and later; Stoica & Abdel-Wahab 1995, as implemented by
//! Peter Zijlstra): of the jobs owed service, the one whose virtual deadline is earliest runs,
//! for one request of `slice` units of service. Weights are relative to nice 0 = 1, as in CFS.
//!
//! The model, in the terms of the kernel's `fair.c`:
//!
//! - Each runnable job (queued or running) has a virtual runtime `v_i`, which grows by
//!   `ran / w_i`.
//! - `V` is the load-weighted average of the `v_i` of the runnable jobs:
//!   `V = Σ w_i v_i / Σ w_i` (`avg_vruntime`). A running job counts with its service up to
//!   now, so `V` grows at `1 / Σ w_i` per unit of CPU time.
//! - Lag: `lag_i = w_i (V − v_i)`, the service the job is owed (> 0) or got ahead (< 0). A job
//!   is eligible when `lag_i >= 0`, that is when `v_i <= V`.
//! - Virtual deadline: `d_i = v_i + r_i / w_i`, set when a request starts. `r_i` is `slice`
//!   (`sched_base_slice`), or the job's class entry in `slices`: a custom slice, which Linux
//!   6.12 takes from `sched_attr.sched_runtime`. The next request starts when `v_i` reaches
//!   `d_i` (`update_deadline`). A preempted job keeps its deadline.
//! - `pick_next` takes the eligible queued job with the earliest `d_i`; ties go to the one
//!   queued first. If no queued job is eligible, it takes the least `v_i`. That can only happen
//!   with one global queue, where other CPUs' running jobs hold `V` up.
//! - The `slice` hook returns the rest of the request, `(d_i − v_i) w_i`, which is `r_i` for
//!   a fresh request.
//! - Placement (`place_entity`, PLACE_LAG): a new job starts with lag 0 (`v = V`) and a full
//!   request. A job or task coming back from I/O or think time gets back the virtual lag
//!   `vl = V − v` it had when it left. That lag is clamped to `±2 r / w`
//!   (`update_entity_lag`), is not decayed however long the job slept, and is inflated by
//!   `(W + w_i) / W` so that the job still has it once its own weight is in the average
//!   (`W` = runnable weight before it joins). A job joining an empty runqueue starts at
//!   `V` with lag 0. A waking job gets a fresh request, `d = v + r / w`.
//! - Wake-up preemption (`check_preempt_wakeup_fair`: preempt iff `pick_eevdf() == waking`):
//!   a waking or arriving job takes the CPU when it is what `pick_next` would choose among the
//!   queued jobs and the running one. So it must be eligible, have the earliest deadline of
//!   the eligible queued jobs, and have a strictly earlier deadline than the running job, unless
//!   the running job is no longer eligible. With `run_to_parity` (the kernel's default
//!   RUN_TO_PARITY), a running job that is still eligible is never preempted: it finishes its
//!   request, or is preempted on a later wake-up after its `v` has passed `V`.
//! - Migration: the job takes its lag, not its absolute `v`, and the rest of its request. On
//!   the new runqueue, `v = V' − vl (W' + w) / W'` and `d = v + (d_old − v_old)` (the
//!   kernel's relative deadline). `dequeue(Migrate)` returns both in the job's `Carry`, which
//!   the engine hands to the new runqueue's `enqueue(Migrated)`.
//! - A task's next job (a closed client after thinking) wakes with the lag its previous job
//!   had at exit, as the kernel's thread would. A new task starts at 0.
//! - Entitlement: the weight.
//!
//! Not modelled:
//! - PLACE_DEADLINE_INITIAL (a new task's first request is half a slice);
//! - DELAY_DEQUEUE (6.12: a sleeper with negative lag stays queued until its lag is paid);
//! - PREEMPT_SHORT (6.12: a waking job with a shorter slice may cut a protected one short);
//! - group scheduling, and the tick.
//!
//! The running job's service since it was picked is estimated from the clock: `now − picked`.
//! With a context-switch cost this counts the switch as service until the job is charged.
//!
//! Data structures: two binary heaps with lazy deletion. Eligible jobs are ordered by
//! `(d, enqueue order)` and the others by `v`. `V` can move back when a job with positive
//! lag joins or one with negative lag leaves, so a job can move between the heaps more than
//! once. Each move is O(log n), and a job moves only when `V` crosses its `v`, so an operation
//! is O(log n) amortised in practice. The kernel gets a strict O(log n) from an rbtree
//! augmented with each subtree's minimum deadline.

use std::cell::RefCell;
use std::collections::BinaryHeap;

use crate::{
    Carry, Dequeue, Enqueue, JobId, JobView, ParamDefault, ParamInfo, ParamKind, Params, Policy,
    PolicyInfo, SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "eevdf",
    aliases: &[],
    summary: "EEVDF-like (Linux 6.6+): of the jobs with lag >= 0 (vruntime <= the weighted \
              average V), the earliest virtual deadline (vruntime + slice / weight) runs for one \
              slice; weights from nice; lag kept across sleeps and migrations.",
    params: &[
        ParamInfo {
            name: "slice",
            kind: ParamKind::Positive,
            unit: Unit::Work,
            default: ParamDefault::Num(3.0),
            help: "service per request; the virtual deadline is vruntime + slice / weight \
                   (sched_base_slice)",
        },
        ParamInfo {
            name: "slices",
            kind: ParamKind::List,
            unit: Unit::Work,
            default: ParamDefault::Derived("slice for every class"),
            help: "a custom slice per class, in class order (sched_attr.sched_runtime, Linux \
                   6.12); classes past the end of the list use slice",
        },
        ParamInfo {
            name: "run_to_parity",
            kind: ParamKind::Bool,
            unit: Unit::Bool,
            default: ParamDefault::Bool(true),
            help: "a running job that is still eligible is not preempted by a wake-up before \
                   its slice ends (RUN_TO_PARITY)",
        },
    ],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    let mut e = Eevdf::new(p.number("slice"), p.flag("run_to_parity"));
    e.class_slices = p.list("slices").unwrap_or_default();
    Ok(Box::new(e))
}

/// `v <= avg` up to rounding: a job with lag exactly 0 is eligible.
fn eligible(v: f64, avg: f64) -> bool {
    v <= avg + 1e-9 * (1.0 + avg.abs())
}

/// The load-weighted average virtual runtime of the runnable jobs, queued and running.
/// Kept relative to a zero point for precision (the kernel's `avg_vruntime` keys).
#[derive(Clone, Copy, Debug, Default)]
struct Avg {
    zero: f64,
    /// Σ w_i (v_i − zero), with the v_i of running jobs as last charged.
    sum: f64,
    weight: f64,
    count: usize,
    /// Running jobs and the sum of the times they were picked (or last charged): their
    /// service since then is `running * now − since`.
    running: f64,
    since: f64,
    /// V while nothing is runnable: where the last job left it.
    idle: f64,
}

impl Avg {
    fn at(&self, now: f64) -> f64 {
        if self.count == 0 {
            return self.idle;
        }
        self.zero + (self.sum + (self.running * now - self.since)) / self.weight
    }
    fn add(&mut self, w: f64, v: f64) {
        if self.count == 0 {
            self.zero = v;
        }
        self.sum += w * (v - self.zero);
        self.weight += w;
        self.count += 1;
    }
    /// Removes a job whose charged vruntime is `v` and whose V-contribution is now settled.
    fn remove(&mut self, w: f64, v: f64, avg_now: f64) {
        self.count -= 1;
        if self.count == 0 {
            *self = Avg {
                idle: avg_now,
                ..Avg::default()
            };
            return;
        }
        self.sum -= w * (v - self.zero);
        self.weight -= w;
    }
    /// Moves the zero point to the charged average (V minus running progress).
    fn rebase(&mut self) {
        if self.count > 0 {
            self.zero += self.sum / self.weight;
            self.sum = 0.0;
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum State {
    /// Not runnable here (new, asleep, gone or moved away).
    #[default]
    Gone,
    Queued,
    /// Picked at (or last charged at) `since`.
    Running {
        since: f64,
    },
}

#[derive(Clone, Copy, Debug, Default)]
struct Entity {
    vruntime: f64,
    deadline: f64,
    weight: f64,
    /// Service per request.
    slice: f64,
    task: u32,
    /// Enqueue order: breaks deadline ties.
    seq: i64,
    /// Heap entries carrying another stamp are dead.
    stamp: u32,
    state: State,
}

/// The heaps' entries: a min-heap on (key, seq); `id` is the slot.
type Entry = crate::keyed::Entry<u32>;

#[derive(Default)]
struct Queues {
    /// Eligible when last looked at, by (deadline, seq).
    eligible: BinaryHeap<Entry>,
    /// Not eligible when last looked at, by (vruntime, seq).
    waiting: BinaryHeap<Entry>,
}

impl Queues {
    fn live(slots: &[Entity], e: &Entry) -> bool {
        let s = &slots[e.id as usize];
        s.state == State::Queued && s.stamp == e.stamp
    }
    fn push(&mut self, slots: &[Entity], id: u32, avg: f64) {
        let s = &slots[id as usize];
        let (heap, key) = if eligible(s.vruntime, avg) {
            (&mut self.eligible, s.deadline)
        } else {
            (&mut self.waiting, s.vruntime)
        };
        heap.push(Entry {
            key,
            seq: s.seq,
            id,
            stamp: s.stamp,
        });
    }
    /// Sorts the jobs whose eligibility changed since V last moved; afterwards the top of
    /// `eligible` is the eligible job with the earliest deadline. Drops dead entries on top.
    fn settle(&mut self, slots: &[Entity], avg: f64) {
        while let Some(e) = self.waiting.peek().copied() {
            if Queues::live(slots, &e) && !eligible(e.key, avg) {
                break;
            }
            self.waiting.pop();
            if Queues::live(slots, &e) {
                let key = slots[e.id as usize].deadline;
                self.eligible.push(Entry { key, ..e });
            }
        }
        while let Some(e) = self.eligible.peek().copied() {
            if !Queues::live(slots, &e) {
                self.eligible.pop();
                continue;
            }
            let v = slots[e.id as usize].vruntime;
            if eligible(v, avg) {
                break;
            }
            // V moved back below it: a job owed service joined, or one that ran ahead left.
            self.eligible.pop();
            self.waiting.push(Entry { key: v, ..e });
        }
    }
    fn pop_waiting(&mut self, slots: &[Entity]) -> Option<u32> {
        while let Some(e) = self.waiting.pop() {
            if Queues::live(slots, &e) {
                return Some(e.id);
            }
        }
        None
    }
}

pub struct Eevdf {
    slice: f64,
    class_slices: Vec<f64>,
    run_to_parity: bool,
    slots: Vec<Entity>,
    /// Interior mutability so that `preempts` (&self) can settle the heaps; settling never
    /// changes what is queued, only which heap holds it.
    queues: RefCell<Queues>,
    queued: usize,
    avg: Avg,
    seq: i64,
    /// Virtual lag each task left this runqueue with (NaN: none).
    task_lag: Vec<f64>,
}

impl Eevdf {
    pub fn new(slice: f64, run_to_parity: bool) -> Eevdf {
        Eevdf {
            slice,
            class_slices: Vec::new(),
            run_to_parity,
            slots: Vec::new(),
            queues: RefCell::new(Queues::default()),
            queued: 0,
            avg: Avg::default(),
            seq: 0,
            task_lag: Vec::new(),
        }
    }

    /// V now.
    fn avg_vruntime(&self, now: f64) -> f64 {
        self.avg.at(now)
    }

    /// The job's vruntime now (a running job's grows with the clock until it is charged).
    fn vruntime_now(&self, i: usize, now: f64) -> f64 {
        let e = &self.slots[i];
        match e.state {
            State::Running { since } => e.vruntime + (now - since).max(0.0) / e.weight,
            _ => e.vruntime,
        }
    }

    fn slice_of(&self, job: &JobView) -> f64 {
        self.class_slices
            .get(job.class as usize)
            .copied()
            .unwrap_or(self.slice)
    }

    /// `update_entity_lag`: at most two requests' worth either way.
    fn clamp_lag(vlag: f64, slice: f64, w: f64) -> f64 {
        let limit = 2.0 * slice / w;
        vlag.clamp(-limit, limit)
    }

    fn remember(&mut self, task: u32, vlag: f64) {
        let t = task as usize;
        if t >= self.task_lag.len() {
            self.task_lag.resize(t + 1, f64::NAN);
        }
        self.task_lag[t] = vlag;
    }

    fn recall(&mut self, task: u32) -> f64 {
        match self.task_lag.get_mut(task as usize) {
            Some(l) if !l.is_nan() => std::mem::replace(l, f64::NAN),
            _ => 0.0,
        }
    }

    /// Takes a runnable job out of the runqueue (queued or running); returns its clamped
    /// virtual lag, V − v, with V taken before it leaves (`update_entity_lag`).
    fn leave(&mut self, i: usize, now: f64) -> f64 {
        let avg = self.avg_vruntime(now);
        let e = self.slots[i];
        let v = self.vruntime_now(i, now);
        match e.state {
            State::Gone => return 0.0,
            State::Queued => self.queued -= 1,
            State::Running { since } => {
                self.avg.running -= 1.0;
                self.avg.since -= since;
            }
        }
        self.slots[i].state = State::Gone;
        self.slots[i].stamp = e.stamp.wrapping_add(1);
        self.avg.remove(e.weight, e.vruntime, v);
        Eevdf::clamp_lag(avg - v, e.slice, e.weight)
    }

    /// Joins the runqueue with virtual lag `vlag` (`place_entity`); `request`: the rest of a
    /// request carried over (migration), else a fresh one.
    fn place(&mut self, job: &JobView, now: f64, vlag: f64, request: Option<f64>) {
        let i = job.id.index();
        let w = job.weight;
        let avg = self.avg_vruntime(now);
        let lag = if self.avg.count == 0 {
            0.0
        } else {
            vlag * (self.avg.weight + w) / self.avg.weight
        };
        let v = avg - lag;
        let slice = self.slice_of(job);
        let e = &mut self.slots[i];
        e.weight = w;
        e.slice = slice;
        e.task = job.task;
        e.vruntime = v;
        e.deadline = v + request.unwrap_or(slice / w);
        self.avg.add(w, v);
    }

    fn push(&mut self, i: usize, now: f64) {
        self.seq += 1;
        let e = &mut self.slots[i];
        e.seq = self.seq;
        e.stamp = e.stamp.wrapping_add(1);
        e.state = State::Queued;
        self.queued += 1;
        let avg = self.avg_vruntime(now);
        self.queues.get_mut().push(&self.slots, i as u32, avg);
    }
}

impl Policy for Eevdf {
    fn name(&self) -> &'static str {
        "eevdf"
    }

    fn enqueue(&mut self, job: &JobView, now: f64, why: Enqueue<'_>) {
        let i = job.id.index();
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Entity::default());
        }
        match (why, self.slots[i].state) {
            (Enqueue::Expired | Enqueue::Preempted { .. }, State::Running { since }) => {
                // Charged already: back in the queue with its deadline (renewed if used up).
                self.avg.running -= 1.0;
                self.avg.since -= since;
                self.slots[i].state = State::Gone;
            }
            (_, state) => {
                if state != State::Gone {
                    self.leave(i, now);
                }
                match why {
                    Enqueue::Arrival | Enqueue::Expired | Enqueue::Preempted { .. } => {
                        self.recall(job.task);
                        self.place(job, now, 0.0, None);
                    }
                    Enqueue::Wakeup => {
                        let vlag = self.recall(job.task);
                        self.place(job, now, vlag, None);
                    }
                    Enqueue::Migrated(c) => {
                        self.recall(job.task);
                        let request = (!c.request.is_nan()).then_some(c.request);
                        self.place(job, now, c.lag, request);
                    }
                }
            }
        }
        self.push(i, now);
    }

    fn dequeue(&mut self, job: &JobView, now: f64, why: Dequeue) -> Carry {
        let i = job.id.index();
        if self.slots.get(i).is_none_or(|e| e.state == State::Gone) {
            // Not runnable here: a sleeper that wakes elsewhere, or a task's next job, takes
            // the task's remembered lag along.
            return match why {
                Dequeue::Migrate => Carry {
                    lag: self.recall(job.task),
                    ..Carry::NONE
                },
                Dequeue::Sleep | Dequeue::Exit => Carry::NONE,
            };
        }
        let e = self.slots[i];
        let v = self.vruntime_now(i, now);
        let vlag = self.leave(i, now);
        // A sleeper or a task's next job (after think time) wakes with this lag; a migrating
        // job takes it along.
        self.remember(job.task, vlag);
        match why {
            Dequeue::Migrate => Carry {
                lag: vlag,
                request: e.deadline - v,
                ..Carry::NONE
            },
            Dequeue::Sleep | Dequeue::Exit => Carry::NONE,
        }
    }

    fn pick_next(&mut self, now: f64) -> Option<JobId> {
        if self.queued == 0 {
            return None;
        }
        let avg = self.avg_vruntime(now);
        self.avg.rebase();
        let q = self.queues.get_mut();
        q.settle(&self.slots, avg);
        let id = match q.eligible.pop() {
            Some(e) => e.id,
            None => q.pop_waiting(&self.slots)?,
        };
        let e = &mut self.slots[id as usize];
        e.state = State::Running { since: now };
        e.stamp = e.stamp.wrapping_add(1);
        self.queued -= 1;
        self.avg.running += 1.0;
        self.avg.since += now;
        Some(JobId(id))
    }

    fn slice(&self, job: &JobView, now: f64) -> Option<f64> {
        let i = job.id.index();
        let Some(e) = self.slots.get(i) else {
            return Some(self.slice);
        };
        let v = self.vruntime_now(i, now);
        Some(((e.deadline - v) * e.weight).max(0.0))
    }

    fn preempts(&self, incoming: &JobView, running: &JobView, now: f64) -> bool {
        let (a, b) = (incoming.id.index(), running.id.index());
        let (Some(inc), Some(run)) = (self.slots.get(a), self.slots.get(b)) else {
            return false;
        };
        if inc.state != State::Queued {
            return false;
        }
        let avg = self.avg_vruntime(now);
        if !eligible(inc.vruntime, avg) {
            return false;
        }
        let run_eligible = eligible(self.vruntime_now(b, now), avg);
        if run_eligible && (self.run_to_parity || inc.deadline >= run.deadline) {
            return false;
        }
        let mut q = self.queues.borrow_mut();
        q.settle(&self.slots, avg);
        q.eligible.peek().map(|e| e.id as usize) == Some(a)
    }

    fn charge(&mut self, job: &JobView, ran: f64, now: f64) {
        let Some(e) = self.slots.get_mut(job.id.index()) else {
            return;
        };
        if e.state == State::Gone {
            return;
        }
        let dv = ran / e.weight;
        e.vruntime += dv;
        self.avg.sum += e.weight * dv;
        if let State::Running { since } = e.state {
            // Its service so far is now in `vruntime`; the clock counts from here.
            self.avg.since += now - since;
            e.state = State::Running { since: now };
        }
        if e.vruntime >= e.deadline - 1e-9 * (1.0 + e.deadline.abs()) {
            // The request is served: the next one starts here (`update_deadline`).
            e.deadline = e.vruntime + e.slice / e.weight;
        }
        if e.state == State::Queued {
            // Charged while queued (the simulator never does): its heap entry is stale.
            e.stamp = e.stamp.wrapping_add(1);
            let avg = self.avg_vruntime(now);
            let i = job.id.index() as u32;
            self.queues.get_mut().push(&self.slots, i, avg);
        }
    }

    fn len(&self) -> usize {
        self.queued
    }

    fn entitlement(&self, job: &JobView) -> f64 {
        job.weight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, weight: f64, task: u32) -> JobView {
        let mut v = JobView::new(JobId(id), 0.0, 100.0);
        v.weight = weight;
        v.task = task;
        v
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn eligibility_comes_before_an_earlier_deadline() {
        // Slice 2; A weight 3, B weight 1, both new at 0: v = 0, deadlines 2/3 and 2.
        let mut p = Eevdf::new(2.0, true);
        let (a, b) = (job(0, 3.0, 0), job(1, 1.0, 1));
        p.enqueue(&a, 0.0, Enqueue::Arrival);
        p.enqueue(&b, 0.0, Enqueue::Arrival);
        assert!(close(p.slots[0].deadline, 2.0 / 3.0) && close(p.slots[1].deadline, 2.0));
        assert_eq!(p.pick_next(0.0), Some(JobId(0)));
        // A runs its request: (2/3 - 0) * 3 = 2 units.
        assert!(close(p.slice(&a, 0.0).unwrap(), 2.0));
        // Mid-slice V counts A's progress: at 1, v_A = 1/3, V = 3 * (1/3) / 4 = 1/4.
        assert!(close(p.avg_vruntime(1.0), 0.25));
        p.charge(&a, 2.0, 2.0);
        // v_A = 2/3 reached its deadline: the next request ends at 4/3.
        assert!(close(p.slots[0].vruntime, 2.0 / 3.0) && close(p.slots[0].deadline, 4.0 / 3.0));
        p.enqueue(&a, 2.0, Enqueue::Expired);
        // V = (3 * 2/3 + 0) / 4 = 1/2 < 2/3: A is not eligible though 4/3 < 2; B runs.
        assert!(close(p.avg_vruntime(2.0), 0.5));
        assert_eq!(p.pick_next(2.0), Some(JobId(1)));
        assert!(close(p.slice(&b, 2.0).unwrap(), 2.0));
        p.charge(&b, 2.0, 4.0);
        p.enqueue(&b, 4.0, Enqueue::Expired);
        // V = (2 + 2) / 4 = 1 >= 2/3: A is eligible again, B (v = 2) is not.
        assert_eq!(p.pick_next(4.0), Some(JobId(0)));
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn lag_survives_a_sleep() {
        // Slice 2. H and S (weight 1) new at 0, both deadline 2: H was queued first.
        let mut p = Eevdf::new(2.0, true);
        let (h, s) = (job(0, 1.0, 0), job(1, 1.0, 1));
        p.enqueue(&h, 0.0, Enqueue::Arrival);
        p.enqueue(&s, 0.0, Enqueue::Arrival);
        assert_eq!(p.pick_next(0.0), Some(JobId(0)));
        p.charge(&h, 2.0, 2.0);
        p.enqueue(&h, 2.0, Enqueue::Expired);
        // V = 1: S (v 0) runs one unit and blocks at 3 with V = (2 + 1) / 2 = 1.5, lag 0.5.
        assert_eq!(p.pick_next(2.0), Some(JobId(1)));
        p.charge(&s, 1.0, 3.0);
        p.dequeue(&s, 3.0, Dequeue::Sleep);
        assert!(close(p.task_lag[1], 0.5));
        assert_eq!(p.pick_next(3.0), Some(JobId(0)));
        p.charge(&h, 2.0, 5.0);
        p.enqueue(&h, 5.0, Enqueue::Expired);
        assert_eq!(p.pick_next(5.0), Some(JobId(0)));
        // At 6 H is at v = 5 = V. S wakes with its lag, inflated by (W + w) / W = 2:
        // v_S = 5 - 0.5 * 2 = 4, deadline 6; then V = (5 + 4) / 2 = 4.5 and S's lag is 0.5.
        p.enqueue(&s, 6.0, Enqueue::Wakeup);
        assert!(close(p.slots[1].vruntime, 4.0) && close(p.slots[1].deadline, 6.0));
        assert!(close(p.avg_vruntime(6.0) - p.slots[1].vruntime, 0.5));
        // H (v 5 > V 4.5) is no longer eligible, so even run-to-parity lets S in.
        let mut h_now = h.clone();
        h_now.attained = 5.0;
        assert!(p.preempts(&s, &h_now, 6.0));
    }

    #[test]
    fn wakeup_preemption_and_run_to_parity() {
        // Slice 2. J0 (weight 1) runs from 0 with deadline 2. J1 (weight 4) arrives at 1:
        // V = v_0 = 1, v_1 = 1, deadline 1 + 2/4 = 1.5 < 2. Both eligible (lag 0).
        for parity in [false, true] {
            let mut p = Eevdf::new(2.0, parity);
            let (j0, j1) = (job(0, 1.0, 0), job(1, 4.0, 1));
            p.enqueue(&j0, 0.0, Enqueue::Arrival);
            assert_eq!(p.pick_next(0.0), Some(JobId(0)));
            p.enqueue(&j1, 1.0, Enqueue::Arrival);
            assert!(close(p.slots[1].deadline, 1.5));
            assert!(close(p.avg_vruntime(1.0), 1.0));
            assert_eq!(p.preempts(&j1, &j0, 1.0), !parity);
        }
        // A later deadline never preempts an eligible running job.
        let mut p = Eevdf::new(2.0, false);
        let (j0, j1) = (job(0, 1.0, 0), job(1, 1.0, 1));
        p.enqueue(&j0, 0.0, Enqueue::Arrival);
        p.pick_next(0.0);
        p.enqueue(&j1, 1.0, Enqueue::Arrival);
        assert!(!p.preempts(&j1, &j0, 1.0));
    }

    #[test]
    fn migration_carries_lag_and_request_not_vruntime() {
        // Runqueue A, slice 2: X and Y (weight 1) new at 0; X runs to 2 and is requeued.
        let mut a = Eevdf::new(2.0, true);
        let (x, y, z) = (job(0, 1.0, 0), job(1, 1.0, 1), job(2, 2.0, 2));
        a.enqueue(&x, 0.0, Enqueue::Arrival);
        a.enqueue(&y, 0.0, Enqueue::Arrival);
        a.pick_next(0.0);
        a.charge(&x, 2.0, 2.0);
        a.enqueue(&x, 2.0, Enqueue::Expired);
        // V_A = 1, Y at 0: lag 1, request 2 left.
        let carry = a.dequeue(&y, 2.0, Dequeue::Migrate);
        assert!(close(carry.lag, 1.0) && close(carry.request, 2.0));
        assert_eq!(a.len(), 1);
        assert!(close(a.avg_vruntime(2.0), 2.0));
        // Runqueue B: Z (weight 2) runs since 0, so at 2 its v = 1 = V_B, W_B = 2.
        let mut b = Eevdf::new(2.0, true);
        b.enqueue(&z, 0.0, Enqueue::Arrival);
        b.pick_next(0.0);
        b.enqueue(&y, 2.0, Enqueue::Migrated(&carry));
        // v_Y = 1 - 1 * (2 + 1) / 2 = -0.5; deadline -0.5 + 2 = 1.5; V_B = (2 - 0.5) / 3 = 0.5.
        assert!(close(b.slots[1].vruntime, -0.5) && close(b.slots[1].deadline, 1.5));
        assert!(close(b.avg_vruntime(2.0) - b.slots[1].vruntime, 1.0));
        // Carrying nothing, the job lands with lag 0 and a fresh request.
        let mut c = Eevdf::new(2.0, true);
        c.enqueue(&z, 0.0, Enqueue::Arrival);
        c.pick_next(0.0);
        c.enqueue(&y, 2.0, Enqueue::Migrated(&Carry::NONE));
        assert!(close(c.slots[1].vruntime, 1.0) && close(c.slots[1].deadline, 3.0));
    }

    #[test]
    fn lag_is_clamped_to_two_slices() {
        // Slice 1: A runs 10 units while B waits; at exit V = 5, A's lag -5 clamps to -2.
        let mut p = Eevdf::new(1.0, true);
        let (a, b) = (job(0, 1.0, 0), job(1, 1.0, 1));
        p.enqueue(&a, 0.0, Enqueue::Arrival);
        p.enqueue(&b, 0.0, Enqueue::Arrival);
        p.pick_next(0.0);
        p.charge(&a, 10.0, 10.0);
        p.dequeue(&a, 10.0, Dequeue::Exit);
        assert!(close(p.task_lag[0], -2.0));
        // Its task's next job wakes behind B: v = 0 + 2 * 2 = 4, V = 2, lag -2.
        let a2 = job(2, 1.0, 0);
        p.enqueue(&a2, 10.0, Enqueue::Wakeup);
        assert!(close(p.slots[2].vruntime, 4.0));
        assert!(close(p.avg_vruntime(10.0), 2.0));
        assert_eq!(p.pick_next(10.0), Some(JobId(1)));
    }

    #[test]
    fn a_sleeper_that_wakes_elsewhere_takes_the_lag_it_slept_with() {
        // As in `lag_is_clamped_to_two_slices`, A leaves at 10 with lag -2 (clamped), this time
        // to sleep; it wakes on another runqueue: the one it left hands over that lag, once.
        let mut p = Eevdf::new(1.0, true);
        let (a, b) = (job(0, 1.0, 0), job(1, 1.0, 1));
        p.enqueue(&a, 0.0, Enqueue::Arrival);
        p.enqueue(&b, 0.0, Enqueue::Arrival);
        p.pick_next(0.0);
        p.charge(&a, 10.0, 10.0);
        p.dequeue(&a, 10.0, Dequeue::Sleep);
        let carry = p.dequeue(&a, 12.0, Dequeue::Migrate);
        assert!(close(carry.lag, -2.0) && carry.request.is_nan());
        assert!(close(p.dequeue(&a, 12.0, Dequeue::Migrate).lag, 0.0));
        assert_eq!(p.len(), 1);
    }

    /// The heaps against a brute-force scan, over random arrivals, runs, sleeps, wake-ups,
    /// exits and preemption checks on one CPU.
    #[test]
    fn random_operations_match_a_brute_force_scan() {
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        let weights = [0.25, 0.5, 1.0, 2.0, 3.0, 88761.0 / 1024.0];
        for parity in [false, true] {
            let mut p = Eevdf::new(3.0, parity);
            let n = 24;
            let mut views: Vec<JobView> = (0..n)
                .map(|i| job(i as u32, weights[i % weights.len()], i as u32))
                .collect();
            // 0: not here, 1: runnable (queued or running), 2: asleep.
            let mut state = vec![0u8; n];
            let mut running: Option<usize> = None;
            let mut now = 0.0;
            let brute_avg = |p: &Eevdf, state: &[u8], now: f64| {
                let (mut s, mut w) = (0.0, 0.0);
                for i in (0..state.len()).filter(|&i| state[i] == 1) {
                    s += p.slots[i].weight * p.vruntime_now(i, now);
                    w += p.slots[i].weight;
                }
                s / w
            };
            let brute_pick = |p: &Eevdf, state: &[u8], running: Option<usize>, avg: f64| {
                let queued: Vec<usize> = (0..state.len())
                    .filter(|&i| state[i] == 1 && Some(i) != running)
                    .collect();
                let key = |i: &usize| (p.slots[*i].deadline, p.slots[*i].seq);
                let best = queued
                    .iter()
                    .filter(|&&i| eligible(p.slots[i].vruntime, avg))
                    .min_by(|a, b| key(a).partial_cmp(&key(b)).unwrap());
                best.or_else(|| {
                    queued
                        .iter()
                        .min_by(|a, b| p.slots[**a].vruntime.total_cmp(&p.slots[**b].vruntime))
                })
                .copied()
            };
            for _ in 0..20_000 {
                // Something arrives or wakes.
                if next() < 0.4 {
                    let i = (next() * n as f64) as usize;
                    if state[i] != 1 {
                        let why = if state[i] == 2 {
                            Enqueue::Wakeup
                        } else {
                            Enqueue::Arrival
                        };
                        p.enqueue(&views[i], now, why);
                        state[i] = 1;
                        if let Some(r) = running {
                            let avg = brute_avg(&p, &state, now);
                            assert!((p.avg_vruntime(now) - avg).abs() < 1e-7 * (1.0 + avg.abs()));
                            let run_ok = eligible(p.vruntime_now(r, now), avg);
                            let inc_ok = eligible(p.slots[i].vruntime, avg);
                            let expect = inc_ok
                                && !(run_ok
                                    && (parity || p.slots[i].deadline >= p.slots[r].deadline))
                                && brute_pick(&p, &state, running, avg) == Some(i);
                            assert_eq!(p.preempts(&views[i], &views[r], now), expect);
                        }
                    }
                }
                match running {
                    None => {
                        let expect = if state.contains(&1) {
                            let avg = brute_avg(&p, &state, now);
                            brute_pick(&p, &state, None, avg)
                        } else {
                            None
                        };
                        let got = p.pick_next(now).map(|j| j.index());
                        assert_eq!(got, expect);
                        running = got;
                        if got.is_none() {
                            now += next();
                        }
                    }
                    Some(r) => {
                        let full = p.slice(&views[r], now).unwrap();
                        assert!(full > 0.0 && full <= 3.0 + 1e-9);
                        let ran = if next() < 0.5 { full } else { full * next() };
                        now += ran;
                        views[r].attained += ran;
                        p.charge(&views[r], ran, now);
                        let u = next();
                        if u < 0.15 {
                            p.dequeue(&views[r], now, Dequeue::Sleep);
                            state[r] = 2;
                        } else if u < 0.25 {
                            p.dequeue(&views[r], now, Dequeue::Exit);
                            state[r] = 0;
                        } else {
                            let why = if ran < full {
                                Enqueue::Preempted { ran }
                            } else {
                                Enqueue::Expired
                            };
                            p.enqueue(&views[r], now, why);
                        }
                        running = None;
                    }
                }
                assert_eq!(
                    p.len(),
                    state.iter().filter(|&&s| s == 1).count() - running.iter().count()
                );
            }
        }
    }
}
