//! The one vocabulary: every key an experiment file, a CLI flag or a Python keyword may use,
//! in every world, with one name, one spelling, one unit and one meaning. Each world declares
//! in its own table (`python/schedlab/worlds/`) how it reads every key here: natively, mapped
//! by its unit, dropped with a note, or refused with a reason.
//!
//! Policy parameters are declared by their policies (`crates/policy`), with their units; the
//! policy crate checks at compile time that no parameter has the name of a key here, so a
//! flat spec (`simulate(policy="mlfq", boost_period=100, boost="windows")`) is never ambiguous.

use crate::{SpecError, Unit};

/// Where a key goes in an experiment file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    Policy,
    Workload,
    Machine,
    Experiment,
    Output,
    /// A key of a `[[workload.classes]]` table.
    Class,
}

impl Section {
    pub fn name(self) -> &'static str {
        match self {
            Section::Policy => "policy",
            Section::Workload => "workload",
            Section::Machine => "machine",
            Section::Experiment => "experiment",
            Section::Output => "output",
            Section::Class => "workload.classes",
        }
    }
}

/// The form a value is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Text,
    Int,
    Float,
    Bool,
    /// A distribution, `name:params` (a bare number is `det:` it).
    Dist,
    /// CPUs: a count, a list of CPU numbers, or text like "0-1".
    Cpus,
    /// A whole number, or the word `auto`.
    IntOrAuto,
    /// A table (policy parameters).
    Table,
    /// A list of tables.
    Tables,
}

