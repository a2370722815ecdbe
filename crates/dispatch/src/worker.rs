//! The body of a forked worker: set itself up (limits, affinity, kernel policy), wait for the
//! start, then run its jobs. A job burns an exact amount of the thread's own CPU time
//! (CLOCK_THREAD_CPUTIME_ID), so a 200 ms job is 200 ms of CPU however often it is preempted,
//! with optional I/O after each burst; between jobs it thinks (blocks). After each job it reads
//! its own kernel counters and writes one record to shared memory.

use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::plan::{Checked, IoPlan};
use crate::procfs::{parse_sched, parse_schedstat, Counters, Missing};
use crate::shm::{state, step, JobRec, Shm, Slot, MISSING};
use crate::sys;

pub struct Ctx<'a> {
    pub shm: &'a Shm,
    pub idx: usize,
    pub checked: &'a Checked,
    pub parent: i32,
    pub efd: i32,
    pub dispatched: bool,
    /// Dispatched workers run at SCHED_FIFO 1 (enforce = fifo).
    pub enforce_fifo: bool,
    pub hide_schedstat: bool,
    pub hide_sched: bool,
}

/// Runs the worker and ends the process; never returns into the caller's interpreter.
pub fn main(ctx: Ctx<'_>) -> ! {
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&ctx))).unwrap_or(101);
    sys::exit_now(code)
}

fn fail(ctx: &Ctx<'_>, slot: &Slot, which: u32, e: i32) -> i32 {
    slot.setup_errno.store(e, Ordering::Relaxed);
    slot.setup_step.store(which, Ordering::Relaxed);
    publish(ctx, slot, state::FAILED);
    2
}

fn publish(ctx: &Ctx<'_>, slot: &Slot, s: u32) {
    slot.state.store(s, Ordering::Release);
    slot.seq.fetch_add(1, Ordering::AcqRel);
    sys::eventfd_write(ctx.efd);
}

/// Waits until the dispatcher increments `grant` past `seen`, or the run stops.
fn wait_grant(slot: &Slot, stop: &AtomicU32, seen: u32) {
    // No timeout: a waiting worker must not wake up (and queue for a CPU) while held. A stop
    // comes with a grant, and a dead coordinator takes its workers along (PR_SET_PDEATHSIG).
    while slot.grant.load(Ordering::Acquire) == seen && stop.load(Ordering::Acquire) == 0 {
        sys::futex_wait(&slot.grant, seen, None);
    }
}

/// Iterations of [`spin`] per µs of CPU on this machine, measured once per worker.
fn calibrate() -> u64 {
    let t0 = sys::thread_cpu_ns();
    let mut x = 1u64;
    spin(&mut x, 200_000);
    let ns = (sys::thread_cpu_ns() - t0).max(1);
    (200_000 * 1000 / ns).clamp(10, 100_000)
}

