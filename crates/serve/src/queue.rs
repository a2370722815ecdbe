//! The bounded buffer between the master thread and the workers, ordered by a policy.
//!
//! One `Mutex` and two `Condvar`s, as in OSTEP's web server: the master waits on `not_full`
//! while `buffer` requests are waiting, workers wait on `not_empty` while none is. Each is
//! signalled only when someone waits on it (the futex wake is a system call; skipping it when
//! nobody sleeps matters at 100k requests per second). The order is the policy's, with the
//! simulator's hooks and the same `JobView`: size and remaining are bytes, `now` is ms since
//! the server started, and a turn of `slice` is counted in packets (see `docs/server.md`).
//!
//! While the buffer is full the master reads ahead: up to `buffer` more requests wait *next in
//! line* (`outside`), in arrival order, outside the policy's view; the master blocks only when
//! it holds that many (clients then queue in the kernel). The worker that takes a request from
//! the buffer admits the next of them in the same lock, so the room is filled the moment it
//! opens, as in the simulator's model of the buffer ("arrivals beyond it wait outside, in
//! order"). Without this a worker that finished a small request found only the large ones in
//! the buffer while the master woke, read and pushed the next small one (130-180 µs here), and
//! took a large one: the convoy burst under SFF lost a small request to a 59 ms wait in 5
//! runs of 40 (see `docs/server.md`).
//!
//! A request set aside between turns (round robin) or preempted (SRPT, priority) re-enters
//! without waiting for room: a worker never blocks on the master, so the buffer may hold up to
//! `buffer + workers` requests for a moment.
//!
//! A request whose client's socket is full *parks* (see `worker.rs` and `park.rs`): it blocks
//! as a job waiting on I/O does in the simulator, `dequeue(Sleep)` after its turn is charged,
//! and holds no room in the buffer while parked (it is still "in the system" for the drain).
//! When the socket is writable again it wakes, `enqueue(Wakeup)`, and may preempt as an
//! arrival may; it re-enters without waiting for room, as a request between turns does. A
//! parked request that is closed (send timeout, hang-up, end of the run) wakes and exits at
//! once for the policy, so that the policy forgets it as it forgets any request that exits.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use schedlab_policy::{Dequeue, Enqueue, JobId, JobView, Policy};

use crate::clock::now_ns;

/// How often a master that waits for room looks at the stop flag (a signal handler cannot
/// signal the condition variable).
const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// What the policy knows about a request when it arrives.
#[derive(Clone, Copy, Debug)]
pub struct Admit {
    pub bytes: u64,
    pub class: u32,
    pub priority: f64,
    pub tickets: f64,
    pub weight: f64,
    /// Relative deadline in ms, if the class has one.
    pub deadline: Option<f64>,
}

struct Slot<J> {
    view: JobView,
    job: Option<J>,
    live: bool,
    /// When it last entered the buffer (CLOCK_MONOTONIC ns).
    since_ns: u64,
}

struct State<J> {
    policy: Box<dyn Policy>,
    slots: Vec<Slot<J>>,
    free: Vec<u32>,
    running: Vec<Option<JobId>>,
    idle_workers: usize,
    master_waiting: bool,
    /// Requests the master read while the buffer was full, next in line, in order.
    outside: VecDeque<(J, Admit)>,
    closed: bool,
    in_system: usize,
}

/// How a worker's previous turn ended, settled when it asks for the next one.
pub enum Done<J> {
    Finished {
        id: JobId,
        bytes: u64,
        packets: f64,
    },
    Requeued {
        id: JobId,
        job: J,
        bytes: u64,
        packets: f64,
        why: Enqueue<'static>,
    },
}

/// A request handed to a worker for one turn.
pub struct Turn<J> {
    pub id: JobId,
    pub job: J,
    pub view: JobView,
    /// Packets this turn may send; `None`: until done (or preempted).
    pub packets: Option<u64>,
    /// When it entered the buffer before this turn (CLOCK_MONOTONIC ns).
    pub entered_ns: u64,
}

pub struct Queue<J> {
    state: Mutex<State<J>>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: usize,
    epoch_ns: u64,
    /// Bytes the job on each worker has sent in its current turn (read by preemption checks).
    progress: Vec<AtomicU64>,
    /// Set when an arrival should take a worker's place at the next packet boundary.
    preempt: Vec<AtomicBool>,
}