impl Form {
    pub fn name(self) -> &'static str {
        match self {
            Form::Text => "str",
            Form::Int => "int",
            Form::Float => "float",
            Form::Bool => "bool",
            Form::Dist => "dist",
            Form::Cpus => "cpus",
            Form::IntOrAuto => "int|auto",
            Form::Table => "table",
            Form::Tables => "tables",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub name: &'static str,
    pub section: Section,
    pub form: Form,
    pub unit: Unit,
    pub help: &'static str,
}

const fn key(
    name: &'static str,
    section: Section,
    form: Form,
    unit: Unit,
    help: &'static str,
) -> Key {
    Key {
        name,
        section,
        form,
        unit,
        help,
    }
}

use Form as F;
use Section as S;
use Unit as U;

/// Every key outside a class table, in the order of the docs.
#[rustfmt::skip]
pub const KEYS: &[Key] = &[
    key("policy", S::Policy, F::Text, U::Text, "scheduling policy (see `schedlab policies`), or kernel (the kernel's own, os world); default fcfs (os world: the kernel)"),
    key("params", S::Policy, F::Table, U::Table, "policy parameters as a table, e.g. {quantum = 10}; or give them by name"),
    // The kernel's own policies (policy = "kernel"): the os world runs them, the simulator models them.
    key("sched", S::Policy, F::Text, U::Text, "kernel policy: other (CFS/EEVDF), batch, idle, fifo, rr, deadline; default other"),
    key("nice", S::Policy, F::Int, U::Ratio, "nice value -20..19 (kernel other and batch)"),
    key("rtprio", S::Policy, F::Int, U::Count, "real-time priority 1..98 (kernel fifo and rr)"),
    key("runtime", S::Policy, F::Float, U::Time, "SCHED_DEADLINE runtime (ms)"),
    key("deadline", S::Policy, F::Float, U::Time, "SCHED_DEADLINE relative deadline (ms)"),
    key("period", S::Policy, F::Float, U::Time, "SCHED_DEADLINE period (ms); default the deadline"),

    key("arrival", S::Workload, F::Dist, U::Time, "inter-arrival time distribution of the open workload (ms)"),
    key("load", S::Workload, F::Float, U::Ratio, "utilisation per CPU; Poisson arrivals at that load replace `arrival`"),
    key("size", S::Workload, F::Dist, U::Work, "job size (service demand) distribution, in ms of service; default exp:1"),
    key("jobs", S::Workload, F::Int, U::Count, "measured jobs: arrivals stop after warmup + jobs, then the system drains"),
    key("time", S::Workload, F::Float, U::Time, "stop at this time (ms)"),
    key("drain", S::Workload, F::Bool, U::Bool, "with time: nothing is sent from then on and the jobs in the system finish, measured, as a server run ends (its clients stop sending, its requests in flight complete); default false in the simulator (jobs still in the system at time are left unfinished), true in the server world"),
    key("clients", S::Workload, F::Int, U::Count, "closed workload: number of clients (tasks), each thinks then submits one job"),
    key("think", S::Workload, F::Dist, U::Time, "closed workload: think-time distribution (ms); default det:0"),
    key("batch", S::Workload, F::Int, U::Count, "a batch of one-shot tasks, one job each, all released at the start"),
    key("trace", S::Workload, F::Text, U::Text, "CSV file with columns arrival,size[,class,priority,tickets,weight,deadline,task], or a closed trace task,think,size[,class] (each task thinks, sends its next row, waits for it); times in ms"),
    key("classes", S::Workload, F::Tables, U::Table, "job classes (see the class keys)"),
    key("bursts", S::Workload, F::Int, U::Count, "CPU bursts per job, with I/O between them; default 1"),
    key("io", S::Workload, F::Dist, U::Time, "I/O of a job: a distribution of waits (ms) between two bursts, or sleep:DIST / dsync:BYTES after each burst"),
    key("final_io", S::Workload, F::Bool, U::Bool, "a job waits for an I/O after its last burst too and ends when it is over, with a run of no time (a process that sleeps or writes after each burst, then exits: the form of sleep:DIST / dsync:BYTES); default false"),
    key("io_device", S::Workload, F::Text, U::Text, "delay (every I/O waits its time) or fcfs (one device serves I/Os in turn); default delay"),
    key("allow_unstable", S::Workload, F::Bool, U::Bool, "run an open system at load >= 1"),
    key("bytes", S::Workload, F::Dist, U::Bytes, "file size distribution in bytes (server), instead of `size` through the cost model"),
    key("files", S::Workload, F::Int, U::Count, "files in the server's generated catalogue (per class); default 100"),
    key("catalogue", S::Workload, F::Tables, U::Table, "explicit files (server): list of {path, bytes, weight, class}"),
    key("zipf", S::Workload, F::Float, U::Ratio, "pick files by a Zipf law of this exponent instead of uniformly (server)"),
    key("burst", S::Workload, F::Tables, U::Table, "scripted burst (server): list of {at (ms), count, bytes|size|path, class}"),

    key("cpus", S::Machine, F::Cpus, U::Cpus, "CPUs (the server's worker threads): a count, or a list of CPU numbers (os); default 1 (sim), 2 (server), all usable (os)"),
    key("context_switch", S::Machine, F::Float, U::Time, "time a CPU spends switching to a different job (ms); default 0"),
    key("turn_cost", S::Machine, F::Float, U::Time, "time a CPU spends on a run that goes on with the job it ran just before, after that job's slice expired (a server worker's turn: its wake-up and last write; a run after another job's costs context_switch instead; ms); default 0"),
    key("start_cost", S::Machine, F::Float, U::Time, "time a CPU spends on a job's first run before its service begins, on top of any switch (a server's fixed cost per request, spent with its first packet; ms); default 0"),
    key("service_scale", S::Machine, F::Float, U::Ratio, "a job of size s takes max(service_scale x s + service_offset, 0) ms of CPU (a calibrated machine's real costs, see profile); default 1"),
    key("service_offset", S::Machine, F::Float, U::Time, "see service_scale (ms, may be negative: the part of a size a machine spends otherwise, as start_cost); default 0"),
    key("dispatch_delay", S::Machine, F::Float, U::Time, "time between a job's submission and its arrival at the machine, counted in its response (a request's way from its client to a worker and back; ms); default 0"),
    key("idle_wake", S::Machine, F::Float, U::Time, "time a job that finds the machine empty (no job in it) spends on its first run before its service begins, on top of start_cost (an idle machine's wake-up: a sleeping server's thread, a halted CPU; ms); default 0"),
    key("end_cost", S::Machine, F::Float, U::Time, "time a CPU spends after a job's completion before it takes another job (a process's exit and reaping, after its last run: after a final I/O, the run that ends the job comes when the policy gives it a CPU again; ms); default 0"),
    key("wake_delay", S::Machine, F::Float, U::Time, "time between the end of a job's I/O wait and its return to the runqueue, the CPU free meanwhile (a real process's wake-up: its timer's overshoot and the hand-off to its scheduler; counted in the job's I/O time; ms); default 0"),
    key("dispatcher_cost", S::Machine, F::Float, U::Time, "CPU time a user-space dispatcher that lives on CPU 0, above the jobs, spends there for each job's first run on any CPU (schedlab's os-world dispatcher sharing the workers' CPUs): it delays what CPU 0 runs then (ms); default 0"),
    key("profile", S::Machine, F::Text, U::Text, "machine profile (TOML) written by schedlab calibrate, or calibrate (experiment files: measure the real world first, the server or real processes, the parts of it the calibrated runs read): the calibrated world models the costs it measured (service_scale, service_offset, start_cost, end_cost, turn_cost, context_switch, migration_cost, dispatch_delay, idle_wake, wake_delay)"),
    key("runqueues", S::Machine, F::Text, U::Text, "global (one queue for all CPUs) or per-cpu (one policy instance per CPU); default global"),
    key("placement", S::Machine, F::Text, U::Text, "per-cpu: where a new or waking task goes: rr, last, least-tasks, least-weight, least-tickets, random, pod, jsq; default rr"),
    key("choices", S::Machine, F::Int, U::Count, "placement pod: CPUs sampled (power of d choices); default 2"),
    key("balancer", S::Machine, F::Text, U::Text, "per-cpu load balancer: none, linux, linux26 (Linux 2.6.22, with its reluctance), windows, steal; default none"),
    key("balance_interval", S::Machine, F::Float, U::Time, "linux: shortest period between balancing passes of a CPU; steal: retry period of an idle CPU (ms); default 4"),
    key("balance_interval_max", S::Machine, F::Float, U::Time, "linux: longest period, reached by doubling while balanced (ms); default 128"),
    key("imbalance", S::Machine, F::Float, U::Ratio, "linux: balance when the busiest CPU has more than this times the load of this one; default 1.25"),
    key("migration_cost", S::Machine, F::Float, U::Time, "time a migrated job spends on its new CPU before doing work (cache refill, ms); default 0"),
    key("cache_hot", S::Machine, F::Float, U::Time, "a job that ran on a CPU within this time (ms) is cache-hot there and moved last; default 0.5"),
    key("timeslice", S::Machine, F::Float, U::Work, "time-sharing slice owned by the task, in ms of service: replaces the policy's quantum or slice, and a task keeps the rest of its slice across job boundaries; refused by a policy without one (fcfs, lcfs, sjf, psjf, srpt and edf would be time-sliced under their own names; ps, gps and fb without a quantum share the CPU continuously)"),
    key("affinity", S::Machine, F::Cpus, U::Cpus, "CPUs every task may run on (a class's own affinity overrides it)"),
    key("start_pinned", S::Machine, F::Cpus, U::Cpus, "every task starts confined to this CPU (then balancing may move it)"),
    key("ideal", S::Machine, F::Cpus, U::Cpus, "ideal CPU of each task, where its wake-ups return (placement rr, the windows balancer): start (the CPU it started on; default), round-robin (task i gets CPU i mod m, as Windows assigns ideal processors at thread creation, wherever the task starts) or a list of CPUs given to the tasks in turn"),
    key("release_after", S::Machine, F::Float, U::Time, "ms after the start at which tasks started on start_pinned may run anywhere; default 0 in the simulator (free at once: the balancer may move them from the start)"),
    key("boost", S::Machine, F::Text, U::Text, "wake-up boosts of priority: none, windows (by I/O kind, decays a level per quantum) or linux26 (interactivity bonus); default none"),
    key("boost_max", S::Machine, F::Float, U::Ratio, "linux26: largest bonus in priority levels; default 5"),
    key("sleep_avg_max", S::Machine, F::Float, U::Time, "linux26: sleep average that earns the full bonus (ms); default 1000"),
    key("enforce", S::Machine, F::Text, U::Text, "os user-space dispatcher: stop (SIGSTOP/SIGCONT) or fifo (also run the chosen workers at SCHED_FIFO 1, so they beat foreign load); default stop"),
    key("buffer", S::Machine, F::Int, U::Count, "bounded buffer: jobs waiting for a CPU at most (a server's requests waiting for a worker); further arrivals wait outside, in order (simulator: global runqueue; default unbounded); server default 128"),
    key("packet", S::Machine, F::Int, U::Count, "server: packet size in bytes (default 65536) or lines (default 10), see packet_unit"),
    key("packet_unit", S::Machine, F::Text, U::Text, "server: bytes or lines; default bytes"),
    key("cost", S::Machine, F::Text, U::Text, "server: emulated cost per request, fixed + per size, e.g. 0ms+0.1ms/KB; default none (real cost only)"),
    key("cost_mode", S::Machine, F::Text, U::Text, "server: sleep or spin; default sleep"),
    key("max_connections", S::Machine, F::Int, U::Count, "server: open connections at most; default 10000"),
    key("header_timeout", S::Machine, F::Float, U::Time, "server: ms to receive a request head once begun; default 10000"),
    key("idle_timeout", S::Machine, F::Float, U::Time, "server: ms a kept-alive connection may idle; default 30000"),
    key("send_timeout", S::Machine, F::Float, U::Time, "server: ms a response may go without its client taking any of it before it is closed (a stalled reader is parked, not waited for); default 30000"),
    key("drain_timeout", S::Machine, F::Float, U::Time, "server: ms to finish requests in flight at stop; default 30000"),

    key("seed", S::Experiment, F::Int, U::Count, "random seed; same seed, same run; default 1"),
    key("warmup", S::Experiment, F::IntOrAuto, U::Count, "jobs discarded at the start (by arrival order), or auto: chosen by MSER-5 on the responses; default auto for open workloads, 0 otherwise"),
    key("precision", S::Experiment, F::Float, U::Ratio, "run until the mean response's 95% interval is this narrow: half-width over mean, e.g. 0.01; jobs is then the first look"),
    key("max_jobs", S::Experiment, F::Int, U::Count, "sim: cap of a run until precise, in measured jobs; default 100000000"),
    key("max_time", S::Experiment, F::Float, U::Time, "server and os: cap of a run until precise, in ms (required with precision there)"),
    key("warmup_time", S::Experiment, F::Float, U::Time, "jobs arriving before this time (ms) are discarded"),
    key("batches", S::Experiment, F::Int, U::Count, "split the measured jobs into this many batches (sizes within one job of each other) and report each batch's mean response (batch means)"),
    key("threads", S::Experiment, F::Int, U::Count, "server: load generator threads; default 1"),
    key("connections", S::Experiment, F::Int, U::Count, "server, open loop: client connections at most; default 1000"),
    key("timeout", S::Experiment, F::Float, U::Time, "server: ms before a request counts as failed; default 30000"),
    key("miss", S::Experiment, F::Float, U::Time, "server: a send later than this (ms) counts as missed; default 1"),
    key("keep_alive", S::Experiment, F::Bool, U::Bool, "server: clients reuse connections; default true"),
    key("hard_timeout", S::Experiment, F::Float, U::Time, "os: kill every worker after this many ms; default derived from the work"),
    key("rttime", S::Experiment, F::Float, U::Time, "os: RLIMIT_RTTIME of fifo/rr workers (ms of CPU without blocking); default derived"),
    key("job_counters", S::Experiment, F::Bool, U::Bool, "os: read run-queue wait and migrations at every job's end; default true"),
    key("io_dir", S::Experiment, F::Text, U::Text, "os: directory for O_DSYNC files (a real file system); default /var/tmp"),
    key("quiet_wait", S::Experiment, F::Float, U::Time, "os noise gate: wait up to this many ms for a quiet machine before starting; default 5000"),
    key("noise_threshold", S::Experiment, F::Float, U::Ratio, "noise gate (os, server): fraction of the CPUs used by others that flags a run noisy; default 0.1"),
    key("retry_noisy", S::Experiment, F::Int, U::Count, "os, server: rerun a trial flagged noisy up to this many times; default 0"),
    key("pretend_missing", S::Experiment, F::Tables, U::Text, "os, testing: kernel counters to treat as absent (schedstat, sched, tracefs)"),

    key("keep_jobs", S::Output, F::Bool, U::Bool, "return the per-job table"),
    key("keep_schedule", S::Output, F::Bool, U::Bool, "return every run segment (cpu, job, task, start, end)"),
    key("load_sample", S::Output, F::Float, U::Time, "sample the runnable jobs of every CPU at this period (ms): a time series"),
    key("trace_migrations", S::Output, F::Bool, U::Bool, "os: record every move of a task between CPUs from the kernel's trace (tracefs, root), with the path that moved it (idle, busy or newly-idle balance, wake-up, affinity); default false"),
    key("hdr_log", S::Output, F::Text, U::Text, "server: keep the HdrHistogram interval log at this path"),
    key("server_log", S::Output, F::Text, U::Text, "server: keep the server's per-request CSV log at this path"),
];

/// Every key of a `[[workload.classes]]` table.
#[rustfmt::skip]
pub const CLASS_KEYS: &[Key] = &[
    key("name", S::Class, F::Text, U::Text, "label of the class; default its index"),
    key("fraction", S::Class, F::Float, U::Ratio, "share of arrivals (open workloads), of clients or of requests, 0 to 1; classes without one share what the others leave, and given for every class they add up to 1"),
    key("size", S::Class, F::Dist, U::Work, "size distribution of this class; default the global size"),
    key("bytes", S::Class, F::Dist, U::Bytes, "file size distribution in bytes of this class (server)"),
    key("priority", S::Class, F::Float, U::Ratio, "priority (lower runs first); default 0"),
    key("tickets", S::Class, F::Float, U::Ratio, "lottery or stride tickets; default 1"),
    key("weight", S::Class, F::Float, U::Ratio, "share weight (gps, cfs, eevdf); default 1, or from nice"),
    key("nice", S::Class, F::Int, U::Ratio, "nice value -20..19: a weight by the kernel's table, and the kernel's nice (os)"),
    key("deadline", S::Class, F::Float, U::Time, "relative deadline (edf; SCHED_DEADLINE on the os world); default none"),
    key("clients", S::Class, F::Int, U::Count, "closed workload: clients of this class"),
    key("batch", S::Class, F::Int, U::Count, "one-shot tasks of this class"),
    key("think", S::Class, F::Dist, U::Time, "think-time distribution of this class's clients; default the global think"),
    key("bursts", S::Class, F::Int, U::Count, "CPU bursts per job of this class; default the global bursts"),
    key("io", S::Class, F::Dist, U::Time, "I/O of this class's jobs; default the global io"),
    key("final_io", S::Class, F::Bool, U::Bool, "this class's jobs end with an I/O; default the global final_io"),
    key("io_kind", S::Class, F::Text, U::Text, "what the I/O waits for, for windows boosts: disk, network, keyboard, sound; default disk"),
    key("affinity", S::Class, F::Cpus, U::Cpus, "CPUs this class's tasks may run on, e.g. [0, 1]; default all"),
    key("start_pinned", S::Class, F::Cpus, U::Cpus, "CPUs this class starts confined to (os)"),
    key("release_after", S::Class, F::Float, U::Time, "ms until this class is released from start_pinned (os)"),
    key("prefix", S::Class, F::Text, U::Text, "URL prefix of this class's files (server); default /NAME/"),
    key("sched", S::Class, F::Text, U::Text, "kernel policy of this class (os)"),
    key("rtprio", S::Class, F::Int, U::Count, "real-time priority of this class (os fifo, rr)"),
    key("runtime", S::Class, F::Float, U::Time, "SCHED_DEADLINE runtime of this class (ms)"),
    key("period", S::Class, F::Float, U::Time, "SCHED_DEADLINE period of this class (ms)"),
    key("rttime", S::Class, F::Float, U::Time, "RLIMIT_RTTIME of this class (ms, os)"),
];

pub fn find(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

pub fn find_class(name: &str) -> Option<&'static Key> {
    CLASS_KEYS.iter().find(|k| k.name == name)
}

/// Every world names a class by its name in every table (class rows, tasks, shares): two
/// classes of one name would be one row. The first repeated name is the error.
pub fn check_class_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), SpecError> {
    let mut seen = std::collections::HashSet::new();
    for (i, name) in names.into_iter().enumerate() {
        if !seen.insert(name) {
            return Err(SpecError::new(
                format!("classes[{i}].name"),
                name,
                "a name no other class has",
            ));
        }
    }
    Ok(())
}

