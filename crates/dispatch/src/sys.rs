//! The thin layer over Linux system calls the dispatcher needs, each wrapped once so the rest
//! of the crate is safe code. Every `unsafe` block calls libc with arguments that are valid by
//! construction (owned buffers, live file descriptors, pointers into our own mapping).

use std::ffi::CString;
use std::io;
use std::sync::atomic::AtomicU32;

pub const SCHED_OTHER: u32 = 0;
pub const SCHED_FIFO: u32 = 1;
pub const SCHED_RR: u32 = 2;
pub const SCHED_BATCH: u32 = 3;
pub const SCHED_IDLE: u32 = 5;
pub const SCHED_DEADLINE: u32 = 6;

const FUTEX_WAIT_BITSET: i32 = 9;
const FUTEX_WAKE: i32 = 1;
const FUTEX_BITSET_MATCH_ANY: u32 = 0xffff_ffff;
const FUTEX_CLOCK_REALTIME: i32 = 256;

/// The calling thread's errno as a number.
pub fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The kernel's text for an errno (strerror).
pub fn strerror(e: i32) -> String {
    io::Error::from_raw_os_error(e).to_string()
}

fn check(ret: libc::c_int) -> Result<libc::c_int, i32> {
    if ret < 0 {
        Err(errno())
    } else {
        Ok(ret)
    }
}

fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC in ns: every timestamp of a run, in every process.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), ns: what a job's size is made of.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// CPU clock of another process (the kernel's sum_exec_runtime, including the current slice).
pub fn cpu_clock_of(pid: i32) -> Option<libc::clockid_t> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: `id` is a valid out-pointer.
    let r = unsafe { libc::clock_getcpuclockid(pid, &mut id) };
    (r == 0).then_some(id)
}

pub fn clock_read_ns(clock: libc::clockid_t) -> Option<u64> {
    clock_ns(clock)
}

