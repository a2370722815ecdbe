//! A worker thread: takes the request the policy picks, sends its packets (spending the
//! emulated cost before each), and either finishes it or puts it back for a later turn.
//!
//! Sockets stay non-blocking; a worker that cannot write waits in `ppoll` for at most
//! `send_timeout`, so a client that stops reading costs a worker that long at most, and one
//! that disconnects (RST, or a hang-up seen while cost is spent) frees it at once.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use schedlab_policy::Enqueue;

use crate::clock::now_ns;
use crate::config::PacketUnit;
use crate::cost::spend_until;
use crate::queue::Done;
use crate::server::{Conn, Record, Shared};

/// Packets this small go out in one write together with the response head.
const COALESCE: u64 = 16 * 1024;

/// A request on its way through the server.
pub struct Job {
    pub conn: Arc<Conn>,
    pub file: File,
    pub size: u64,
    /// Body bytes sent so far.
    pub sent: u64,
    pub head: Vec<u8>,
    pub head_sent: bool,
    pub head_only: bool,
    pub keep_alive: bool,
    pub class: u32,
    pub request_id: Option<u64>,
    pub path: Vec<u8>,
    pub seq: u64,
    /// When the master parsed it.
    pub arrival_ns: u64,
    /// When it entered the buffer (later than `arrival_ns` while the buffer was full).
    pub admitted_ns: u64,
    pub first_run_ns: u64,
    pub wait_ns: u64,
    pub service_ns: u64,
    pub turns: u32,
    pub switches: u32,
    pub first_worker: i32,
    pub workers: Vec<u16>,
    /// The worker that ran its last turn (-1: none yet).
    pub last_worker: i32,
    /// Every pass of a worker over it (worker, start ns, end ns), kept only while the log is on.
    pub segments: Vec<Segment>,
}

/// One pass of a worker over a request: (worker, start ns, end ns) on the server's clock.
pub type Segment = (u16, u64, u64);

enum Outcome {
    Done,
    Yield(Enqueue<'static>),
    Abort,
}

pub fn run(sh: Arc<Shared>, w: usize, log: Option<Sender<Record>>) {
    crate::clock::tight_timer_slack(1_000);
    let mut last_seq = u64::MAX;
    let mut scratch = vec![0u8; 64 * 1024];
    let mut done = None;
    while let Some(turn) = sh.queue.next(w, done.take()) {
        let mut job = turn.job;
        let t0 = now_ns();
        if job.turns == 0 {
            job.admitted_ns = turn.entered_ns;
        }
        job.wait_ns += t0.saturating_sub(turn.entered_ns);
        if job.first_run_ns == 0 {
            job.first_run_ns = t0;
            job.first_worker = w as i32;
        }
        // A new turn unless this worker goes on with the request it ran last, and ran it last.
        if job.turns == 0 || last_seq != job.seq || job.last_worker != w as i32 {
            if job.turns > 0 {
                job.switches += 1;
            }
            job.turns += 1;
        }
        job.last_worker = w as i32;
        if !job.workers.contains(&(w as u16)) {
            job.workers.push(w as u16);
        }
        last_seq = job.seq;
        let mut bytes = 0u64;
        let mut packets = 0f64;
        // A bug that panics abandons this request; the worker lives on.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            serve_turn(
                &sh,
                w,
                &mut job,
                turn.packets,
                &mut bytes,
                &mut packets,
                &mut scratch,
            )
        }))
        .unwrap_or(Outcome::Abort);
        let t1 = now_ns();
        job.service_ns += t1 - t0;
        if log.is_some() {
            job.segments.push((w as u16, t0, t1));
        }
        sh.busy_ns[w].fetch_add(t1 - t0, Ordering::Relaxed);
        let id = turn.id;
        done = Some(match outcome {
            Outcome::Yield(why) => Done::Requeued {
                id,
                job,
                bytes,
                packets,
                why,
            },
            Outcome::Done | Outcome::Abort => {
                // The response is complete (or abandoned) before the policy hears of it; the
                // connection goes back to the master right away, the queue is settled with the
                // next pick (one lock for both).
                let ok = matches!(outcome, Outcome::Done);
                finish(&sh, log.as_ref(), *job, ok, t1);
                Done::Finished { id, bytes, packets }
            }
        });
    }
}

