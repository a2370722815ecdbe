//! Memory shared between the coordinator and its forked workers: a control block, one slot per
//! task and one array of job records per task. Workers write their records there as they go (no
//! system call, no pipe that could fill and block them); the coordinator reads them at the end.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::sys::SharedMap;

/// A missing counter in a job record.
pub const MISSING: u64 = u64::MAX;

#[repr(C, align(64))]
pub struct Control {
    /// 0 until the start signal (futex word).
    pub go: AtomicU32,
    /// Set at the time limit or on abort: no new job, running ones end (futex word).
    pub stop: AtomicU32,
    /// CLOCK_MONOTONIC of the start signal, ns.
    pub t0_ns: AtomicU64,
}

/// Task states as the worker publishes them.
pub mod state {
    pub const SETUP: u32 = 0;
    /// Set up, waiting for the start signal (kernel) or its first grant (dispatcher).
    pub const WAITING: u32 = 1;
    pub const RUN: u32 = 2;
    /// About to block (I/O, think time): a dispatcher gives its CPU to another.
    pub const BLOCK: u32 = 3;
    /// Back from blocking, waiting for a grant from the dispatcher.
    pub const READY: u32 = 4;
    pub const DONE: u32 = 5;
    pub const FAILED: u32 = 6;
}

/// Setup steps a worker can fail at.
pub mod step {
    pub const RLIMIT: u32 = 1;
    pub const AFFINITY: u32 = 2;
    pub const SCHED: u32 = 3;
    pub const IO_FILE: u32 = 4;
    pub const PARENT: u32 = 5;
}

#[repr(C, align(128))]
pub struct Slot {
    pub state: AtomicU32,
    /// Incremented by the worker at every state change the dispatcher must see.
    pub seq: AtomicU32,
    /// Futex word: the dispatcher increments it to let a READY worker run.
    pub grant: AtomicU32,
    pub setup_errno: AtomicI32,
    pub setup_step: AtomicU32,
    pub unfinished: AtomicU32,
    pub io_errno: AtomicI32,
    pub jobs_done: AtomicU64,
    pub job_size_ns: AtomicU64,
    /// Time the dispatcher kept the task runnable but not running (stopped or ungranted), ns.
    pub held_ns: AtomicU64,
    /// CPU time the worker spent measuring (reading its counters), ns.
    pub measure_ns: AtomicU64,
    pub recorded: AtomicU64,
    pub dropped: AtomicU64,
    /// Baselines read by the coordinator before the start (MISSING when not available).
    pub base_run_delay: AtomicU64,
    pub base_nvcsw: AtomicU64,
    pub base_nivcsw: AtomicU64,
    pub base_migrations: AtomicU64,
    /// Time of the last job's end, relative to the start, ns.
    pub done_ns: AtomicU64,
}

/// One finished job. Times are ns after the start signal; MISSING marks a missing counter.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct JobRec {
    pub arrival: u64,
    pub first_run: u64,
    pub completion: u64,
    pub size: u64,
    pub cpu: u64,
    pub run_delay: u64,
    pub held: u64,
    pub io: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
    pub migrations: u64,
    pub last_cpu: i64,
}

pub struct Shm {
    map: SharedMap,
    n: usize,
    slots_off: usize,
    recs_off: Vec<usize>,
    caps: Vec<u64>,
}

// SAFETY: the mapping is plain shared memory accessed through atomics and volatile copies.
unsafe impl Send for Shm {}

impl Shm {
    /// A mapping for `caps.len()` tasks, task i holding up to caps[i] job records.
    pub fn new(caps: &[u64]) -> Result<Shm, i32> {
        let n = caps.len();
        let ctl = std::mem::size_of::<Control>().next_multiple_of(128);
        let slots_off = ctl;
        let mut off = slots_off + n * std::mem::size_of::<Slot>();
        let mut recs_off = Vec::with_capacity(n);
        for &c in caps {
            off = off.next_multiple_of(64);
            recs_off.push(off);
            off += c as usize * std::mem::size_of::<JobRec>();
        }
        let len = off.next_multiple_of(4096).max(4096);
        let map = SharedMap::new(len)?;
        // An anonymous mapping starts zeroed: every atomic is 0, which is each field's start
        // value, except the baselines, set by the coordinator before the start.
        Ok(Shm {
            map,
            n,
            slots_off,
            recs_off,
            caps: caps.to_vec(),
        })
    }

    pub fn control(&self) -> &Control {
        // SAFETY: offset 0 of a live, zero-initialised mapping sized for a Control, suitably
        // aligned (mmap returns page-aligned memory); every field is an atomic.
        unsafe { &*(self.map.ptr as *const Control) }
    }

    pub fn slot(&self, i: usize) -> &Slot {
        assert!(i < self.n);
        // SAFETY: slot i lies inside the mapping (checked above), 128-aligned, all atomics.
        unsafe {
            &*(self
                .map
                .ptr
                .add(self.slots_off + i * std::mem::size_of::<Slot>())
                as *const Slot)
        }
    }

    pub fn capacity(&self, i: usize) -> u64 {
        self.caps[i]
    }

    /// Stores record k of task i (k < capacity).
    pub fn write(&self, i: usize, k: u64, rec: &JobRec) {
        assert!(k < self.caps[i]);
        // SAFETY: record k of task i is inside the mapping (checked above), aligned for JobRec;
        // only task i's worker writes it, and the coordinator reads it after the worker's
        // `recorded` counter (Release/Acquire) says it is complete.
        unsafe {
            let p = self.map.ptr.add(self.recs_off[i]) as *mut JobRec;
            std::ptr::write_volatile(p.add(k as usize), *rec);
        }
        self.slot(i).recorded.store(k + 1, Ordering::Release);
    }

    pub fn read(&self, i: usize, k: u64) -> JobRec {
        assert!(k < self.caps[i]);
        // SAFETY: as in `write`; the caller reads only records below `recorded`.
        unsafe {
            let p = self.map.ptr.add(self.recs_off[i]) as *const JobRec;
            std::ptr::read_volatile(p.add(k as usize))
        }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}
