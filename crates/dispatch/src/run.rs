//! The coordinator: forks the workers, reads their baselines, gives the start signal, watches
//! them (placement samples, release of a pinned start, time limit, hard timeout, or the
//! user-space dispatcher's decisions), reaps them and collects everything.
//!
//! It is also the watchdog: once the workers are set up it raises itself to SCHED_FIFO one
//! priority above every worker, so it always gets a CPU to stop or kill them. Any way out of
//! [`run`] — success, error, panic, SIGTERM/SIGINT — kills and reaps every child (a guard whose
//! `Drop` does it), and the workers die with their coordinator (PR_SET_PDEATHSIG).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use schedlab_model::SpecError;

use crate::dispatcher::Dispatcher;
use crate::output::{Coordinator, Jobs, Output, Samples, TaskOut};
use crate::plan::{is_rt, Checked, IoPlan, Plan, TaskPlan};
use crate::precise;
use crate::procfs::{self, Hide, Missing, ProcFiles};
use crate::shm::{state, step, Shm, MISSING};
use crate::sys;
use crate::worker;

#[derive(Debug)]
pub enum RunError {
    /// A bad plan: the key, the value and what is allowed.
    Spec(SpecError),
    /// The kernel does not allow what the plan asks (policy, RT budget, affinity).
    Refused {
        what: String,
        reason: String,
    },
    /// Interrupted by SIGTERM, SIGINT or SIGHUP; every worker was killed and reaped.
    Interrupted(String),
    Failed(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spec(e) => write!(f, "{e}"),
            RunError::Refused { what, reason } => write!(f, "kernel refused {what}: {reason}"),
            RunError::Interrupted(why) => write!(f, "interrupted: {why}"),
            RunError::Failed(why) => write!(f, "{why}"),
        }
    }
}

/// Kills and reaps every child it holds when dropped.
struct Children {
    pids: Vec<i32>,
    reaped: Vec<bool>,
}

impl Children {
    fn kill_all(&self) {
        for (i, &p) in self.pids.iter().enumerate() {
            if !self.reaped[i] {
                sys::kill(p, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.kill_all();
        for (i, &p) in self.pids.iter().enumerate() {
            if !self.reaped[i] {
                sys::reap(p, true);
                self.reaped[i] = true;
            }
        }
    }
}

/// RLIMIT_RTTIME soft limit of the real-time coordinator (µs); the hard limit is twice it.
pub const COORDINATOR_RTTIME_US: u64 = 1_000_000;

/// The errno name and what it means for a policy request.
fn explain(e: i32, what: &str) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::ENOMEM => "ENOMEM",
        libc::ENOSPC => "ENOSPC",
        libc::EACCES => "EACCES",
        _ => "errno",
    };
    let hint = match (e, what) {
        (libc::EPERM, "sched") => {
            ": not permitted (needs CAP_SYS_NICE, or the cgroup has no RT budget: \
             cpu.rt_runtime_us = 0)"
        }
        (libc::EBUSY, "sched") => {
            ": SCHED_DEADLINE admission control refused the bandwidth \
             (runtime/period above what is left of sched_rt_runtime_us/sched_rt_period_us)"
        }
        (libc::EINVAL, "sched") => ": parameters not accepted by this kernel",
        (libc::EINVAL, "affinity") => ": no allowed CPU in the mask",
        _ => "",
    };
    format!("{name} ({}){hint}", sys::strerror(e))
}

fn policy_name(p: u32) -> &'static str {
    match p {
        sys::SCHED_OTHER => "SCHED_OTHER",
        sys::SCHED_FIFO => "SCHED_FIFO",
        sys::SCHED_RR => "SCHED_RR",
        sys::SCHED_BATCH => "SCHED_BATCH",
        sys::SCHED_IDLE => "SCHED_IDLE",
        sys::SCHED_DEADLINE => "SCHED_DEADLINE",
        _ => "unknown policy",
    }
}

