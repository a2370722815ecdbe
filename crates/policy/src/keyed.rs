//! The two queues most policies are made of: a FIFO and a min-heap on a key, and the rule
//! every sliced policy follows: a job preempted by a more important one goes back to the head
//! of its level with the rest of its slice; only an expired slice sends it to the tail with a
//! new one.
//!
//! Both queues support removal of an arbitrary job (migration) by lazy deletion: each job slot
//! carries a stamp, and heap or queue entries whose stamp is stale are skipped.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use crate::{Carry, Dequeue, Enqueue, JobId};

/// The shortest slice handed out: a preempted job whose slice was all but used up still gets
/// a turn that ends at once (and then a new slice).
const MIN_SLICE: f64 = 1e-12;

/// What preempted jobs have used of their current slice. Only a preemption creates an entry
/// (its `Enqueue::Preempted` says how much the job ran), so a policy that is never preempted
/// keeps nothing per job and pays a null check per enqueue and per slice.
#[derive(Default)]
pub struct SliceUse {
    /// Allocated at the first preemption, so that the policy object stays small in cache:
    /// boxed, the field is one word instead of a map header (measured 1-2% on FCFS runs).
    #[allow(clippy::box_collection)]
    partial: Option<Box<HashMap<JobId, f64>>>,
}

impl SliceUse {
    /// A preempted job adds what it ran; a migrated one keeps what it carries; an expired,
    /// new or waking job starts a new slice.
    #[inline]
    pub fn enqueue(&mut self, id: JobId, why: Enqueue<'_>) {
        if self.keeps_slice(why) {
            self.enqueue_rare(id, why);
        }
    }
    /// Whether an enqueue for `why` has anything to record or forget: a preemption, a
    /// migration with part of a slice used, or any enqueue while some slice is partly used.
    #[inline]
    pub fn keeps_slice(&self, why: Enqueue<'_>) -> bool {
        match why {
            Enqueue::Preempted { .. } => true,
            Enqueue::Migrated(c) if c.used > 0.0 => true,
            _ => self.partial.is_some(),
        }
    }
    // Kept out of the hot path: the common enqueue touches no map.
    #[cold]
    #[inline(never)]
    fn enqueue_rare(&mut self, id: JobId, why: Enqueue<'_>) {
        match why {
            Enqueue::Preempted { ran } => {
                let partial = self.partial.get_or_insert_with(Box::default);
                *partial.entry(id).or_insert(0.0) += ran;
            }
            Enqueue::Migrated(c) if c.used > 0.0 => {
                self.partial
                    .get_or_insert_with(Box::default)
                    .insert(id, c.used);
            }
            _ => {
                if let Some(partial) = &mut self.partial {
                    partial.remove(&id);
                    if partial.is_empty() {
                        self.partial = None;
                    }
                }
            }
        }
    }
    /// What a job that leaves the runqueue has used of its slice (it forgets the job).
    #[inline]
    pub fn leave(&mut self, id: JobId) -> f64 {
        if self.partial.is_none() {
            return 0.0;
        }
        self.leave_rare(id)
    }
    #[cold]
    #[inline(never)]
    fn leave_rare(&mut self, id: JobId) -> f64 {
        let Some(partial) = &mut self.partial else {
            return 0.0;
        };
        let used = partial.remove(&id).unwrap_or(0.0);
        if partial.is_empty() {
            self.partial = None;
        }
        used
    }
    /// What a job that leaves the runqueue carries: the part of its slice it has used.
    #[inline]
    pub fn carry(&mut self, id: JobId) -> Carry {
        Carry {
            used: self.leave(id),
            ..Carry::NONE
        }
    }
    /// What is left of a slice of `quantum`.
    #[inline]
    pub fn rest(&self, id: JobId, quantum: f64) -> f64 {
        match &self.partial {
            None => quantum,
            Some(partial) => Self::rest_rare(partial, id, quantum),
        }
    }
    #[cold]
    #[inline(never)]
    fn rest_rare(partial: &HashMap<JobId, f64>, id: JobId, quantum: f64) -> f64 {
        (quantum - partial.get(&id).copied().unwrap_or(0.0)).max(MIN_SLICE)
    }
}

/// Per-slot stamps: an entry is live while its stamp equals the slot's current one.
#[derive(Default)]
struct Stamps {
    current: Vec<u32>,
    live: usize,
}