fn spin(x: &mut u64, n: u64) {
    for _ in 0..n {
        *x = black_box(
            x.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
}

/// Burns CPU until the thread's CPU clock reaches `until_ns`; false if the run stopped first.
/// The clock is read between chunks of about 50 µs (less near the end), so reading it costs
/// about 1% of the job and the job ends within a few µs of its size.
fn burn(until_ns: u64, stop: &AtomicU32, per_us: u64) -> bool {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    loop {
        let now = sys::thread_cpu_ns();
        if now >= until_ns {
            return true;
        }
        if stop.load(Ordering::Relaxed) != 0 {
            return false;
        }
        let left_us = (until_ns - now) / 1000;
        spin(&mut x, per_us * left_us.clamp(1, 50));
    }
}

/// Sleeps until the absolute time `until_ns`, waking early if the run stops.
fn sleep_until(until_ns: u64, stop: &AtomicU32) {
    while sys::now_ns() < until_ns && stop.load(Ordering::Acquire) == 0 {
        sys::futex_wait(stop, 0, Some(until_ns));
    }
}

struct Snap {
    run_delay: u64,
    nvcsw: u64,
    nivcsw: u64,
    migrations: u64,
    held: u64,
}

/// This worker's `/proc/thread-self/schedstat` into `c` (nothing where it is hidden or could
/// not be read): the one reader of it, around an I/O or a "ready" and at a job's end.
fn read_schedstat(fd: Option<&sys::Fd>, buf: &mut [u8], c: &mut Counters) {
    if let Some(text) = fd.and_then(|fd| sys::pread_text(fd, buf)) {
        parse_schedstat(text, c);
    }
}

fn delta(a: u64, b: u64) -> u64 {
    if a == MISSING || b == MISSING {
        MISSING
    } else {
        a.saturating_sub(b)
    }
}

fn run(ctx: &Ctx<'_>) -> i32 {
    sys::set_parent_death_signal(libc::SIGKILL);
    let slot = ctx.shm.slot(ctx.idx);
    if sys::getppid() != ctx.parent {
        return fail(ctx, slot, step::PARENT, 0);
    }
    // The interpreter this process was copied from had its own handlers and mask: a worker
    // takes the default actions (SIGINT, SIGTERM kill it; SIGXCPU from RLIMIT_RTTIME too).
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGPIPE,
        libc::SIGXCPU,
        libc::SIGCHLD,
        libc::SIGUSR1,
        libc::SIGUSR2,
    ] {
        sys::default_signal(sig);
    }
    sys::set_signal_mask(&sys::sigset(&[]));

    let plan = &ctx.checked.plan;
    let task = &plan.tasks[ctx.idx];
    let mut attr = ctx.checked.attrs[ctx.idx];
    if ctx.enforce_fifo {
        attr = sys::Attr {
            policy: sys::SCHED_FIFO,
            rtprio: 1,
            ..Default::default()
        };
    }
    if let Some(us) = task.rttime_us {
        if let Err(e) = sys::set_rlimit(sys::RLIMIT_RTTIME, us, us + 1_000_000) {
            return fail(ctx, slot, step::RLIMIT, e);
        }
    }
    if attr.policy != sys::SCHED_DEADLINE {
        let cpus = task
            .start_cpus
            .as_ref()
            .or(task.affinity.as_ref())
            .unwrap_or(&plan.cpus);
        if let Err(e) = sys::set_affinity(0, cpus) {
            return fail(ctx, slot, step::AFFINITY, e);
        }
    }
    if let Err(e) = sys::set_sched(0, &attr) {
        return fail(ctx, slot, step::SCHED, e);
    }
    let io_file = match (&task.io, &plan.io_dir) {
        (Some(IoPlan::Dsync(_)), Some(dir)) => {
            let path = format!("{dir}/schedlab-io-{}-{}", sys::getpid(), ctx.idx);
            match sys::open(
                &path,
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_DSYNC,
                0o600,
            ) {
                Ok(fd) => {
                    // Unlinked at once: the file lives while open and nothing is left behind.
                    sys::unlink(&path);
                    Some(fd)
                }
                Err(e) => return fail(ctx, slot, step::IO_FILE, e),
            }
        }
        _ => None,
    };
    let own = |name: &str| sys::open(&format!("/proc/thread-self/{name}"), libc::O_RDONLY, 0).ok();
    let schedstat_fd = if ctx.hide_schedstat {
        None
    } else {
        own("schedstat")
    };
    let sched_fd = if ctx.hide_sched || !plan.job_counters {
        None
    } else {
        own("sched")
    };
    let mut buf = vec![0u8; 16384];
    // Before the start: calibration is setup, not part of any job.
    let per_us = calibrate();

    let ctl = ctx.shm.control();
    let stop = &ctl.stop;
    if ctx.dispatched {
        publish(ctx, slot, state::READY);
        wait_grant(slot, stop, 0);
        slot.state.store(state::RUN, Ordering::Release);
    } else {
        publish(ctx, slot, state::WAITING);
        // No timeout, for the same reason: between the baseline and the start a worker stays
        // asleep, so the run-queue wait it reports after the start is all the run's.
        while ctl.go.load(Ordering::Acquire) == 0 {
            sys::futex_wait(&ctl.go, 0, None);
        }
    }
    if stop.load(Ordering::Acquire) != 0 {
        return 0;
    }
    let t0 = ctl.t0_ns.load(Ordering::Acquire);
    let rel = |t: u64| t.saturating_sub(t0);

    let seed = task.seed;
    let mut rng_size = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut rng_think = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5851_f42d_4c95_7f2d);
    let mut rng_io = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x1405_7b7e_f767_814f);
    let size_dist = &ctx.checked.sizes[ctx.idx];
    let think = ctx.checked.thinks[ctx.idx].as_ref();
    let sleep_dist = ctx.checked.sleeps[ctx.idx].as_ref();
    let dsync_bytes = match task.io {
        Some(IoPlan::Dsync(b)) => b as usize,
        _ => 0,
    };
    let block = vec![0x5au8; dsync_bytes.max(1)];
    let mut io_offset: u64 = 0;
    let bursts = task.bursts as u64;

    let mut prev = Snap {
        run_delay: slot.base_run_delay.load(Ordering::Acquire),
        nvcsw: slot.base_nvcsw.load(Ordering::Acquire),
        nivcsw: slot.base_nivcsw.load(Ordering::Acquire),
        migrations: slot.base_migrations.load(Ordering::Acquire),
        held: 0,
    };
    let mut arrival_abs = t0;
    let mut k: u64 = 0;
    let mut dummy = Missing::new();

    // Blocks the worker for `f`, telling a dispatcher before and after. Under enforce = fifo
    // the chosen workers run at SCHED_FIFO 1, and a waking worker of the same priority would
    // queue behind the running one, unable even to say it is back: it blocks at FIFO 2, so
    // its wake-up preempts, and returns to FIFO 1 once granted.
    let fifo = |prio: u32| {
        let _ = sys::set_sched(
            0,
            &sys::Attr {
                policy: sys::SCHED_FIFO,
                rtprio: prio,
                ..Default::default()
            },
        );
    };
    // The kernel's count of this worker's run-queue wait (ns), where it shows it.
    let run_delay_now = || -> Option<u64> {
        let mut c = Counters::default();
        read_schedstat(schedstat_fd.as_ref(), &mut [0u8; 128], &mut c);
        c.run_delay_ns
    };
    // The time `f` took (ns) but its wait in the run queue once woken (a sleeper whose time
    // is up waits there for a CPU; schedstat counts that as run-queue wait, so it is not
    // I/O too).
    let timed = |f: &mut dyn FnMut()| -> u64 {
        // The clock is read outside the two counter reads: a preemption at the return of
        // a read counts in the next one, and must fall inside the time measured too.
        let start = sys::now_ns();
        let before = run_delay_now();
        f();
        let took = sys::now_ns() - start;
        match (before, run_delay_now()) {
            (Some(a), Some(b)) => took.saturating_sub(b.saturating_sub(a)),
            _ => took,
        }
    };
    // Run-queue wait inside the dispatcher's count of `held` (ns, all jobs so far): a worker
    // preempted between saying it is ready and sleeping for its grant (the process granted
    // before it woke and took the CPU) waits in the run queue, which schedstat counts, while
    // the dispatcher already counts it held. Taken off `held`, so nothing is counted twice.
    let held_overlap = Cell::new(0u64);
    // Returns the I/O's own time (ns, see `timed`). Under a dispatcher the wait for the
    // grant after it is the dispatcher's hold (`held`), not I/O.
    let blocking = |f: &mut dyn FnMut()| -> u64 {
        if ctx.dispatched {
            if ctx.enforce_fifo {
                fifo(2);
            }
            publish(ctx, slot, state::BLOCK);
            let took = timed(f);
            let seen = slot.grant.load(Ordering::Acquire);
            let ready = run_delay_now();
            publish(ctx, slot, state::READY);
            if let (Some(a), Some(b)) = (ready, run_delay_now()) {
                held_overlap.set(held_overlap.get() + b.saturating_sub(a));
            }
            wait_grant(slot, stop, seen);
            if ctx.enforce_fifo {
                fifo(1);
            }
            slot.state.store(state::RUN, Ordering::Release);
            took
        } else {
            timed(f)
        }
    };

    loop {
        if task.jobs.is_some_and(|n| k >= n) || stop.load(Ordering::Acquire) != 0 {
            break;
        }
        let first_run = sys::now_ns();
        let size_ms = size_dist.sample(&mut rng_size).max(0.0);
        let size_ns = (size_ms * 1e6).round() as u64;
        slot.job_size_ns.store(size_ns, Ordering::Relaxed);
        let cpu0 = sys::thread_cpu_ns();
        let mut io_ns = 0u64;
        let mut aborted = false;
        for b in 0..bursts {
            let target = cpu0 + size_ns * (b + 1) / bursts;
            if !burn(target, stop, per_us) {
                aborted = true;
                break;
            }
            if task.io.is_some() {
                match &task.io {
                    Some(IoPlan::Dsync(_)) => {
                        if let Some(fd) = &io_file {
                            io_ns += blocking(&mut || {
                                if let Err(e) = sys::pwrite_all(fd, &block, io_offset) {
                                    slot.io_errno.store(e, Ordering::Relaxed);
                                }
                            });
                            io_offset = (io_offset + dsync_bytes as u64) % (1 << 20);
                        }
                    }
                    Some(IoPlan::Sleep(_)) => {
                        let d = sleep_dist.map_or(0.0, |d| d.sample(&mut rng_io)).max(0.0);
                        // Timed from the sleep's own start, as a process's nanosleep is: a
                        // worker preempted between its burst and its sleep (the process the
                        // dispatcher granted next woke and took the CPU) waited in the
                        // runqueue, which schedstat counts, and then sleeps its whole time.
                        io_ns +=
                            blocking(&mut || sleep_until(sys::now_ns() + (d * 1e6) as u64, stop));
                    }
                    None => {}
                }
                if stop.load(Ordering::Acquire) != 0 {
                    aborted = true;
                    break;
                }
            }
        }
        let completion = sys::now_ns();
        if aborted {
            slot.unfinished.store(1, Ordering::Relaxed);
            break;
        }
        let cpu_ns = sys::thread_cpu_ns() - cpu0;

        // Measurement: the worker's own counters at the job's end.
        let m0 = sys::thread_cpu_ns();
        let mut c = Counters::default();
        read_schedstat(schedstat_fd.as_ref(), &mut buf, &mut c);
        if let Some(text) = sched_fd
            .as_ref()
            .and_then(|fd| sys::pread_text(fd, &mut buf))
        {
            parse_sched(text, &mut c, &mut dummy);
        }
        let u = sys::usage(true);
        let now = Snap {
            run_delay: c.run_delay_ns.unwrap_or(MISSING),
            nvcsw: u.nvcsw,
            nivcsw: u.nivcsw,
            migrations: c.migrations.unwrap_or(MISSING),
            held: slot
                .held_ns
                .load(Ordering::Acquire)
                .saturating_sub(held_overlap.get()),
        };
        let rec = JobRec {
            arrival: rel(arrival_abs),
            first_run: rel(first_run),
            completion: rel(completion),
            size: size_ns,
            cpu: cpu_ns,
            run_delay: delta(now.run_delay, prev.run_delay),
            held: if ctx.dispatched {
                now.held.saturating_sub(prev.held)
            } else {
                0
            },
            io: io_ns,
            nvcsw: delta(now.nvcsw, prev.nvcsw),
            nivcsw: delta(now.nivcsw, prev.nivcsw),
            migrations: delta(now.migrations, prev.migrations),
            last_cpu: sys::sched_getcpu() as i64,
        };
        if k < ctx.shm.capacity(ctx.idx) {
            ctx.shm.write(ctx.idx, k, &rec);
        } else {
            slot.dropped.fetch_add(1, Ordering::Relaxed);
        }
        prev = now;
        k += 1;
        slot.jobs_done.store(k, Ordering::Release);
        slot.measure_ns
            .fetch_add(sys::thread_cpu_ns() - m0, Ordering::Relaxed);

        if task.jobs.is_some_and(|n| k >= n) {
            break;
        }
        // The next job arrives after the think time: its arrival is the intended time, so a
        // late wake-up counts as waiting.
        arrival_abs = completion;
        if let Some(d) = think {
            let ms = d.sample(&mut rng_think).max(0.0);
            if ms > 0.0 {
                arrival_abs = completion + (ms * 1e6) as u64;
                let until = arrival_abs;
                blocking(&mut || sleep_until(until, stop));
            }
        }
    }
    slot.done_ns.store(rel(sys::now_ns()), Ordering::Release);
    publish(ctx, slot, state::DONE);
    0
}
