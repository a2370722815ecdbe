//! Blocking and waking: a job's burst ends in an I/O wait (on its own, or in turn on one
//! device), it wakes when the wait is over, and wake-up boosts (Windows, Linux 2.6) raise its
//! priority on the way back.

use schedlab_policy::{Dequeue, JobId};

use super::{Engine, Timer};
use crate::spec::{Boost, IoDevice};

impl Engine<'_> {
    /// The current burst of a job is done and an I/O wait follows.
    pub(super) fn block(&mut self, id: JobId) {
        let now = self.now;
        let j = &self.jobs[id.index()];
        let (r, w, task) = (j.rq as usize, j.view.weight, j.task as usize);
        self.leave_runqueue(r, id, Dequeue::Sleep);
        self.set_runnable(r, -1, w);
        self.set_entitlement(task, 0.0);
        self.tasks[task].slept_at = now;
        let class = &self.cfg.classes[self.jobs[id.index()].view.class as usize];
        let io = class
            .io
            .as_ref()
            .expect("validated: io with bursts")
            .sample(&mut self.rng_io);
        self.jobs[id.index()].io_since = now;
        match self.cfg.io_device {
            IoDevice::Delay => self.timer(now + io, Timer::Io(id.0)),
            IoDevice::Fcfs if !self.device_busy => {
                self.device_busy = true;
                self.timer(now + io, Timer::Io(id.0));
            }
            IoDevice::Fcfs => self.device_queue.push_back((id.0, io)),
        }
    }

    pub(super) fn io_done(&mut self, id: JobId) {
        let now = self.now;
        if self.cfg.io_device == IoDevice::Fcfs {
            match self.device_queue.pop_front() {
                Some((next, io)) => self.timer(now + io, Timer::Io(next)),
                None => self.device_busy = false,
            }
        }
        let delay = self.cfg.machine.wake_delay;
        if delay > 0.0 {
            // The device is free; the job itself is back only after its wake-up.
            self.timer(now + delay, Timer::Woke(id.0));
        } else {
            self.woke(id);
        }
    }

    /// A job whose I/O wait ended rejoins its runqueue.
    pub(super) fn woke(&mut self, id: JobId) {
        let now = self.now;
        let class = self.jobs[id.index()].view.class as usize;
        let final_io = self.cfg.classes[class].final_io;
        let j = &mut self.jobs[id.index()];
        j.io_time += now - j.io_since;
        j.bursts_left -= 1;
        // After a final I/O the job only runs to end (a process's exit).
        j.burst_left = if final_io && j.bursts_left == 0 {
            0.0
        } else {
            j.burst_size
        };
        j.wakes = true;
        j.woke_from_io = true;
        self.ready.push(id);
    }

    /// Windows and Linux 2.6 wake-up boosts: what a wake-up earns (a Windows boost by I/O
    /// kind; sleep time towards the Linux sleep average), then the effective priority.
    pub(super) fn wake_boost(&mut self, id: JobId) {
        let boost = self.cfg.machine.boost;
        if boost == Boost::None {
            return;
        }
        let now = self.now;
        let j = &mut self.jobs[id.index()];
        let t = &mut self.tasks[j.task as usize];
        match boost {
            Boost::Windows if j.woke_from_io => {
                let c = &self.cfg.classes[j.view.class as usize];
                t.boost = t.boost.max(c.io_boost);
            }
            Boost::Linux26 { sleep_avg_max, .. } if !t.slept_at.is_nan() => {
                t.sleep_avg = (t.sleep_avg + now - t.slept_at).min(sleep_avg_max);
            }
            _ => {}
        }
        j.woke_from_io = false;
        t.slept_at = f64::NAN;
        self.apply_boost(id);
    }

    /// The job's priority as the boost of its task stands now (lower runs first).
    pub(super) fn apply_boost(&mut self, id: JobId) {
        let j = &mut self.jobs[id.index()];
        let t = &self.tasks[j.task as usize];
        j.view.priority = match self.cfg.machine.boost {
            Boost::None => return,
            Boost::Windows => j.base_priority - t.boost,
            Boost::Linux26 { max, sleep_avg_max } => {
                // The O(1) scheduler's bonus: -max for a CPU hog, +max for a task that sleeps.
                j.base_priority - (2.0 * max * t.sleep_avg / sleep_avg_max - max)
            }
        };
    }
}
