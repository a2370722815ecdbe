//! A worker thread: takes the request the policy picks, sends its packets (spending the
//! emulated cost before each), and either finishes it or puts it back for a later turn.
//!
//! Sockets stay non-blocking and a worker never waits on one. When a client's socket is full
//! (a write would block), the request *parks*: it leaves the worker with everything it needs
//! to go on (the connection, the bytes sent, the packet in flight, its policy state) and waits
//! in the parking lot ([`crate::park`]) while the worker takes the next request in policy
//! order, as a job blocked on I/O leaves its CPU in the simulator. To the policy it blocks
//! (`dequeue(Sleep)`) and, once the client has read enough for the socket to be writable
//! again, wakes (`enqueue(Wakeup)`): the policy places it as it places any waking job —
//! `fcfs` at the back of the queue (first come by when it became ready again, as the
//! simulator's FCFS treats a job back from I/O), `sjf`/`sff` by its file size and `srpt` by
//! its bytes left (so it may preempt), `rr` at the back with a new quantum. A packet cut short
//! by a full socket is finished first when it comes back, without paying its cost again, and
//! counts (for `slice` and `charge`) in the turn that completes it.
//!
//! The send timeout is time without progress: a parked request whose client takes nothing
//! (its unsent queue does not shrink) for `send_timeout` is closed and counted as aborted.
//! One that disconnects (RST, or a hang-up seen while cost is spent or while parked) is
//! closed at once.

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
use crate::request::{Job, Packet, Record};
use crate::shared::Shared;

/// Packets this small go out in one write together with the response head.
const COALESCE: u64 = 16 * 1024;

enum Outcome {
    Done,
    Yield(Enqueue<'static>),
    /// The client's socket is full: off the worker until it is writable.
    Park,
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
            job.progress_ns = t0; // the send timeout starts with the first write
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
        done = match outcome {
            Outcome::Yield(why) => Some(Done::Requeued {
                id,
                job,
                bytes,
                packets,
                why,
            }),
            Outcome::Park => {
                // The policy hears first, so that a wake-up never finds it still running.
                sh.queue.park(w, id, bytes, packets);
                job.parks += 1;
                job.parked_at_ns = t1;
                if let Err(job) = sh.lot.park(id, job) {
                    sh.queue.abandon(id);
                    finish(&sh, log.as_ref(), *job, false, now_ns());
                }
                None
            }
            Outcome::Done | Outcome::Abort => {
                // The response is complete (or abandoned) before the policy hears of it; the
                // connection goes back to the master right away, the queue is settled with the
                // next pick (one lock for both).
                let ok = matches!(outcome, Outcome::Done);
                finish(&sh, log.as_ref(), *job, ok, t1);
                Some(Done::Finished { id, bytes, packets })
            }
        };
    }
}

/// Ends a request: counts it, logs it, and hands its connection back to the master (kept
/// alive) or closes it.
pub(crate) fn finish(sh: &Shared, log: Option<&Sender<Record>>, job: Job, ok: bool, t: u64) {
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
            parked_ns: job.parked_ns,
            parks: job.parks,
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
    let mut clock = now_ns();
    let mut count = 0u64;
    loop {
        if job.packet.is_none() {
            let body_left = !job.head_only && job.sent < job.size;
            if !body_left && job.head_sent {
                return Outcome::Done;
            }
            if body_left {
                if allowed.is_some_and(|q| count >= q) {
                    return Outcome::Yield(Enqueue::Expired);
                }
                if sh.queue.preempted(w) {
                    // The queue fills in the packets this turn sent.
                    return Outcome::Yield(Enqueue::Preempted { ran: 0.0 });
                }
            }
            // A HEAD request or an empty file: the head alone, as one packet.
            let (len, fraction) = if body_left {
                match next_packet(job, cfg.packet, cfg.packet_unit, scratch) {
                    Ok(p) => p,
                    Err(_) => return Outcome::Abort,
                }
            } else {
                (0, 1.0)
            };
            if !cfg.cost.is_zero() {
                clock += cfg.cost.of_packet_ns(len, job.sent == 0);
                if spend_until(cfg.cost_mode, clock, fd).is_err() {
                    return Outcome::Abort;
                }
            }
            if !job.head_sent && len > 0 && len <= COALESCE {
                let start = job.head.len();
                job.head.resize(start + len as usize, 0);
                if pread_exact(&job.file, &mut job.head[start..], job.sent).is_err() {
                    return Outcome::Abort;
                }
                job.head_body = len;
            }
            job.packet = Some(Packet {
                left: len,
                fraction,
            });
        }
        match write_packet(fd, job, turn_bytes) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Outcome::Park,
            Err(_) => return Outcome::Abort,
        }
        let p = job.packet.take().expect("a packet under way");
        *turn_packets += p.fraction;
        count += 1;
        sh.queue.progress(w, *turn_bytes);
    }
}

/// Writes what is left of the packet under way (the head first, if not yet out); stops with
/// `WouldBlock` when the socket is full, keeping its place.
fn write_packet(fd: RawFd, job: &mut Job, turn_bytes: &mut u64) -> io::Result<()> {
    let mut left = job.packet.map_or(0, |p| p.left);
    let result = (|| {
        if !job.head_sent {
            while job.head_off < job.head.len() {
                // More body follows in this packet: let the head wait for it (one segment).
                let more = if left > job.head_body {
                    libc::MSG_MORE
                } else {
                    0
                };
                job.head_off += send_some(fd, &job.head[job.head_off..], more)?;
                job.progress_ns = now_ns();
            }
            job.head_sent = true;
            job.sent += job.head_body;
            *turn_bytes += job.head_body;
            left -= job.head_body;
            job.head = Vec::new();
        }
        while left > 0 {
            let n = sendfile_some(fd, &job.file, job.sent, left)?;
            job.sent += n;
            *turn_bytes += n;
            left -= n;
            job.progress_ns = now_ns();
        }
        Ok(())
    })();
    if let Some(p) = &mut job.packet {
        p.left = left;
    }
    result
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

/// One write of `data` on the non-blocking socket `fd`: the bytes taken (at least one), or
/// an error (`WouldBlock` when the socket is full).
fn send_some(fd: RawFd, data: &[u8], flags: i32) -> io::Result<usize> {
    loop {
        // SAFETY: `data` is a live slice; MSG_NOSIGNAL turns a dead peer into EPIPE, not a signal.
        let n = unsafe {
            libc::send(
                fd,
                data.as_ptr().cast(),
                data.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One sendfile(2) of up to `len` bytes of `file` from `offset`: the bytes taken (at least
/// one), or an error (`WouldBlock` when the socket is full).
fn sendfile_some(fd: RawFd, file: &File, offset: u64, len: u64) -> io::Result<u64> {
    let mut off = offset as libc::off_t;
    loop {
        // SAFETY: both descriptors are open for the call and `off` is a valid, exclusively
        // borrowed offset that sendfile advances.
        let n = unsafe { libc::sendfile(fd, file.as_raw_fd(), &mut off, len as usize) };
        if n > 0 {
            return Ok(n as u64);
        }
        if n == 0 {
            // The file shrank under us: the promised Content-Length cannot be kept.
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
