//! The parking lot: requests whose client's socket is full wait here, off the workers, until
//! the client has read enough for the socket to be writable again.
//!
//! A worker that meets a full socket parks the request (see [`crate::worker`]): it registers
//! the connection with the lot's own `mio` poller (edge-triggered, writable) and takes the
//! next request. One thread watches the lot. When a parked socket becomes writable the request
//! goes back to the queue, to be served in policy order (`enqueue(Wakeup)`), its time parked
//! added to `parked_ns`; when the peer hangs up or errs, or when the drain timeout shuts the
//! connection down, it is closed at once; every 100 ms the thread looks at each socket's
//! unsent queue (SIOCOUTQ), and a request whose client has taken nothing for `send_timeout`
//! is closed. Closed requests are counted as aborted and logged with status 0, as a worker
//! logs them: nothing parked is lost from the log, not even at the end of a run, when what is
//! still parked is closed the same way.
//!
//! A bug that panics in the lot's thread costs the requests it was handling, not the server:
//! a request whose wake-up or close panicked is closed (counted as aborted), and a panic
//! elsewhere in the thread closes everything parked, after which the thread watches on. No
//! request is left stranded on a connection the master believes busy.
//!
//! The lot has its own poller rather than the master's so that waking a request never waits
//! for the master (which blocks while the buffer is full) and the master's connection table
//! stays the master's alone.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use mio::{Events, Poll};

use crate::clock::now_ns;
use crate::lot::Parked;
use crate::request::{unsent, Record};
use crate::shared::Shared;
use crate::worker;

/// How often the lot looks for progress and for send timeouts.
const SWEEP_NS: u64 = 100_000_000;

/// Set by a unit test: the next wake-up panics (fault injection for the guard).
#[cfg(test)]
pub(crate) static PANIC_ON_WAKE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The lot's thread: wakes parked requests whose socket became writable, closes those whose
/// client hung up or made no progress for the send timeout.
pub fn run(sh: Arc<Shared>, mut poll: Poll, log: Option<Sender<Record>>) {
    let mut woken = VecDeque::new();
    let mut dead = VecDeque::new();
    loop {
        let watched = catch_unwind(AssertUnwindSafe(|| {
            watch(&sh, &mut poll, log.as_ref(), &mut woken, &mut dead)
        }));
        if watched.is_ok() {
            return;
        }
        // A bug panicked outside the handling of one request: close everything the lot holds
        // (its state may be off), then watch on.
        let mut all: Vec<Parked> = woken.drain(..).chain(dead.drain(..)).collect();
        {
            let mut parked = sh.lot.lock();
            for (_, p) in parked.drain() {
                sh.lot.unwatch(&p);
                all.push(p);
            }
        }
        let now = now_ns();
        for p in all {
            guarded(&sh, p, |p| close(&sh, log.as_ref(), p, now));
        }
    }
}

/// Hands one request on; if that panics, the request is closed (aborted) instead of being
/// left on a connection the master believes busy.
fn guarded(sh: &Shared, p: Parked, f: impl FnOnce(Parked)) {
    let (id, conn) = (p.id, p.job.conn.clone());
    if catch_unwind(AssertUnwindSafe(|| f(p))).is_err() {
        let _ = catch_unwind(AssertUnwindSafe(|| sh.queue.abandon(id)));
        sh.aborted.fetch_add(1, Ordering::Relaxed);
        conn.close_from_worker(sh, false);
    }
}

fn close(sh: &Shared, log: Option<&Sender<Record>>, mut p: Parked, now: u64) {
    p.job.parked_ns += now.saturating_sub(p.job.parked_at_ns);
    sh.queue.abandon(p.id);
    worker::finish(sh, log, *p.job, false, now);
}

fn wake(sh: &Shared, log: Option<&Sender<Record>>, mut p: Parked, now: u64) {
    #[cfg(test)]
    if PANIC_ON_WAKE.swap(false, Ordering::SeqCst) {
        panic!("injected: a wake-up panics");
    }
    p.job.parked_ns += now.saturating_sub(p.job.parked_at_ns);
    // Writable again means the client took bytes.
    p.job.progress_ns = now;
    if let Err(job) = sh.queue.wake(p.id, p.job, now) {
        // The queue closed (end of the run): the request cannot be served.
        sh.queue.abandon(p.id);
        worker::finish(sh, log, *job, false, now);
    }
}