/// Blocks while `*word == expected`, until woken or until the absolute CLOCK_MONOTONIC time
/// `deadline_ns` (None: no timeout). Returns false on timeout.
pub fn futex_wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) -> bool {
    let ts = deadline_ns.map(|d| libc::timespec {
        tv_sec: (d / 1_000_000_000) as libc::time_t,
        tv_nsec: (d % 1_000_000_000) as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` points into live memory for the call; FUTEX_WAIT_BITSET takes an absolute
    // CLOCK_MONOTONIC timeout (no FUTEX_CLOCK_REALTIME flag) or null.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            FUTEX_WAIT_BITSET & !FUTEX_CLOCK_REALTIME,
            expected,
            tsp,
            std::ptr::null::<u32>(),
            FUTEX_BITSET_MATCH_ANY,
        )
    };
    !(r < 0 && errno() == libc::ETIMEDOUT)
}

/// Wakes up to `n` waiters on `word` (shared mapping: works across processes).
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: `word` points into live memory; FUTEX_WAKE only reads the address.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), FUTEX_WAKE, n);
    }
}

/// A kernel scheduling policy with its parameters, as `sched_setattr(2)` takes it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Attr {
    pub policy: u32,
    pub nice: i32,
    pub rtprio: u32,
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
    pub reset_on_fork: bool,
}

/// Sets the policy of `tid` (0: the calling thread). Errors are errno values.
pub fn set_sched(tid: i32, a: &Attr) -> Result<(), i32> {
    // SAFETY: sched_attr is a plain C struct; zeroed is a valid value.
    let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
    attr.size = std::mem::size_of::<libc::sched_attr>() as u32;
    attr.sched_policy = a.policy;
    attr.sched_flags = if a.reset_on_fork { 1 } else { 0 };
    attr.sched_nice = a.nice;
    attr.sched_priority = a.rtprio;
    attr.sched_runtime = a.runtime_ns;
    attr.sched_deadline = a.deadline_ns;
    attr.sched_period = a.period_ns;
    // SAFETY: `attr` is initialised and sized; flags 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const _, 0) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// The policy of a process, as the kernel reports it (sched_getscheduler).
pub fn get_policy(pid: i32) -> Option<u32> {
    // SAFETY: no pointers.
    let r = unsafe { libc::sched_getscheduler(pid) };
    (r >= 0).then_some((r & !0x4000_0000) as u32)
}

pub fn set_affinity(pid: i32, cpus: &[usize]) -> Result<(), i32> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET only writes inside `set` for c < CPU_SETSIZE, checked by the caller's
        // validation (cpus come from the machine's CPU list).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    check(unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) })
        .map(|_| ())
}

pub fn set_nice(nice: i32) -> Result<(), i32> {
    // SAFETY: no pointers; PRIO_PROCESS with who = 0 is the caller.
    check(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) }).map(|_| ())
}

pub fn set_rlimit(resource: i32, soft: u64, hard: u64) -> Result<(), i32> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `lim` is a valid rlimit.
    check(unsafe { libc::setrlimit(resource as libc::__rlimit_resource_t, &lim) }).map(|_| ())
}

pub fn get_rlimit(resource: i32) -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer.
    unsafe { libc::getrlimit(resource as libc::__rlimit_resource_t, &mut lim) };
    (lim.rlim_cur, lim.rlim_max)
}

pub const RLIMIT_RTTIME: i32 = 15;
pub const RLIMIT_NOFILE: i32 = 7;

pub fn kill(pid: i32, sig: i32) -> bool {
    // SAFETY: no pointers.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// The child's death signal: the kernel sends `sig` to the caller when its parent dies.
pub fn set_parent_death_signal(sig: i32) {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0);
    }
}

pub fn getpid() -> i32 {
    // SAFETY: no pointers.
    unsafe { libc::getpid() }
}

pub fn getppid() -> i32 {
    // SAFETY: no pointers.
    unsafe { libc::getppid() }
}

pub fn getsid() -> i32 {
    // SAFETY: no pointers.
    unsafe { libc::getsid(0) }
}

pub fn setsid() -> bool {
    // SAFETY: no pointers.
    unsafe { libc::setsid() >= 0 }
}

pub fn sched_getcpu() -> i32 {
    // SAFETY: no pointers.
    unsafe { libc::sched_getcpu() }
}

/// Ends the calling process at once, without running Rust or Python teardown (a forked worker
/// must never return into the interpreter it was copied from).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no user-space state.
    unsafe { libc::_exit(code) }
}

pub enum Forked {
    Child,
    Parent(i32),
}

/// fork(2). The caller must be single-threaded (checked by [`threads_of_self`]).
pub fn fork() -> Result<Forked, i32> {
    // SAFETY: the run refuses to fork unless this process has exactly one thread, so the
    // child's copy of the address space has no lock held by a vanished thread.
    let pid = unsafe { libc::fork() };
    match pid {
        0 => Ok(Forked::Child),
        p if p > 0 => Ok(Forked::Parent(p)),
        _ => Err(errno()),
    }
}

/// Number of threads of the calling process (/proc/self/status).
pub fn threads_of_self() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

/// An owned file descriptor, closed on drop.
pub struct Fd(pub i32);

impl Drop for Fd {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: we own this descriptor.
            unsafe { libc::close(self.0) };
        }
    }
}

pub fn open(path: &str, flags: i32, mode: u32) -> Result<Fd, i32> {
    let c = CString::new(path).map_err(|_| libc::EINVAL)?;
    // SAFETY: `c` is a valid C string.
    check(unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, mode) }).map(Fd)
}

pub fn unlink(path: &str) {
    if let Ok(c) = CString::new(path) {
        // SAFETY: `c` is a valid C string.
        unsafe { libc::unlink(c.as_ptr()) };
    }
}

/// Reads a /proc file from offset 0 into `buf` (seq_file regenerates it); returns the text.
pub fn pread_text<'a>(fd: &Fd, buf: &'a mut [u8]) -> Option<&'a str> {
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::pread(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n <= 0 {
        return None;
    }
    std::str::from_utf8(&buf[..n as usize]).ok()
}

pub fn pwrite_all(fd: &Fd, data: &[u8], offset: u64) -> Result<(), i32> {
    // SAFETY: `data` is readable for its length.
    let n = unsafe {
        libc::pwrite(
            fd.0,
            data.as_ptr().cast(),
            data.len(),
            offset as libc::off_t,
        )
    };
    if n < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// An anonymous shared mapping: written by forked workers, read by the coordinator.
pub struct SharedMap {
    pub ptr: *mut u8,
    pub len: usize,
}

impl SharedMap {
    pub fn new(len: usize) -> Result<SharedMap, i32> {
        // SAFETY: a fresh anonymous mapping; the kernel chooses the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(errno());
        }
        Ok(SharedMap { ptr: p.cast(), len })
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; no references outlive the map (they borrow it).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

pub fn eventfd() -> Result<Fd, i32> {
    // SAFETY: no pointers.
    check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) }).map(Fd)
}

pub fn eventfd_write(fd: i32) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

pub fn eventfd_drain(fd: &Fd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64 (non-blocking descriptor).
    unsafe { libc::read(fd.0, (&mut v as *mut u64).cast(), 8) };
}

/// A signal set of the given signals.
pub fn sigset(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and modify a local set.
    unsafe {
        let mut s: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut s);
        for &sig in signals {
            libc::sigaddset(&mut s, sig);
        }
        s
    }
}

/// Blocks `set` in the calling thread, returning the previous mask.
pub fn block_signals(set: &libc::sigset_t) -> libc::sigset_t {
    // SAFETY: both pointers are valid sigset_t.
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, set, &mut old);
        old
    }
}

pub fn set_signal_mask(set: &libc::sigset_t) {
    // SAFETY: valid sigset_t; old mask not wanted.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, set, std::ptr::null_mut());
    }
}

/// Restores the default action of `sig` (a worker must not inherit the interpreter's handlers).
pub fn default_signal(sig: i32) {
    // SAFETY: SIG_DFL is always a valid disposition.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
    }
}

pub fn signalfd(set: &libc::sigset_t) -> Result<Fd, i32> {
    // SAFETY: `set` is a valid sigset_t.
    check(unsafe { libc::signalfd(-1, set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) }).map(Fd)
}

/// Reads pending signals from a signalfd; returns their numbers.
pub fn signalfd_read(fd: &Fd) -> Vec<u32> {
    let mut out = Vec::new();
    loop {
        // SAFETY: signalfd_siginfo is plain data.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reads at most `size` bytes into `info`.
        let n = unsafe {
            libc::read(
                fd.0,
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                size,
            )
        };
        if n != size as isize {
            return out;
        }
        out.push(info.ssi_signo);
    }
}

pub fn timerfd() -> Result<Fd, i32> {
    // SAFETY: no pointers.
    check(unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
        )
    })
    .map(Fd)
}

/// Arms the timer for the absolute CLOCK_MONOTONIC time `at_ns` (0 disarms).
pub fn timerfd_at(fd: &Fd, at_ns: u64) {
    let at = at_ns.max(1);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at / 1_000_000_000) as libc::time_t,
            tv_nsec: (at % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: `spec` is valid; old value not wanted.
    unsafe {
        libc::timerfd_settime(fd.0, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut());
    }
}

pub fn timerfd_drain(fd: &Fd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64 (non-blocking descriptor).
    unsafe { libc::read(fd.0, (&mut v as *mut u64).cast(), 8) };
}

/// poll(2) for readability; returns which descriptors are readable.
pub fn poll_readable(fds: &[i32], timeout_ms: i32) -> Vec<bool> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of pollfd of the given length.
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    p.iter().map(|x| x.revents & libc::POLLIN != 0).collect()
}

/// How a child ended.
#[derive(Clone, Copy, Debug, Default)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// A child that has exited but is not reaped yet (waitid with WNOWAIT), so /proc still holds
/// its final counters.
pub fn exited_child() -> Option<i32> {
    // SAFETY: siginfo_t is plain data; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if r < 0 {
        return None;
    }
    // SAFETY: si_pid is valid for SIGCHLD-type siginfo filled by waitid.
    let pid = unsafe { info.si_pid() };
    (pid > 0).then_some(pid)
}

/// Resource use of a reaped child.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub utime_ns: u64,
    pub stime_ns: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
    pub maxrss_kib: u64,
}

fn usage_from(r: &libc::rusage) -> Usage {
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    Usage {
        utime_ns: tv(r.ru_utime),
        stime_ns: tv(r.ru_stime),
        nvcsw: r.ru_nvcsw as u64,
        nivcsw: r.ru_nivcsw as u64,
        maxrss_kib: r.ru_maxrss as u64,
    }
}

/// Reaps `pid` (blocking), returning how it ended and its resource use.
pub fn reap(pid: i32, block: bool) -> Option<(Exit, Usage)> {
    let mut status = 0;
    // SAFETY: rusage is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = if block { 0 } else { libc::WNOHANG };
    // SAFETY: valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
    if r != pid {
        return None;
    }
    let exit = if libc::WIFEXITED(status) {
        Exit {
            code: Some(libc::WEXITSTATUS(status)),
            signal: None,
        }
    } else if libc::WIFSIGNALED(status) {
        Exit {
            code: None,
            signal: Some(libc::WTERMSIG(status)),
        }
    } else {
        Exit::default()
    };
    Some((exit, usage_from(&ru)))
}

/// Resource use of the calling process (RUSAGE_SELF) or thread (RUSAGE_THREAD).
pub fn usage(thread: bool) -> Usage {
    // SAFETY: rusage is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let who = if thread {
        libc::RUSAGE_THREAD
    } else {
        libc::RUSAGE_SELF
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(who, &mut ru) };
    usage_from(&ru)
}

pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGXCPU => "SIGXCPU".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGBUS => "SIGBUS".into(),
        s => format!("signal {s}"),
    }
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer and size.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: c < CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}