fn finish(sh: &Shared, log: Option<&Sender<Record>>, job: Job, ok: bool, t: u64) {
    let counter = if ok { &sh.served } else { &sh.aborted };
    counter.fetch_add(1, Ordering::Relaxed);
    if let Some(log) = log {
        let _ = log.send(Record {
            request_id: job.request_id.map_or(-1, |i| i as i64),
            status: if ok { 200 } else { 0 },
            class: job.class as i64,
            bytes: job.size,
            sent: job.sent,
            worker: job.first_worker,
            arrival_ns: job.arrival_ns,
            admitted_ns: job.admitted_ns,
            first_run_ns: job.first_run_ns,
            completion_ns: t,
            wait_ns: job.wait_ns,
            service_ns: job.service_ns,
            turns: job.turns,
            switches: job.switches,
            workers: job.workers.len() as u32,
            path: String::from_utf8_lossy(&job.path).into_owned(),
            segments: job.segments,
        });
    }
    if ok && job.keep_alive && !sh.draining.load(Ordering::Relaxed) {
        job.conn.release(sh);
    } else {
        job.conn.close_from_worker(sh, ok);
    }
}

#[allow(clippy::too_many_arguments)]
fn serve_turn(
    sh: &Shared,
    w: usize,
    job: &mut Job,
    allowed: Option<u64>,
    turn_bytes: &mut u64,
    turn_packets: &mut f64,
    scratch: &mut [u8],
) -> Outcome {
    let fd = job.conn.stream.as_raw_fd();
    let cfg = &sh.cfg;
    let timeout_ns = (cfg.send_timeout_ms * 1e6) as u64;
    let mut clock = now_ns();
    let mut count = 0u64;
    if job.head_only || job.size == 0 {
        if !cfg.cost.is_zero() {
            clock += cfg.cost.of_packet_ns(0, true);
            if spend_until(cfg.cost_mode, clock, fd).is_err() {
                return Outcome::Abort;
            }
        }
        return match send_all(fd, &job.head, 0, timeout_ns) {
            Ok(()) => {
                job.head_sent = true;
                *turn_packets = 1.0;
                Outcome::Done
            }
            Err(_) => Outcome::Abort,
        };
    }
    while job.sent < job.size {
        if allowed.is_some_and(|q| count >= q) {
            return Outcome::Yield(Enqueue::Expired);
        }
        if sh.queue.preempted(w) {
            // The queue fills in the packets this turn sent.
            return Outcome::Yield(Enqueue::Preempted { ran: 0.0 });
        }
        let (len, fraction) = match next_packet(job, cfg.packet, cfg.packet_unit, scratch) {
            Ok(p) => p,
            Err(_) => return Outcome::Abort,
        };
        if !cfg.cost.is_zero() {
            clock += cfg.cost.of_packet_ns(len, job.sent == 0);
            if spend_until(cfg.cost_mode, clock, fd).is_err() {
                return Outcome::Abort;
            }
        }
        let sent = if !job.head_sent && len <= COALESCE {
            let mut buf = std::mem::take(&mut job.head);
            let start = buf.len();
            buf.resize(start + len as usize, 0);
            let r = pread_exact(&job.file, &mut buf[start..], job.sent)
                .and_then(|_| send_all(fd, &buf, 0, timeout_ns));
            job.head_sent = true;
            r
        } else if !job.head_sent {
            job.head_sent = true;
            send_all(fd, &job.head, libc::MSG_MORE, timeout_ns)
                .and_then(|_| sendfile_all(fd, &job.file, job.sent, len, timeout_ns))
        } else {
            sendfile_all(fd, &job.file, job.sent, len, timeout_ns)
        };
        if sent.is_err() {
            return Outcome::Abort;
        }
        job.sent += len;
        *turn_bytes += len;
        *turn_packets += fraction;
        count += 1;
        sh.queue.progress(w, *turn_bytes);
    }
    Outcome::Done
}