impl Stamps {
    fn issue(&mut self, id: JobId) -> u32 {
        let i = id.index();
        if i >= self.current.len() {
            self.current.resize(i + 1, 0);
        }
        // Odd stamps are live, even ones dead.
        self.current[i] = (self.current[i] | 1).wrapping_add(2);
        self.live += 1;
        self.current[i]
    }
    fn is_live(&self, id: JobId, stamp: u32) -> bool {
        self.current[id.index()] == stamp
    }
    fn kill(&mut self, id: JobId) -> bool {
        match self.current.get_mut(id.index()) {
            Some(s) if *s & 1 == 1 => {
                *s = s.wrapping_add(1);
                self.live -= 1;
                true
            }
            _ => false,
        }
    }
}

/// First in, first out; `push_front` serves a job next (a preempted job).
#[derive(Default)]
pub struct FifoQueue {
    queue: VecDeque<(JobId, u32)>,
    stamps: Stamps,
}

impl FifoQueue {
    pub fn push_back(&mut self, id: JobId) {
        let s = self.stamps.issue(id);
        self.queue.push_back((id, s));
    }
    pub fn push_front(&mut self, id: JobId) {
        let s = self.stamps.issue(id);
        self.queue.push_front((id, s));
    }
    pub fn pop(&mut self) -> Option<JobId> {
        while let Some((id, s)) = self.queue.pop_front() {
            if self.stamps.is_live(id, s) {
                self.stamps.kill(id);
                return Some(id);
            }
        }
        None
    }
    pub fn remove(&mut self, id: JobId) -> bool {
        self.stamps.kill(id)
    }
    pub fn len(&self) -> usize {
        self.stamps.live
    }
    pub fn is_empty(&self) -> bool {
        self.stamps.live == 0
    }
    /// Live jobs in queue order (for boosts and balancing; O(n)).
    pub fn drain_live(&mut self) -> Vec<JobId> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(id) = self.pop() {
            out.push(id);
        }
        out
    }
}

/// A heap entry ordered smallest key first, ties by `seq` (push order; negative for entries
/// pushed to the front); `stamp` lets the owner drop stale entries lazily. Shared by the heaps
/// of this module and of EEVDF.
#[derive(Clone, Copy)]
pub(crate) struct Entry<I> {
    pub(crate) key: f64,
    pub(crate) seq: i64,
    pub(crate) id: I,
    pub(crate) stamp: u32,
}

impl<I> PartialEq for Entry<I> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl<I> Eq for Entry<I> {}
impl<I> PartialOrd for Entry<I> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<I> Ord for Entry<I> {
    // Reversed: BinaryHeap is a max-heap and we want the smallest key, ties first come.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key
            .total_cmp(&self.key)
            .then_with(|| o.seq.cmp(&self.seq))
    }
}

/// Smallest key first; equal keys in the order they were pushed, except that `push_front`
/// puts a job ahead of every equal key.
#[derive(Default)]
pub struct KeyedQueue {
    heap: BinaryHeap<Entry<JobId>>,
    stamps: Stamps,
    seq: i64,
    front: i64,
}

impl KeyedQueue {
    pub fn push(&mut self, id: JobId, key: f64) {
        self.seq += 1;
        self.insert(id, key, self.seq);
    }
    pub fn push_front(&mut self, id: JobId, key: f64) {
        self.front -= 1;
        self.insert(id, key, self.front);
    }
    fn insert(&mut self, id: JobId, key: f64, seq: i64) {
        let stamp = self.stamps.issue(id);
        self.heap.push(Entry {
            key,
            seq,
            id,
            stamp,
        });
    }
    fn skip_dead(&mut self) {
        while let Some(e) = self.heap.peek() {
            if self.stamps.is_live(e.id, e.stamp) {
                return;
            }
            self.heap.pop();
        }
    }
    pub fn pop(&mut self) -> Option<JobId> {
        self.skip_dead();
        let e = self.heap.pop()?;
        self.stamps.kill(e.id);
        Some(e.id)
    }
    /// The smallest key and its job, without removing it.
    pub fn peek(&mut self) -> Option<(JobId, f64)> {
        self.skip_dead();
        self.heap.peek().map(|e| (e.id, e.key))
    }
    pub fn remove(&mut self, id: JobId) -> bool {
        self.stamps.kill(id)
    }
    pub fn len(&self) -> usize {
        self.stamps.live
    }
    pub fn is_empty(&self) -> bool {
        self.stamps.live == 0
    }
}