fn watch(
    sh: &Shared,
    poll: &mut Poll,
    log: Option<&Sender<Record>>,
    woken: &mut VecDeque<Parked>,
    dead: &mut VecDeque<Parked>,
) {
    let timeout_ns = (sh.cfg.send_timeout_ms * 1e6) as u64;
    let mut events = Events::with_capacity(256);
    let mut last_sweep = now_ns();
    loop {
        if let Err(e) = poll.poll(&mut events, Some(Duration::from_nanos(SWEEP_NS))) {
            if e.kind() != io::ErrorKind::Interrupted {
                // The poller itself failed: nothing parked could ever wake; close it all.
                sh.lot.stop.store(true, Ordering::SeqCst);
            }
        }
        let stopping = sh.lot.stop.load(Ordering::SeqCst);
        let now = now_ns();
        {
            let mut parked = sh.lot.lock();
            for ev in events.iter() {
                let Some(p) = parked.remove(&ev.token().0) else {
                    continue; // the waker
                };
                sh.lot.unwatch(&p);
                if ev.is_error() || ev.is_write_closed() {
                    dead.push_back(p);
                } else {
                    woken.push_back(p);
                }
            }
            if stopping || now - last_sweep >= SWEEP_NS {
                last_sweep = now;
                let mut gone = Vec::new();
                for (&k, p) in parked.iter_mut() {
                    let queued = unsent(p.job.conn.stream.as_raw_fd());
                    if queued < p.queued {
                        p.job.progress_ns = now; // the client took some: slow, not stalled
                    }
                    p.queued = queued;
                    if stopping || now.saturating_sub(p.job.progress_ns) >= timeout_ns {
                        gone.push(k);
                    }
                }
                for k in gone {
                    let p = parked.remove(&k).expect("just seen");
                    sh.lot.unwatch(&p);
                    dead.push_back(p);
                }
            }
        }
        while let Some(p) = woken.pop_front() {
            guarded(sh, p, |p| wake(sh, log, p, now));
        }
        while let Some(p) = dead.pop_front() {
            guarded(sh, p, |p| close(sh, log, p, now));
        }
        if stopping && sh.lot.is_empty() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

    use super::*;
    use crate::config::ServeSpec;
    use crate::server::Server;

    /// A wake-up that panics closes its request (the client sees the connection closed short
    /// of its Content-Length) instead of stranding it: the server serves on and stops at once,
    /// not at the drain timeout.
    #[test]
    fn a_panic_in_the_lot_closes_the_request_instead_of_stranding_it() {
        const BIG: u64 = 50 << 20;
        let dir = tempfile::tempdir().unwrap();
        std::fs::File::create(dir.path().join("big.bin"))
            .unwrap()
            .set_len(BIG)
            .unwrap();
        std::fs::write(dir.path().join("small.txt"), b"hello\n").unwrap();
        let spec = ServeSpec {
            root: Some(dir.path().display().to_string()),
            port: Some(0),
            announce: Some(false),
            cpus: Some(1),
            send_timeout: Some(30_000.0),
            drain_timeout: Some(5_000.0),
            ..Default::default()
        };
        let server = Server::bind(spec.validate().unwrap()).unwrap();
        let addr = server.local_addr();
        let handle = server.handle();
        let thread = std::thread::spawn(move || server.run(false).unwrap());
        let mut s = TcpStream::connect(addr).unwrap();
        let size: libc::c_int = 128 * 1024;
        // SAFETY: setsockopt reads one c_int from a live local for the call.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0);
        s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(300)); // the response fills the socket, parks
        PANIC_ON_WAKE.store(true, Ordering::SeqCst);
        // Reading makes the socket writable: the wake-up panics; the connection is closed.
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = 0u64;
        let mut chunk = vec![0u8; 256 * 1024];
        let end = loop {
            match s.read(&mut chunk) {
                Ok(0) => break "closed",
                Ok(n) => got += n as u64,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break "reset",
                Err(e) => {
                    break if e.kind() == io::ErrorKind::WouldBlock {
                        "open"
                    } else {
                        "error"
                    }
                }
            }
        };
        assert!(!PANIC_ON_WAKE.load(Ordering::SeqCst), "the wake-up ran");
        assert!(
            matches!(end, "closed" | "reset") && got < BIG,
            "{end} after {got}"
        );
        // The server serves on, and stops at once: nothing is left in flight.
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut reply = Vec::new();
        c.read_to_end(&mut reply).unwrap();
        assert!(reply.starts_with(b"HTTP/1.1 200"));
        let t0 = Instant::now();
        handle.stop();
        let stats = thread.join().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        assert!(stats.drained);
        assert_eq!((stats.served, stats.aborted), (1, 1));
    }
}
