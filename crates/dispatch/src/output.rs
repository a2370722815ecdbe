//! What a run returns: raw per-task counters (before, at the end of the contended interval, at
//! exit), per-job records, placement samples, dispatcher segments and the coordinator's own
//! cost. `schedlab.osrun` turns it into the common result schema.

use serde::Serialize;

use crate::procfs::{Counters, CpuTimes, Missing};

#[derive(Debug, Default, Serialize)]
pub struct Output {
    /// Wall time from the start signal to the last exit, ms.
    pub wall_ms: f64,
    /// CLOCK_MONOTONIC of the start signal, ns: the origin of every ms of the run, so that
    /// other records of the machine (the kernel's trace) can be put on the run's clock.
    pub start_ns: u64,
    pub tasks: Vec<TaskOut>,
    pub jobs: Jobs,
    pub samples: Samples,
    /// Dispatcher run segments: which task ran on which CPU, when (ms).
    pub segments: Segments,
    /// End of the interval during which every task was still running (ms), and why it ended.
    pub contended_end_ms: f64,
    pub contended_end: String,
    pub stopped_by_time: bool,
    /// A run until precise that stopped because it was (before its time cap), and the
    /// measured jobs its rule had seen then.
    pub stopped_precise: bool,
    pub precise_jobs: Option<u64>,
    pub timed_out: bool,
    pub missing: Missing,
    pub warnings: Vec<String>,
    pub coordinator: Coordinator,
    pub dispatcher: Option<DispatchStats>,
    pub cpu_times_before: CpuTimes,
    pub cpu_times_after: CpuTimes,
    /// USER_HZ, the unit of /proc/stat and of utime/stime in /proc/<pid>/stat.
    pub user_hz: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct TaskOut {
    pub task: usize,
    pub class: u32,
    pub pid: i32,
    /// The policy the kernel reports for the worker after setup.
    pub policy_applied: Option<u32>,
    /// RLIMIT_RTTIME as /proc/<pid>/limits shows it (µs), soft and hard.
    pub rttime_limit_us: Option<(String, String)>,
    pub autogroup: Option<String>,
    pub cgroup: Option<String>,
    pub base: Counters,
    pub contended: Counters,
    pub end: Counters,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<String>,
    /// Why the task ended abnormally, in words (RLIMIT_RTTIME, hard timeout, ...).
    pub killed: Option<String>,
    pub end_ms: f64,
    /// When the coordinator lifted the task's pinned start (ms after the start); None
    /// without a pinned start.
    pub released_ms: Option<f64>,
    /// Last job's end, ms after the start.
    pub done_ms: Option<f64>,
    pub utime_ms: f64,
    pub stime_ms: f64,
    pub nvcsw: u64,
    pub nivcsw: u64,
    pub maxrss_kib: u64,
    pub jobs_done: u64,
    pub unfinished: u64,
    pub records_dropped: u64,
    pub measure_cpu_ms: f64,
    pub io_error: Option<String>,
    /// Dispatcher only: time held runnable but not running, entitled and received CPU (ms)
    /// over the contended interval, and times dispatched.
    pub held_ms: Option<f64>,
    pub entitled_ms: Option<f64>,
    pub received_ms: Option<f64>,
    pub dispatches: Option<u64>,
    pub home_cpu: Option<usize>,
}

/// Job records as columns (ms; NaN where a counter is missing).
#[derive(Debug, Default, Serialize)]
pub struct Jobs {
    pub task: Vec<u32>,
    pub index: Vec<u64>,
    pub arrival: Vec<f64>,
    pub first_run: Vec<f64>,
    pub completion: Vec<f64>,
    pub size: Vec<f64>,
    pub cpu_time: Vec<f64>,
    pub runqueue_wait: Vec<Option<f64>>,
    pub held: Vec<f64>,
    pub io: Vec<f64>,
    pub voluntary: Vec<Option<u64>>,
    pub involuntary: Vec<Option<u64>>,
    pub migrations: Vec<Option<u64>>,
    pub cpu: Vec<i64>,
}

/// Placement samples: at time t (ms), task was in state (R, S, D, T...) with CPU cpu.
#[derive(Debug, Default, Serialize)]
pub struct Samples {
    pub t: Vec<f64>,
    pub task: Vec<u32>,
    pub cpu: Vec<i64>,
    pub state: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Segments {
    pub cpu: Vec<u32>,
    pub task: Vec<u32>,
    pub start: Vec<f64>,
    pub end: Vec<f64>,
}

#[derive(Debug, Default, Serialize)]
pub struct Coordinator {
    pub pid: i32,
    /// SCHED_FIFO priority of the coordinator (the watchdog), if it could be raised.
    pub watchdog_rtprio: Option<u32>,
    pub watchdog_error: Option<String>,
    /// CPUs the coordinator kept to (a pinned start's CPUs); None: any.
    pub cpus: Option<Vec<usize>>,
    /// CPU time of the coordinator during the run (utime + stime), ms.
    pub cpu_ms: f64,
    /// Part of it spent measuring (placement samples, counter reads), ms.
    pub measure_cpu_ms: f64,
    pub samples_taken: u64,
    pub setup_ms: f64,
}

#[derive(Debug, Default, Serialize)]
pub struct DispatchStats {
    pub policy: String,
    pub runqueues: String,
    pub enforce: String,
    pub cpus: Vec<usize>,
    pub decisions: u64,
    pub switches: u64,
    pub stops: u64,
    pub conts: u64,
    pub grants: u64,
    pub affinity_changes: u64,
    /// Coordinator CPU minus measurement: the cost of dispatching, ms, and as a fraction of one
    /// CPU over the run's wall time.
    pub cpu_ms: f64,
    pub overhead: f64,
    /// Mean delay between a quantum's planned end and the dispatcher acting on it, µs.
    pub timer_lateness_us: f64,
}