/// Length in bytes of the next packet, and the fraction of a packet it is (the last one may
/// be short).
fn next_packet(
    job: &Job,
    packet: u64,
    unit: PacketUnit,
    scratch: &mut [u8],
) -> io::Result<(u64, f64)> {
    let left = job.size - job.sent;
    match unit {
        PacketUnit::Bytes => {
            let len = left.min(packet);
            Ok((len, len as f64 / packet as f64))
        }
        PacketUnit::Lines => {
            let mut pos = job.sent;
            let mut lines = 0u64;
            while pos < job.size {
                let want = ((job.size - pos) as usize).min(scratch.len());
                let n = pread_some(&job.file, &mut scratch[..want], pos)?;
                if n == 0 {
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                }
                for i in memchr::memchr_iter(b'\n', &scratch[..n]) {
                    lines += 1;
                    if lines == packet {
                        return Ok((pos + i as u64 + 1 - job.sent, 1.0));
                    }
                }
                pos += n as u64;
            }
            // The rest of the file: fewer than `packet` lines (a last line without a newline
            // counts as one).
            let frac = (lines.max(1) as f64 / packet as f64).min(1.0);
            Ok((left, frac))
        }
    }
}

fn pread_some(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    file.read_at(buf, offset)
}

fn pread_exact(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, offset)
}

/// Waits until `fd` can take more bytes; an error on hang-up, or once the client has taken
/// nothing for `timeout_ns`. Progress is the socket's unsent queue shrinking: the kernel says
/// "writable" only when half of a large send buffer is free, which a client reading steadily
/// but slowly may take longer than the timeout to reach.
fn wait_writable(fd: RawFd, timeout_ns: u64) -> io::Result<()> {
    // Look at the queue this often while waiting.
    const SLICE_NS: u64 = 100_000_000;
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    let mut queued = unsent(fd);
    let mut idle_ns = 0u64;
    loop {
        let slice = SLICE_NS.min(timeout_ns - idle_ns).max(1);
        let ts = libc::timespec {
            tv_sec: (slice / 1_000_000_000) as libc::time_t,
            tv_nsec: (slice % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: one valid pollfd and timespec, alive for the call; no signal mask.
        let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n > 0 {
            if pfd.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            return Ok(());
        }
        let now = unsent(fd);
        if now < queued {
            idle_ns = 0; // the client took some: it is reading, only slowly
        } else {
            idle_ns += slice;
            if idle_ns >= timeout_ns {
                return Err(io::Error::from(io::ErrorKind::TimedOut));
            }
        }
        queued = now;
    }
}

/// Bytes written to the socket that the client has not acknowledged (SIOCOUTQ).
fn unsent(fd: RawFd) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int through the pointer.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    if r == 0 {
        n.max(0) as u64
    } else {
        u64::MAX // unknown: never counts as progress
    }
}

/// Sends all of `data` on the non-blocking socket `fd`.
pub fn send_all(fd: RawFd, mut data: &[u8], flags: i32, timeout_ns: u64) -> io::Result<()> {
    while !data.is_empty() {
        // SAFETY: `data` is a live slice; MSG_NOSIGNAL turns a dead peer into EPIPE, not a signal.
        let n = unsafe {
            libc::send(
                fd,
                data.as_ptr().cast(),
                data.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => wait_writable(fd, timeout_ns)?,
                io::ErrorKind::Interrupted => {}
                _ => return Err(e),
            }
            continue;
        }
        data = &data[n as usize..];
    }
    Ok(())
}

/// Sends `len` bytes of `file` from `offset` with sendfile(2).
fn sendfile_all(fd: RawFd, file: &File, offset: u64, len: u64, timeout_ns: u64) -> io::Result<()> {
    let mut off = offset as libc::off_t;
    let end = offset + len;
    while (off as u64) < end {
        let want = (end - off as u64) as usize;
        // SAFETY: both descriptors are open for the call and `off` is a valid, exclusively
        // borrowed offset that sendfile advances.
        let n = unsafe { libc::sendfile(fd, file.as_raw_fd(), &mut off, want) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => wait_writable(fd, timeout_ns)?,
                io::ErrorKind::Interrupted => {}
                _ => return Err(e),
            }
        } else if n == 0 {
            // The file shrank under us: the promised Content-Length cannot be kept.
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
    }
    Ok(())
}