impl<J> Queue<J> {
    pub fn new(policy: Box<dyn Policy>, capacity: usize, workers: usize) -> Queue<J> {
        Queue {
            state: Mutex::new(State {
                policy,
                slots: Vec::new(),
                free: Vec::new(),
                running: vec![None; workers],
                idle_workers: 0,
                master_waiting: false,
                outside: VecDeque::new(),
                closed: false,
                in_system: 0,
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity,
            epoch_ns: now_ns(),
            progress: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            preempt: (0..workers).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// The instant the policy's clock reads 0.
    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ns
    }

    fn now(&self) -> f64 {
        crate::clock::ms_since(self.epoch_ns, now_ns())
    }

    fn lock(&self) -> MutexGuard<'_, State<J>> {
        // A worker that panicked mid-turn must not take the server down with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a new request; blocks while the buffer is full. `Err(job)` once closed.
    pub fn push(&self, job: J, admit: Admit) -> Result<(), J> {
        let mut one = vec![(job, admit)];
        match self.push_all(&mut one).pop() {
            Some(job) => Err(job),
            None => Ok(()),
        }
    }

    /// Adds new requests in order under one lock: into the buffer while it has room, next in
    /// line beyond; blocks while `buffer` requests wait next in line. Returns those refused
    /// because the queue closed. (The master admits what one `epoll_wait` brought in one go:
    /// one lock, and a wake-up only for workers that sleep.)
    pub fn push_all(&self, items: &mut Vec<(J, Admit)>) -> Vec<J> {
        static NEVER: AtomicBool = AtomicBool::new(false);
        self.push_all_until(items, &NEVER)
    }

    /// `push_all`, but a wait for room ends when `stop` is set (a signal, `Handle::stop`):
    /// what the master still holds then goes next in line beyond the bound, so that the drain
    /// serves it or counts it dropped, and the stop is seen now, not when a worker makes room
    /// (with a slow cost, seconds after the signal and past any drain timeout).
    pub fn push_all_until(&self, items: &mut Vec<(J, Admit)>, stop: &AtomicBool) -> Vec<J> {
        let mut st = self.lock();
        let mut woken = 0;
        let mut refused = Vec::new();
        for item in items.drain(..) {
            while st.outside.len() >= self.capacity && !st.closed && !stop.load(Ordering::SeqCst) {
                st.master_waiting = true;
                st = self
                    .not_full
                    .wait_timeout(st, STOP_POLL)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                woken = 0;
            }
            st.master_waiting = false;
            if st.closed {
                refused.push(item.0);
                continue;
            }
            st.outside.push_back(item);
            self.admit_outside(&mut st, &mut woken);
        }
        refused
    }

    /// Admits the requests next in line while there is room, waking sleeping workers for them
    /// (`woken`: those already woken since the lock was taken).
    fn admit_outside(&self, st: &mut State<J>, woken: &mut usize) {
        while st.policy.len() < self.capacity {
            let Some((job, admit)) = st.outside.pop_front() else {
                break;
            };
            self.admit(st, job, admit);
            if st.idle_workers > *woken {
                *woken += 1;
                self.not_empty.notify_one();
            }
        }
    }

    fn admit(&self, st: &mut State<J>, job: J, admit: Admit) {
        let now = self.now();
        let id = match st.free.pop() {
            Some(i) => JobId(i),
            None => {
                let i = st.slots.len() as u32;
                st.slots.push(Slot {
                    view: JobView::new(JobId(i), 0.0, 0.0),
                    job: None,
                    live: false,
                    since_ns: 0,
                });
                JobId(i)
            }
        };
        let mut view = JobView::new(id, now, admit.bytes as f64);
        view.class = admit.class;
        view.priority = admit.priority;
        view.tickets = admit.tickets;
        view.weight = admit.weight;
        view.deadline = admit.deadline.map_or(f64::INFINITY, |d| now + d);
        st.policy.enqueue(&view, now, Enqueue::Arrival);
        if st.idle_workers == 0 {
            self.mark_preemption(st, &view, now);
        }
        let slot = &mut st.slots[id.index()];
        slot.view = view;
        slot.job = Some(job);
        slot.live = true;
        slot.since_ns = now_ns();
        st.in_system += 1;
    }

    /// If the arrival preempts running requests, flags the worker of the least important one
    /// (largest priority number, then most bytes left).
    fn mark_preemption(&self, st: &State<J>, incoming: &JobView, now: f64) {
        let mut best: Option<(usize, f64, f64)> = None;
        for (w, r) in st.running.iter().enumerate() {
            let Some(rid) = r else { continue };
            let mut rv = st.slots[rid.index()].view.clone();
            let sent = self.progress[w].load(Ordering::Relaxed) as f64;
            rv.remaining = (rv.remaining - sent).max(0.0);
            if !st.policy.preempts(incoming, &rv, now) {
                continue;
            }
            let key = (rv.priority, rv.remaining);
            if best.is_none_or(|(_, p, r)| (key.0, key.1) > (p, r)) {
                best = Some((w, key.0, key.1));
            }
        }
        if let Some((w, _, _)) = best {
            self.preempt[w].store(true, Ordering::Release);
        }
    }

    /// The next request for `worker`; blocks while none waits. `None` once closed.
    pub fn pop(&self, worker: usize) -> Option<Turn<J>> {
        self.next(worker, None)
    }

    /// Settles the worker's previous turn (if any) and takes its next request, under one
    /// lock; blocks while none waits. `None` once closed.
    pub fn next(&self, worker: usize, done: Option<Done<J>>) -> Option<Turn<J>> {
        let mut st = self.lock();
        match done {
            Some(Done::Finished { id, bytes, packets }) => {
                self.finish_locked(&mut st, worker, id, bytes, packets)
            }
            Some(Done::Requeued {
                id,
                job,
                bytes,
                packets,
                why,
            }) => self.requeue_locked(&mut st, worker, id, job, bytes, packets, why),
            None => {}
        }
        let id = loop {
            if st.closed {
                return None;
            }
            let now = self.now();
            if let Some(id) = st.policy.pick_next(now) {
                break id;
            }
            st.idle_workers += 1;
            st = self.not_empty.wait(st).unwrap_or_else(|e| e.into_inner());
            st.idle_workers -= 1;
        };
        let now = self.now();
        st.running[worker] = Some(id);
        self.progress[worker].store(0, Ordering::Relaxed);
        self.preempt[worker].store(false, Ordering::Relaxed);
        let slot = &mut st.slots[id.index()];
        let job = slot.job.take().expect("a queued job has its request");
        let view = slot.view.clone();
        let entered_ns = slot.since_ns;
        let packets = st
            .policy
            .slice(&view, now)
            .map(|s| s.ceil().max(1.0) as u64);
        if !st.outside.is_empty() {
            self.admit_outside(&mut st, &mut 0);
            if st.master_waiting && st.outside.len() < self.capacity {
                self.not_full.notify_one();
            }
        }
        Some(Turn {
            id,
            job,
            view,
            packets,
            entered_ns,
        })
    }

    /// Records `bytes` sent during the current turn (for preemption checks).
    pub fn progress(&self, worker: usize, bytes: u64) {
        self.progress[worker].store(bytes, Ordering::Relaxed);
    }

    /// Whether an arrival asked this worker to yield; clears the request.
    pub fn preempted(&self, worker: usize) -> bool {
        self.preempt[worker].load(Ordering::Acquire)
            && self.preempt[worker].swap(false, Ordering::AcqRel)
    }

    fn charge(st: &mut State<J>, id: JobId, bytes: u64, packets: f64, now: f64) -> JobView {
        let view = &mut st.slots[id.index()].view;
        view.remaining = (view.remaining - bytes as f64).max(0.0);
        view.attained += packets;
        let v = view.clone();
        st.policy.charge(&v, packets, now);
        v
    }

    /// Puts a request back after a turn that sent `bytes` in `packets` packets.
    pub fn requeue(
        &self,
        worker: usize,
        id: JobId,
        job: J,
        bytes: u64,
        packets: f64,
        why: Enqueue<'static>,
    ) {
        let mut st = self.lock();
        self.requeue_locked(&mut st, worker, id, job, bytes, packets, why);
    }

    #[allow(clippy::too_many_arguments)]
    fn requeue_locked(
        &self,
        st: &mut State<J>,
        worker: usize,
        id: JobId,
        job: J,
        bytes: u64,
        packets: f64,
        why: Enqueue<'static>,
    ) {
        let now = self.now();
        let view = Self::charge(st, id, bytes, packets, now);
        // A preempted request ran this turn's packets of its slice.
        let why = match why {
            Enqueue::Preempted { .. } => Enqueue::Preempted { ran: packets },
            other => other,
        };
        st.policy.enqueue(&view, now, why);
        st.slots[id.index()].job = Some(job);
        st.slots[id.index()].since_ns = now_ns();
        st.running[worker] = None;
        self.progress[worker].store(0, Ordering::Relaxed);
        if st.idle_workers > 0 {
            self.not_empty.notify_one();
        }
    }

    /// The request on `worker` met a full socket after sending `bytes` in `packets` packets
    /// this turn: it leaves the worker and blocks (`dequeue(Sleep)`) until [`Queue::wake`] or
    /// [`Queue::abandon`].
    pub fn park(&self, worker: usize, id: JobId, bytes: u64, packets: f64) {
        let mut st = self.lock();
        let now = self.now();
        let view = Self::charge(&mut st, id, bytes, packets, now);
        st.policy.dequeue(&view, now, Dequeue::Sleep);
        st.running[worker] = None;
        self.progress[worker].store(0, Ordering::Relaxed);
    }

    /// A parked request can go on (its socket is writable since `since_ns`): it re-enters
    /// the policy's queue as a waking job. `Err(job)` once closed.
    pub fn wake(&self, id: JobId, job: J, since_ns: u64) -> Result<(), J> {
        let mut st = self.lock();
        if st.closed {
            return Err(job);
        }
        let now = self.now();
        let view = st.slots[id.index()].view.clone();
        st.policy.enqueue(&view, now, Enqueue::Wakeup);
        if st.idle_workers == 0 {
            self.mark_preemption(&st, &view, now);
        }
        let slot = &mut st.slots[id.index()];
        slot.job = Some(job);
        slot.since_ns = since_ns;
        if st.idle_workers > 0 {
            self.not_empty.notify_one();
        }
        Ok(())
    }

    /// A parked request is closed without being served further: for the policy it wakes and
    /// exits (a sleeping job never exits in the simulator, and an exit is what makes a
    /// policy forget a job); its slot is freed.
    pub fn abandon(&self, id: JobId) {
        let mut st = self.lock();
        let now = self.now();
        let view = st.slots[id.index()].view.clone();
        st.policy.enqueue(&view, now, Enqueue::Wakeup);
        st.policy.dequeue(&view, now, Dequeue::Exit);
        let slot = &mut st.slots[id.index()];
        slot.live = false;
        slot.job = None;
        st.free.push(id.0);
        st.in_system -= 1;
    }

    /// The request on `worker` is done (or abandoned); its slot is freed.
    pub fn finish(&self, worker: usize, id: JobId, bytes: u64, packets: f64) {
        let mut st = self.lock();
        self.finish_locked(&mut st, worker, id, bytes, packets);
    }

    fn finish_locked(&self, st: &mut State<J>, worker: usize, id: JobId, bytes: u64, packets: f64) {
        let now = self.now();
        let view = Self::charge(st, id, bytes, packets, now);
        st.policy.dequeue(&view, now, Dequeue::Exit);
        let slot = &mut st.slots[id.index()];
        slot.live = false;
        slot.job = None;
        st.free.push(id.0);
        st.running[worker] = None;
        st.in_system -= 1;
        self.progress[worker].store(0, Ordering::Relaxed);
    }

    /// Requests waiting (next in line too) or being served.
    pub fn in_system(&self) -> usize {
        let st = self.lock();
        st.in_system + st.outside.len()
    }

    /// Requests waiting.
    pub fn waiting(&self) -> usize {
        self.lock().policy.len()
    }

    /// Wakes everyone; `pop` returns `None` and `push` refuses from now on. Returns the
    /// requests still waiting, which will not be served.
    pub fn close(&self) -> Vec<J> {
        let mut st = self.lock();
        st.closed = true;
        let mut left: Vec<J> = st.slots.iter_mut().filter_map(|s| s.job.take()).collect();
        left.extend(st.outside.drain(..).map(|(job, _)| job));
        self.not_empty.notify_all();
        self.not_full.notify_all();
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_policy::{build, ParamValue, Params};
    use std::sync::Arc;

    fn admit(bytes: u64) -> Admit {
        Admit {
            bytes,
            class: 0,
            priority: 0.0,
            tickets: 1.0,
            weight: 1.0,
            deadline: None,
        }
    }

    #[test]
    fn sff_serves_smallest_first_and_fcfs_in_order() {
        for (policy, expected) in [("sff", [3u64, 1, 2, 0]), ("fcfs", [0, 1, 2, 3])] {
            let q: Queue<u64> = Queue::new(build(policy, &Params::new(), 1).unwrap(), 10, 1);
            for (i, b) in [4000u64, 20, 300, 5].iter().enumerate() {
                q.push(i as u64, admit(*b)).unwrap();
            }
            let got: Vec<u64> = (0..4)
                .map(|_| {
                    let t = q.pop(0).unwrap();
                    q.finish(0, t.id, t.view.size as u64, 1.0);
                    t.job
                })
                .collect();
            assert_eq!(got, expected, "{policy}");
            assert_eq!(q.in_system(), 0);
        }
    }

    #[test]
    fn rr_turns_are_quantum_packets_and_alternate() {
        let p = build(
            "rr",
            &Params::new().with("quantum", ParamValue::Num(2.0)),
            1,
        )
        .unwrap();
        let q: Queue<&str> = Queue::new(p, 10, 1);
        q.push("a", admit(10)).unwrap();
        q.push("b", admit(10)).unwrap();
        let mut order = Vec::new();
        for _ in 0..4 {
            let t = q.pop(0).unwrap();
            assert_eq!(t.packets, Some(2));
            order.push(t.job);
            q.requeue(0, t.id, t.job, 2, 2.0, Enqueue::Expired);
        }
        assert_eq!(order, ["a", "b", "a", "b"]);
        assert_eq!(q.waiting(), 2);
    }

    #[test]
    fn srpt_arrival_flags_the_running_worker() {
        let q: Queue<u32> = Queue::new(build("srpt", &Params::new(), 1).unwrap(), 10, 1);
        q.push(1, admit(1_000_000)).unwrap();
        let t = q.pop(0).unwrap();
        q.progress(0, 1000);
        assert!(!q.preempted(0));
        q.push(2, admit(100)).unwrap();
        assert!(q.preempted(0));
        assert!(!q.preempted(0), "the flag clears once read");
        q.requeue(0, t.id, t.job, 1000, 1.0, Enqueue::Preempted { ran: 1.0 });
        assert_eq!(q.pop(0).unwrap().job, 2);
    }

    #[test]
    fn a_parked_request_wakes_behind_waiting_ones_and_an_abandoned_one_leaves() {
        // FCFS by readiness: a woken request goes to the back, as a job back from I/O.
        let q: Queue<&str> = Queue::new(build("fcfs", &Params::new(), 1).unwrap(), 10, 1);
        q.push("a", admit(100)).unwrap();
        q.push("b", admit(100)).unwrap();
        let a = q.pop(0).unwrap();
        q.park(0, a.id, 40, 1.0);
        assert_eq!(
            (q.waiting(), q.in_system()),
            (1, 2),
            "parked: not waiting, in system"
        );
        q.wake(a.id, a.job, now_ns()).unwrap();
        let order: Vec<&str> = (0..2)
            .map(|_| {
                let t = q.pop(0).unwrap();
                q.finish(0, t.id, 60, 1.0);
                t.job
            })
            .collect();
        assert_eq!(order, ["b", "a"]);
        // SRPT: a request that wakes with fewer bytes left than the running one preempts it.
        let q: Queue<u32> = Queue::new(build("srpt", &Params::new(), 1).unwrap(), 10, 1);
        q.push(1, admit(1000)).unwrap();
        let small = q.pop(0).unwrap();
        q.park(0, small.id, 900, 1.0);
        q.push(2, admit(500)).unwrap();
        let _big = q.pop(0).unwrap();
        q.wake(small.id, small.job, now_ns()).unwrap();
        assert!(q.preempted(0), "100 bytes left beat 500");
        // Abandoned while parked: its slot is free and the system empty of it.
        let q: Queue<u32> = Queue::new(build("rr", &Params::new(), 1).unwrap(), 10, 1);
        q.push(7, admit(1000)).unwrap();
        let t = q.pop(0).unwrap();
        q.park(0, t.id, 10, 0.5);
        q.abandon(t.id);
        assert_eq!((q.waiting(), q.in_system()), (0, 0));
        q.close();
        assert!(
            q.wake(t.id, 7, now_ns()).is_err(),
            "no wake-up into a closed queue"
        );
    }

    #[test]
    fn the_master_blocks_when_buffer_requests_wait_next_in_line() {
        let q: Arc<Queue<u32>> =
            Arc::new(Queue::new(build("fcfs", &Params::new(), 1).unwrap(), 2, 1));
        for i in 0..4 {
            q.push(i, admit(1)).unwrap(); // 0 and 1 in the buffer, 2 and 3 next in line
        }
        assert_eq!((q.waiting(), q.in_system()), (2, 4));
        let q2 = q.clone();
        let pusher = std::thread::spawn(move || q2.push(4, admit(1)).is_ok());
        while !q.lock().master_waiting {
            std::thread::yield_now();
        }
        assert!(
            !pusher.is_finished(),
            "push must wait while 2 wait next in line"
        );
        let t = q.pop(0).unwrap();
        assert!(pusher.join().unwrap());
        assert_eq!(t.job, 0);
        assert_eq!(
            (q.waiting(), q.in_system()),
            (2, 5),
            "2 admitted at once, 4 behind 3"
        );
        // Closing wakes a waiting worker with None and hands back what was left, in the
        // buffer and next in line.
        let mut left = q.close();
        left.sort();
        assert_eq!(left, vec![1, 2, 3, 4]);
        assert!(q.pop(0).is_none());
    }

    #[test]
    fn the_worker_that_makes_room_admits_the_request_next_in_line() {
        // Buffer of 2, SFF: two large requests in the buffer, a small and a large next in line.
        let q: Queue<u32> = Queue::new(build("sff", &Params::new(), 1).unwrap(), 2, 2);
        q.push(0, admit(5000)).unwrap();
        q.push(1, admit(5000)).unwrap();
        assert!(q
            .push_all(&mut vec![(2, admit(10)), (3, admit(9000))])
            .is_empty());
        assert_eq!((q.waiting(), q.in_system()), (2, 4));
        // Each take fills the room it opens before the lock is let go: no wake-up of the
        // master lies between, so the next take already sees the small request.
        let first = q.pop(0).unwrap();
        assert_eq!((first.job, q.waiting()), (0, 2));
        let second = q.pop(1).unwrap();
        assert_eq!(
            second.job, 2,
            "the small request, admitted when the first take made room"
        );
        assert_eq!(
            (q.waiting(), q.in_system()),
            (2, 4),
            "and 3 when the second did"
        );
        // Closed while the master waits: what is next in line is the close's, what it still
        // holds comes back to the master.
        let q: Arc<Queue<u32>> =
            Arc::new(Queue::new(build("fcfs", &Params::new(), 1).unwrap(), 1, 1));
        q.push(0, admit(1)).unwrap();
        let q2 = q.clone();
        let master =
            std::thread::spawn(move || q2.push_all(&mut vec![(1, admit(1)), (2, admit(1))]));
        while !q.lock().master_waiting {
            std::thread::yield_now();
        }
        assert_eq!(q.close(), vec![0, 1]);
        assert_eq!(master.join().unwrap(), vec![2]);
    }

    #[test]
    fn every_request_read_ahead_is_served_once_in_order_under_two_workers() {
        // A buffer of 2 under a master pushing 3,000 requests in batches of 1 to 7 while two
        // workers take and finish them: none lost or served twice, each worker's FCFS picks
        // in arrival order, and nothing left in the system.
        let q: Arc<Queue<u32>> =
            Arc::new(Queue::new(build("fcfs", &Params::new(), 1).unwrap(), 2, 2));
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    while let Some(t) = q.pop(w) {
                        q.finish(w, t.id, 1, 1.0);
                        got.push(t.job);
                    }
                    got
                })
            })
            .collect();
        let mut next = 0u32;
        while next < 3000 {
            let n = (next % 7 + 1).min(3000 - next);
            let mut batch: Vec<_> = (next..next + n).map(|i| (i, admit(1))).collect();
            assert!(q.push_all(&mut batch).is_empty());
            next += n;
        }
        while q.in_system() > 0 {
            std::thread::yield_now();
        }
        assert!(q.close().is_empty());
        let mut all = Vec::new();
        for w in workers {
            let got = w.join().unwrap();
            assert!(
                got.windows(2).all(|p| p[0] < p[1]),
                "a worker's picks in order"
            );
            all.extend(got);
        }
        all.sort_unstable();
        assert_eq!(all, (0..3000).collect::<Vec<_>>());
    }
}