fn describe_attr(a: &sys::Attr) -> String {
    match a.policy {
        sys::SCHED_FIFO | sys::SCHED_RR => {
            format!("{} priority {}", policy_name(a.policy), a.rtprio)
        }
        sys::SCHED_DEADLINE => format!(
            "SCHED_DEADLINE runtime {} ms, deadline {} ms, period {} ms",
            a.runtime_ns as f64 / 1e6,
            a.deadline_ns as f64 / 1e6,
            a.period_ns as f64 / 1e6
        ),
        p => format!("{} nice {}", policy_name(p), a.nice),
    }
}

pub fn read_i64(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn rttime_limit(pid: i32) -> Option<(String, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = text
        .lines()
        .find(|l| l.starts_with("Max realtime timeout"))?;
    let f: Vec<&str> = line["Max realtime timeout".len()..]
        .split_whitespace()
        .collect();
    Some((f.first()?.to_string(), f.get(1)?.to_string()))
}

fn capacity(t: &TaskPlan, checked: &Checked, i: usize, time: Option<f64>) -> u64 {
    if let Some(j) = t.jobs {
        return j.max(1);
    }
    let io = match &t.io {
        Some(IoPlan::Sleep(_)) => checked.sleeps[i].as_ref().map_or(0.0, |d| d.mean()),
        Some(IoPlan::Dsync(_)) => 0.05,
        None => 0.0,
    } * t.bursts as f64;
    let per = checked.sizes[i].mean() + checked.thinks[i].as_ref().map_or(0.0, |d| d.mean()) + io;
    let time = time.unwrap_or(1000.0);
    ((time / per.max(0.01)) * 4.0 + 64.0).min((1u64 << 20) as f64) as u64
}

fn ns_ms(v: u64) -> f64 {
    v as f64 / 1e6
}

fn opt_ms(v: u64) -> Option<f64> {
    (v != MISSING).then(|| ns_ms(v))
}

fn opt_n(v: u64) -> Option<u64> {
    (v != MISSING).then_some(v)
}

pub fn run(plan: Plan) -> Result<Output, RunError> {
    let checked = plan.check().map_err(RunError::Spec)?;
    let plan = &checked.plan;
    let n = plan.tasks.len();
    match sys::threads_of_self() {
        Some(1) => {}
        other => {
            return Err(RunError::Failed(format!(
                "the coordinator forks its workers and must be single-threaded, but this \
                 process has {other:?} threads; run it through schedlab.osrun, which starts a \
                 fresh single-threaded launcher process"
            )))
        }
    }
    let fifo = plan.dispatcher.as_ref().is_some_and(|d| d.fifo());
    let any_rt = checked.attrs.iter().any(is_rt) || fifo;
    let rt_runtime = read_i64("/proc/sys/kernel/sched_rt_runtime_us");
    if any_rt && plan.refuse_rt_unthrottled && rt_runtime == Some(-1) {
        return Err(RunError::Refused {
            what: "real-time workers".into(),
            reason: "RT throttling is off (kernel.sched_rt_runtime_us = -1): a runaway RT \
                     worker could hold a CPU forever"
                .into(),
        });
    }
    let mut warnings = Vec::new();
    for (i, t) in plan.tasks.iter().enumerate() {
        let a = &checked.attrs[i];
        if matches!(a.policy, sys::SCHED_FIFO | sys::SCHED_RR) && t.rttime_us.is_none() {
            return Err(RunError::Spec(SpecError {
                key: format!("tasks[{i}].rttime_us"),
                value: "(missing)".into(),
                allowed: "an RLIMIT_RTTIME for every fifo/rr worker".into(),
            }));
        }
    }
    // Descriptors: three /proc files per worker stay open.
    let (soft, hard) = sys::get_rlimit(sys::RLIMIT_NOFILE);
    let need = 3 * n as u64 + 64;
    if need > soft {
        if need > hard {
            return Err(RunError::Failed(format!(
                "{n} workers need {need} file descriptors; RLIMIT_NOFILE allows {hard}"
            )));
        }
        let _ = sys::set_rlimit(sys::RLIMIT_NOFILE, need.max(soft), hard);
    }
    if sys::getsid() != sys::getpid() && !sys::setsid() {
        warnings.push(
            "could not start a new session (the caller leads a process group); workers share \
             the caller's session"
                .to_string(),
        );
    }

    let mut caps: Vec<u64> = plan
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| capacity(t, &checked, i, plan.time))
        .collect();
    let rec = std::mem::size_of::<crate::shm::JobRec>() as u64;
    let total: u64 = caps.iter().sum::<u64>() * rec;
    let budget: u64 = 4 << 30;
    if total > budget {
        let scale = budget as f64 / total as f64;
        caps.iter_mut()
            .for_each(|c| *c = ((*c as f64 * scale) as u64).max(16));
    }
    let shm =
        Shm::new(&caps).map_err(|e| RunError::Failed(format!("mmap: {}", sys::strerror(e))))?;
    let hide = Hide::from_names(&plan.pretend_missing);

    let sigs = sys::sigset(&[libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP]);
    let old_mask = sys::block_signals(&sigs);
    let result = coordinate(&checked, &shm, &hide, &sigs, caps, warnings);
    sys::set_signal_mask(&old_mask);
    result
}