/// The keys of the kernel's own policies (`policy = "kernel"`).
pub fn kernel_params() -> impl Iterator<Item = &'static Key> {
    KEYS.iter()
        .filter(|k| k.section == Section::Policy && !matches!(k.name, "policy" | "params"))
}

/// String equality usable in `const` checks (`==` on `str` is not `const` yet).
pub const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `name` is a key of this vocabulary (outside class tables). `const`, so that a
/// collision with a policy parameter is a compile error.
pub const fn is_key(name: &str) -> bool {
    let mut i = 0;
    while i < KEYS.len() {
        if same(KEYS[i].name, name) {
            return true;
        }
        i += 1;
    }
    false
}

const fn unique(keys: &[Key]) -> bool {
    let mut i = 0;
    while i < keys.len() {
        let mut j = i + 1;
        while j < keys.len() {
            if same(keys[i].name, keys[j].name) {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

const _: () = assert!(unique(KEYS), "a key is declared twice in KEYS");
const _: () = assert!(unique(CLASS_KEYS), "a key is declared twice in CLASS_KEYS");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_and_kernel_params() {
        assert_eq!(find("quantum").map(|k| k.name), None);
        assert_eq!(find("timeslice").map(|k| k.unit), Some(Unit::Work));
        assert_eq!(
            find_class("tickets").map(|k| k.section),
            Some(Section::Class)
        );
        let kernel: Vec<_> = kernel_params().map(|k| k.name).collect();
        assert_eq!(
            kernel,
            ["sched", "nice", "rtprio", "runtime", "deadline", "period"]
        );
        assert!(is_key("boost") && !is_key("boost_period"));
    }
}
