//! The two queues most policies are made of: a FIFO and a min-heap on a key.
//!
//! Both support removal of an arbitrary job (migration) by lazy deletion: each job slot carries
//! a stamp, and heap or queue entries whose stamp is stale are skipped.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::JobId;

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

/// First in, first out; `push_front` serves a job next (MLFQ's preempted jobs).
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

/// A heap entry ordered smallest key first, ties in push order (`seq`); `stamp` lets the owner
/// drop stale entries lazily. Shared by the heaps of this module and of EEVDF.
#[derive(Clone, Copy)]
pub(crate) struct Entry<I> {
    pub(crate) key: f64,
    pub(crate) seq: u64,
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

/// Smallest key first; equal keys in the order they were pushed.
#[derive(Default)]
pub struct KeyedQueue {
    heap: BinaryHeap<Entry<JobId>>,
    stamps: Stamps,
    seq: u64,
}

impl KeyedQueue {
    pub fn push(&mut self, id: JobId, key: f64) {
        let stamp = self.stamps.issue(id);
        self.seq += 1;
        self.heap.push(Entry {
            key,
            seq: self.seq,
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
    fn slice(&self) -> Option<f64> {
        None
    }
}

pub struct KeyedPolicy<R: KeyRule> {
    pub rule: R,
    queue: KeyedQueue,
}

impl<R: KeyRule> KeyedPolicy<R> {
    pub fn boxed(rule: R) -> Box<dyn crate::Policy> {
        Box::new(KeyedPolicy {
            rule,
            queue: KeyedQueue::default(),
        })
    }
}

impl<R: KeyRule> crate::Policy for KeyedPolicy<R> {
    fn name(&self) -> &'static str {
        R::NAME
    }
    fn enqueue(&mut self, job: &crate::JobView, now: f64, _: crate::Enqueue) {
        self.queue.push(job.id, self.rule.key(job, now));
    }
    fn dequeue(&mut self, id: JobId) {
        self.queue.remove(id);
    }
    fn pick_next(&mut self, _: f64) -> Option<JobId> {
        self.queue.pop()
    }
    fn slice(&self, _: &crate::JobView, _: f64) -> Option<f64> {
        self.rule.slice()
    }
    fn preempts(&self, incoming: &crate::JobView, running: &crate::JobView, now: f64) -> bool {
        self.rule.preempts(incoming, running, now)
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