struct Task {
    files: Option<ProcFiles>,
    out: TaskOut,
    alive: bool,
    done_seen: bool,
    released: bool,
}

/// Every CPU some task starts confined to, in order; empty without a pinned start.
fn start_cpu_union(plan: &Plan) -> Vec<usize> {
    let mut cpus: Vec<usize> = plan
        .tasks
        .iter()
        .filter_map(|t| t.start_cpus.as_deref())
        .flatten()
        .copied()
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

fn coordinate(
    checked: &Checked,
    shm: &Shm,
    hide: &Hide,
    sigs: &libc::sigset_t,
    _caps: Vec<u64>,
    mut warnings: Vec<String>,
) -> Result<Output, RunError> {
    let plan = &checked.plan;
    let n = plan.tasks.len();
    let setup_start = sys::now_ns();
    let sigfd = sys::signalfd(sigs)
        .map_err(|e| RunError::Failed(format!("signalfd: {}", sys::strerror(e))))?;
    let efd =
        sys::eventfd().map_err(|e| RunError::Failed(format!("eventfd: {}", sys::strerror(e))))?;
    let tfd =
        sys::timerfd().map_err(|e| RunError::Failed(format!("timerfd: {}", sys::strerror(e))))?;
    let me = sys::getpid();
    let dispatched = plan.dispatcher.is_some();
    let fifo = plan.dispatcher.as_ref().is_some_and(|d| d.fifo());

    let mut children = Children {
        pids: Vec::with_capacity(n),
        reaped: Vec::with_capacity(n),
    };
    for i in 0..n {
        match sys::fork() {
            Ok(sys::Forked::Child) => worker::main(worker::Ctx {
                shm,
                idx: i,
                checked,
                parent: me,
                efd: efd.0,
                dispatched,
                enforce_fifo: fifo,
                hide_schedstat: hide.schedstat,
                hide_sched: hide.sched,
            }),
            Ok(sys::Forked::Parent(pid)) => {
                children.pids.push(pid);
                children.reaped.push(false);
            }
            Err(e) => {
                return Err(RunError::Failed(format!(
                    "fork of worker {i}: {}",
                    sys::strerror(e)
                )))
            }
        }
    }
    let index: HashMap<i32, usize> = children
        .pids
        .iter()
        .enumerate()
        .map(|(i, &p)| (p, i))
        .collect();

    // Wait until every worker is set up (or one failed).
    let setup_deadline = sys::now_ns() + 10_000_000_000 + n as u64 * 20_000_000;
    loop {
        let mut ready = 0;
        for i in 0..n {
            let s = shm.slot(i).state.load(Ordering::Acquire);
            if s == state::FAILED {
                let slot = shm.slot(i);
                let e = slot.setup_errno.load(Ordering::Relaxed);
                let which = slot.setup_step.load(Ordering::Relaxed);
                let a = &checked.attrs[i];
                let (what, reason) = match which {
                    step::SCHED => (
                        describe_attr(a),
                        format!("sched_setattr: {}", explain(e, "sched")),
                    ),
                    step::RLIMIT => (
                        "RLIMIT_RTTIME".to_string(),
                        format!("setrlimit: {}", explain(e, "rlimit")),
                    ),
                    step::AFFINITY => (
                        "the CPU affinity".to_string(),
                        format!("sched_setaffinity: {}", explain(e, "affinity")),
                    ),
                    step::IO_FILE => {
                        return Err(RunError::Failed(format!(
                            "worker {i} could not open its O_DSYNC file in {:?}: {}",
                            plan.io_dir,
                            sys::strerror(e)
                        )))
                    }
                    _ => {
                        return Err(RunError::Failed(format!(
                            "worker {i} lost its parent during setup"
                        )))
                    }
                };
                return Err(RunError::Refused {
                    what: format!("{what} for task {i}"),
                    reason,
                });
            }
            if s == state::WAITING || s == state::READY {
                ready += 1;
            }
        }
        if ready == n {
            break;
        }
        if sys::now_ns() > setup_deadline {
            return Err(RunError::Failed(format!(
                "only {ready} of {n} workers were set up within the setup time"
            )));
        }
        let r = sys::poll_readable(&[sigfd.0, efd.0], 50);
        if r[1] {
            sys::eventfd_drain(&efd);
        }
        if r[0] {
            for sig in sys::signalfd_read(&sigfd) {
                if sig as i32 != libc::SIGCHLD {
                    return Err(RunError::Interrupted(format!(
                        "{} during setup",
                        sys::signal_name(sig as i32)
                    )));
                }
            }
            // A worker that exits before it is set up has failed without saying why.
            while let Some(pid) = sys::exited_child() {
                let i = index.get(&pid).copied();
                let status = sys::reap(pid, true);
                if let Some(i) = i {
                    children.reaped[i] = true;
                    if shm.slot(i).state.load(Ordering::Acquire) != state::FAILED {
                        return Err(RunError::Failed(format!(
                            "worker {i} exited during setup: {:?}",
                            status.map(|s| s.0)
                        )));
                    }
                }
            }
        }
    }

    // Baselines, read before the start so early waiting is counted.
    let mut missing = Missing::new();
    let mut buf = Vec::new();
    let mut tasks: Vec<Task> = Vec::with_capacity(n);
    for (i, &pid) in children.pids.iter().enumerate() {
        let files = ProcFiles::open(pid, hide);
        // Only a sleeping worker's run-queue delay is settled: the kernel adds a wait to
        // run_delay when the wait ends. A worker that said WAITING may still be queued on its
        // way to the futex; read its baseline once it is asleep.
        // (Asleep is 'S': in D it would still queue for a CPU after waking.)
        let asleep_by = sys::now_ns() + 2_000_000_000;
        loop {
            let st = files
                .stat
                .as_ref()
                .and_then(|fd| sys::pread_text(fd, &mut buf).and_then(procfs::state_and_cpu));
            if matches!(st, Some((b'S', _)) | None) {
                break;
            }
            if sys::now_ns() > asleep_by {
                warnings.push(format!(
                    "task {i} was not asleep when its baseline was read: its first run-queue \
                     wait may include time before the start"
                ));
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let base = files.read(&mut buf, &mut missing);
        let slot = shm.slot(i);
        slot.base_run_delay
            .store(base.run_delay_ns.unwrap_or(MISSING), Ordering::Release);
        slot.base_nvcsw
            .store(base.nvcsw.unwrap_or(MISSING), Ordering::Release);
        slot.base_nivcsw
            .store(base.nivcsw.unwrap_or(MISSING), Ordering::Release);
        slot.base_migrations
            .store(base.migrations.unwrap_or(MISSING), Ordering::Release);
        let (autogroup, cgroup) = procfs::groups_of(pid);
        let t = &plan.tasks[i];
        tasks.push(Task {
            files: Some(files),
            out: TaskOut {
                task: i,
                class: t.class,
                pid,
                policy_applied: sys::get_policy(pid),
                rttime_limit_us: rttime_limit(pid),
                autogroup,
                cgroup,
                base,
                ..Default::default()
            },
            alive: true,
            done_seen: false,
            released: t.start_cpus.is_none(),
        });
    }

    // The watchdog: one RT priority above every worker.
    let max_rt = checked
        .attrs
        .iter()
        .filter(|a| matches!(a.policy, sys::SCHED_FIFO | sys::SCHED_RR))
        .map(|a| a.rtprio)
        .max()
        .unwrap_or(if fifo { 2 } else { 0 });
    let wprio = (max_rt + 1).min(99);
    // A short RLIMIT_RTTIME for this process (launcher, coordinator and dispatcher in one)
    // before it turns real-time: it blocks in poll every few ms, so only a hang would run it
    // 1 s without blocking, and then the kernel stops it (SIGXCPU, then SIGKILL at 2 s) and
    // its workers die with it. Set after the workers are forked: they must not inherit it.
    if let Err(e) = sys::set_rlimit(
        sys::RLIMIT_RTTIME,
        COORDINATOR_RTTIME_US,
        2 * COORDINATOR_RTTIME_US,
    ) {
        warnings.push(format!(
            "the watchdog runs without RLIMIT_RTTIME: {}",
            explain(e, "rlimit")
        ));
    }
    let mut coordinator = Coordinator {
        pid: me,
        setup_ms: ns_ms(sys::now_ns() - setup_start),
        ..Default::default()
    };
    match sys::set_sched(
        0,
        &sys::Attr {
            policy: sys::SCHED_FIFO,
            rtprio: wprio,
            ..Default::default()
        },
    ) {
        Ok(()) => coordinator.watchdog_rtprio = Some(wprio),
        Err(e) => {
            coordinator.watchdog_error = Some(explain(e, "sched"));
            warnings.push(format!(
                "the watchdog could not take SCHED_FIFO {wprio}: {}",
                explain(e, "sched")
            ));
        }
    }

    // A pinned start measures how the kernel fills the other CPUs: the coordinator keeps off
    // them, since each of its sleeps there (every sample) gives the kernel a newly-idle pull
    // the tasks alone would not have (study 002's README: 14% of slow balancing confined,
    // 42% not). Its workers are forked already and set their own affinity.
    let start_cpus = start_cpu_union(plan);
    if !start_cpus.is_empty() {
        match sys::set_affinity(0, &start_cpus) {
            Ok(()) => coordinator.cpus = Some(start_cpus),
            Err(e) => warnings.push(format!(
                "the coordinator could not keep to the start CPUs {start_cpus:?}: {}",
                explain(e, "affinity")
            )),
        }
    }
    let cpu_before = procfs::read_cpu_times();
    let usage0 = sys::usage(false);
    let mut measure_ns: u64 = 0;
    let mut samples = Samples::default();
    let ctl = shm.control();

    // Start.
    let t0 = sys::now_ns();
    ctl.t0_ns.store(t0, Ordering::Release);
    let mut dispatcher = match &plan.dispatcher {
        Some(d) => Some(Dispatcher::new(checked, d, &children.pids, t0).map_err(RunError::Failed)?),
        None => None,
    };
    ctl.go.store(1, Ordering::Release);
    match dispatcher.as_mut() {
        Some(d) => d.start(shm, t0),
        None => sys::futex_wake(&ctl.go, i32::MAX),
    }

    let ms = |abs: u64| abs.saturating_sub(t0) as f64 / 1e6;
    let at = |ms: f64| t0 + (ms * 1e6) as u64;
    let mut next_sample = plan.sample.map(|_| t0);
    let stop_at = plan.time.map(at);
    let mut watch = precise::Watch::new(plan);
    let mut next_poll = watch.as_ref().map(|_| t0 + precise::POLL_NS);
    let mut stopped_precise = false;
    let hard_at = at(plan.hard_timeout);
    let mut stopped = false;
    let mut killed = false;
    let mut interrupted: Option<String> = None;
    let mut alive = n;
    let mut contended: Option<(f64, String)> = None;

    // Snapshot of everyone's counters at the end of the contended interval.
    let snapshot = |tasks: &mut Vec<Task>, buf: &mut Vec<u8>, missing: &mut Missing| {
        for t in tasks.iter_mut() {
            if let Some(f) = &t.files {
                t.out.contended = f.read(buf, missing);
            }
        }
    };
    let mut dispatch_shares: Option<(Vec<f64>, Vec<f64>)> = None;
    // Closes the contended interval: its end, the dispatcher's shares and everyone's counters.
    macro_rules! close_contended {
        ($now:expr, $why:expr) => {{
            let m0 = sys::thread_cpu_ns();
            contended = Some((ms($now), $why));
            if let Some(d) = dispatcher.as_mut() {
                dispatch_shares = Some(d.shares_now($now));
            }
            snapshot(&mut tasks, &mut buf, &mut missing);
            measure_ns += sys::thread_cpu_ns() - m0;
        }};
    }

    while alive > 0 {
        let mut deadline = hard_at;
        if let (Some(s), false) = (stop_at, stopped) {
            deadline = deadline.min(s);
        }
        if let Some(s) = next_sample {
            deadline = deadline.min(s);
        }
        if let (Some(p), false) = (next_poll, stopped) {
            deadline = deadline.min(p);
        }
        for (i, t) in tasks.iter().enumerate() {
            if !t.released && t.alive {
                let r = at(plan.tasks[i].release_after.unwrap_or(0.0));
                deadline = deadline.min(r);
            }
        }
        if let Some(d) = &dispatcher {
            deadline = deadline.min(d.next_deadline());
        }
        if killed {
            deadline = sys::now_ns() + 100_000_000;
        }
        sys::timerfd_at(&tfd, deadline);
        let r = sys::poll_readable(&[sigfd.0, efd.0, tfd.0], 1000);
        let now = sys::now_ns();
        if r[2] {
            sys::timerfd_drain(&tfd);
        }
        if r[0] {
            for sig in sys::signalfd_read(&sigfd) {
                let sig = sig as i32;
                if sig != libc::SIGCHLD && interrupted.is_none() {
                    interrupted = Some(sys::signal_name(sig));
                    // Killed before they are told to stop: a worker that saw the stop first
                    // could exit on its own and not count as killed.
                    children.kill_all();
                    ctl.stop.store(1, Ordering::Release);
                    killed = true;
                }
            }
        }
        // The first job stream to end closes the contended interval. A worker posts DONE,
        // then exits, and one poll can bring its eventfd and its SIGCHLD: what everyone
        // posted is read before anyone is reaped, so its end is named by what it posted,
        // not by which fd came first.
        for i in 0..n {
            if !tasks[i].done_seen && shm.slot(i).state.load(Ordering::Acquire) == state::DONE {
                tasks[i].done_seen = true;
                if contended.is_none() && !stopped {
                    close_contended!(now, format!("task {i} finished its jobs"));
                }
            }
        }
        // Reap whoever exited, reading its final counters first (a zombie keeps them).
        while let Some(pid) = sys::exited_child() {
            let Some(&i) = index.get(&pid) else {
                sys::reap(pid, true);
                continue;
            };
            if contended.is_none() {
                close_contended!(now, format!("task {i} exited"));
            }
            let t = &mut tasks[i];
            if let Some(f) = t.files.take() {
                t.out.end = f.read(&mut buf, &mut missing);
            }
            let (exit, usage) = sys::reap(pid, true).unwrap_or_default();
            children.reaped[i] = true;
            t.alive = false;
            alive -= 1;
            t.out.end_ms = ms(sys::now_ns());
            t.out.exit_code = exit.code;
            t.out.exit_signal = exit.signal.map(sys::signal_name);
            t.out.killed = match exit.signal {
                Some(libc::SIGXCPU) => Some("RLIMIT_RTTIME soft limit exceeded (SIGXCPU)".into()),
                Some(libc::SIGKILL) if interrupted.is_some() => Some(format!(
                    "killed: run interrupted by {}",
                    interrupted.clone().unwrap_or_default()
                )),
                Some(libc::SIGKILL) if killed => Some("killed at the hard timeout".into()),
                Some(libc::SIGKILL) => Some(
                    "SIGKILL from outside the run (RLIMIT_RTTIME hard limit, OOM killer or a user)"
                        .into(),
                ),
                Some(s) => Some(format!("died of {}", sys::signal_name(s))),
                None if exit.code != Some(0) => Some(format!("exit code {:?}", exit.code)),
                None => None,
            };
            t.out.utime_ms = ns_ms(usage.utime_ns);
            t.out.stime_ms = ns_ms(usage.stime_ns);
            t.out.nvcsw = usage.nvcsw;
            t.out.nivcsw = usage.nivcsw;
            t.out.maxrss_kib = usage.maxrss_kib;
            if let Some(d) = dispatcher.as_mut() {
                d.exited(i, shm, now);
            }
        }
        if r[1] {
            sys::eventfd_drain(&efd);
            if let Some(d) = dispatcher.as_mut() {
                if !stopped {
                    d.notice(shm, now);
                }
            }
        }
        let now = sys::now_ns();
        if let Some(d) = dispatcher.as_mut() {
            if !stopped {
                d.expire(shm, now);
            }
        }
        if next_sample.is_some_and(|s| now >= s) {
            let m0 = sys::thread_cpu_ns();
            let tm = ms(now);
            for (i, t) in tasks.iter().enumerate() {
                if let Some(fd) = t.files.as_ref().and_then(|f| f.stat.as_ref()) {
                    if let Some((st, cpu)) =
                        sys::pread_text(fd, &mut buf).and_then(procfs::state_and_cpu)
                    {
                        samples.t.push(tm);
                        samples.task.push(i as u32);
                        samples.cpu.push(cpu);
                        samples.state.push((st as char).to_string());
                    }
                }
            }
            coordinator.samples_taken += 1;
            let period = plan.sample.unwrap_or(1000.0);
            next_sample = next_sample.map(|s| (s + (period * 1e6) as u64).max(now + 100_000));
            measure_ns += sys::thread_cpu_ns() - m0;
        }
        for (i, t) in tasks.iter_mut().enumerate() {
            let task = &plan.tasks[i];
            if !t.released && now >= at(task.release_after.unwrap_or(0.0)) {
                t.released = true;
                if t.alive {
                    t.out.released_ms = Some(ms(sys::now_ns()));
                    let cpus = task.affinity.as_ref().unwrap_or(&plan.cpus);
                    if let Err(e) = sys::set_affinity(t.out.pid, cpus) {
                        warnings.push(format!(
                            "release of task {i} to CPUs {cpus:?} failed: {}",
                            explain(e, "affinity")
                        ));
                    }
                }
            }
        }
        let mut precise_now = false;
        if let (Some(w), Some(p), false) = (watch.as_mut(), next_poll, stopped) {
            if now >= p {
                let m0 = sys::thread_cpu_ns();
                precise_now = w.poll(shm, t0);
                next_poll = Some(now + precise::POLL_NS);
                measure_ns += sys::thread_cpu_ns() - m0;
            }
        }
        if let (Some(s), false) = (stop_at, stopped) {
            if now >= s || precise_now {
                stopped_precise = precise_now && now < s;
                if contended.is_none() {
                    let why = if stopped_precise {
                        "precise"
                    } else {
                        "time limit"
                    };
                    close_contended!(now, why.into());
                }
                stopped = true;
                ctl.stop.store(1, Ordering::Release);
                sys::futex_wake(&ctl.stop, i32::MAX);
                if let Some(d) = dispatcher.as_mut() {
                    d.release_all(shm, now);
                }
            }
        }
        if now >= hard_at && !killed {
            killed = true;
            // Killed before they are told to stop (a worker that saw the stop first could exit
            // on its own: 2 of 3 counted killed in one CI run).
            children.kill_all();
            ctl.stop.store(1, Ordering::Release);
            warnings.push(format!(
                "hard timeout of {} ms reached: every worker was killed",
                plan.hard_timeout
            ));
        }
    }
    let t_end = sys::now_ns();
    let usage1 = sys::usage(false);
    let cpu_after = procfs::read_cpu_times();
    if coordinator.watchdog_rtprio.is_some() {
        let _ = sys::set_sched(0, &sys::Attr::default());
    }
    if let Some(why) = interrupted {
        return Err(RunError::Interrupted(format!(
            "{why}: all {n} workers were killed and reaped"
        )));
    }

    let coord_cpu = ns_ms(
        (usage1.utime_ns + usage1.stime_ns).saturating_sub(usage0.utime_ns + usage0.stime_ns),
    );
    coordinator.cpu_ms = coord_cpu;
    coordinator.measure_cpu_ms = ns_ms(measure_ns);
    let wall_ms = ns_ms(t_end - t0);

    // Jobs from shared memory.
    let mut jobs = Jobs::default();
    for (i, t) in tasks.iter_mut().enumerate() {
        let slot = shm.slot(i);
        let rec_n = slot.recorded.load(Ordering::Acquire);
        for k in 0..rec_n {
            let r = shm.read(i, k);
            jobs.task.push(i as u32);
            jobs.index.push(k);
            jobs.arrival.push(ns_ms(r.arrival));
            jobs.first_run.push(ns_ms(r.first_run));
            jobs.completion.push(ns_ms(r.completion));
            jobs.size.push(ns_ms(r.size));
            jobs.cpu_time.push(ns_ms(r.cpu));
            jobs.runqueue_wait.push(opt_ms(r.run_delay));
            jobs.held.push(ns_ms(r.held));
            jobs.io.push(ns_ms(r.io));
            jobs.voluntary.push(opt_n(r.nvcsw));
            jobs.involuntary.push(opt_n(r.nivcsw));
            jobs.migrations.push(opt_n(r.migrations));
            jobs.cpu.push(r.last_cpu);
        }
        t.out.jobs_done = slot.jobs_done.load(Ordering::Acquire);
        t.out.unfinished = slot.unfinished.load(Ordering::Acquire) as u64;
        t.out.records_dropped = slot.dropped.load(Ordering::Acquire);
        t.out.measure_cpu_ms = ns_ms(slot.measure_ns.load(Ordering::Acquire));
        let done = slot.done_ns.load(Ordering::Acquire);
        t.out.done_ms = (done > 0 && t.out.jobs_done > 0).then(|| ns_ms(done));
        let e = slot.io_errno.load(Ordering::Relaxed);
        if e != 0 {
            t.out.io_error = Some(sys::strerror(e));
        }
        if plan.dispatcher.is_some() {
            t.out.held_ms = Some(ns_ms(slot.held_ns.load(Ordering::Acquire)));
        }
    }
    let mut dstats = None;
    if let Some(mut d) = dispatcher {
        d.finish_stats();
        let (ent, rec) = dispatch_shares.unwrap_or_else(|| d.shares_now(t_end));
        for (i, t) in tasks.iter_mut().enumerate() {
            t.out.entitled_ms = Some(ent[i]);
            t.out.received_ms = Some(rec[i]);
            t.out.dispatches = Some(d.dispatches[i]);
            t.out.home_cpu = d.home_cpu(i);
        }
        let mut stats = std::mem::take(&mut d.stats);
        stats.cpu_ms = (coord_cpu - ns_ms(measure_ns)).max(0.0);
        stats.overhead = stats.cpu_ms / wall_ms.max(1e-9);
        dstats = Some((stats, std::mem::take(&mut d.segments)));
    }
    let (contended_end_ms, contended_end) = contended.unwrap_or((wall_ms, "end of run".into()));
    for t in &mut tasks {
        // A task that never reached the contended snapshot (none taken) gets its end.
        if t.out.contended.cpu_ns.is_none() && t.out.contended.slices.is_none() {
            t.out.contended = t.out.end.clone();
        }
    }
    // SAFETY: sysconf has no pointers.
    let user_hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let (dispatcher_stats, segments) = match dstats {
        Some((s, seg)) => (Some(s), seg),
        None => (None, Default::default()),
    };
    Ok(Output {
        wall_ms,
        start_ns: t0,
        tasks: tasks.into_iter().map(|t| t.out).collect(),
        jobs,
        samples,
        segments,
        contended_end_ms,
        contended_end,
        stopped_by_time: stopped && !stopped_precise,
        stopped_precise,
        precise_jobs: watch.as_ref().map(|w| w.measured()),
        timed_out: killed,
        missing,
        warnings,
        coordinator,
        dispatcher: dispatcher_stats,
        cpu_times_before: cpu_before,
        cpu_times_after: cpu_after,
        user_hz,
    })
}