/// A policy that serves the queued job with the smallest key. Each such policy is a `KeyRule`
/// in its own file; this type does the queueing once for all of them.
pub trait KeyRule: Send + 'static {
    const NAME: &'static str;
    /// The job's place in the queue, computed when it is enqueued.
    fn key(&self, job: &crate::JobView, now: f64) -> f64;
    /// Whether an incoming job takes the CPU from a running one (default: never).
    fn preempts(&self, _incoming: &crate::JobView, _running: &crate::JobView, _now: f64) -> bool {
        false
    }
    /// False when `preempts` is never true (see `Policy::may_preempt`); a rule that overrides
    /// `preempts` keeps the default.
    const MAY_PREEMPT: bool = true;
    fn slice(&self) -> Option<f64> {
        None
    }
}

pub struct KeyedPolicy<R: KeyRule> {
    pub rule: R,
    queue: KeyedQueue,
    slices: SliceUse,
}

impl<R: KeyRule> KeyedPolicy<R> {
    pub fn boxed(rule: R) -> Box<dyn crate::Policy> {
        Box::new(KeyedPolicy {
            rule,
            queue: KeyedQueue::default(),
            slices: SliceUse::default(),
        })
    }
}

impl<R: KeyRule> KeyedPolicy<R> {
    #[cold]
    #[inline(never)]
    fn enqueue_with_slices(&mut self, id: JobId, key: f64, why: Enqueue<'_>) {
        if self.rule.slice().is_some() {
            self.slices.enqueue(id, why);
        }
        if matches!(why, Enqueue::Preempted { .. }) {
            self.queue.push_front(id, key);
        } else {
            self.queue.push(id, key);
        }
    }
}

impl<R: KeyRule> crate::Policy for KeyedPolicy<R> {
    fn name(&self) -> &'static str {
        R::NAME
    }
    fn enqueue(&mut self, job: &crate::JobView, now: f64, why: Enqueue<'_>) {
        let key = self.rule.key(job, now);
        // The hot path: nothing about a slice to keep (so not preempted either), and the job
        // goes to the back.
        if self.slices.keeps_slice(why) {
            self.enqueue_with_slices(job.id, key, why);
        } else {
            self.queue.push(job.id, key);
        }
    }
    fn dequeue(&mut self, job: &crate::JobView, _: f64, _: Dequeue) -> Carry {
        self.queue.remove(job.id);
        // Without a slice nothing was recorded: the carry is empty.
        self.slices.carry(job.id)
    }
    fn forgets_sleepers(&self) -> bool {
        true // the key comes from the job itself; slice use is forgotten when it leaves
    }
    fn pick_next(&mut self, _: f64) -> Option<JobId> {
        self.queue.pop()
    }
    fn slice(&self, job: &crate::JobView, _: f64) -> Option<f64> {
        self.rule.slice().map(|q| self.slices.rest(job.id, q))
    }
    fn preempts(&self, incoming: &crate::JobView, running: &crate::JobView, now: f64) -> bool {
        self.rule.preempts(incoming, running, now)
    }
    fn may_preempt(&self) -> bool {
        R::MAY_PREEMPT
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_orders_by_key_then_fifo_and_skips_removed() {
        let mut q = KeyedQueue::default();
        q.push(JobId(0), 5.0);
        q.push(JobId(1), 1.0);
        q.push(JobId(2), 1.0);
        q.push(JobId(3), 0.5);
        assert!(q.remove(JobId(3)));
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop(), Some(JobId(1)));
        assert_eq!(q.pop(), Some(JobId(2)));
        assert_eq!(q.pop(), Some(JobId(0)));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn push_front_goes_ahead_of_equal_keys_only() {
        let mut q = KeyedQueue::default();
        q.push(JobId(0), 1.0);
        q.push(JobId(1), 2.0);
        q.push_front(JobId(2), 2.0);
        q.push_front(JobId(3), 1.5);
        let order: Vec<u32> = std::iter::from_fn(|| q.pop()).map(|j| j.0).collect();
        assert_eq!(order, [0, 3, 2, 1]);
    }

    #[test]
    fn fifo_reused_slot_is_not_confused_with_stale_entry() {
        let mut q = FifoQueue::default();
        q.push_back(JobId(7));
        q.remove(JobId(7));
        q.push_back(JobId(1));
        q.push_back(JobId(7));
        assert_eq!(q.pop(), Some(JobId(1)));
        assert_eq!(q.pop(), Some(JobId(7)));
        assert!(q.is_empty());
    }
}
