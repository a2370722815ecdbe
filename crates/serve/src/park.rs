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
//! The lot has its own poller rather than the master's so that waking a request never waits
//! for the master (which blocks while the buffer is full) and the master's connection table
//! stays the master's alone.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use schedlab_policy::JobId;

use crate::clock::now_ns;
use crate::server::{Record, Shared};
use crate::worker::{self, unsent, Job};

/// How often the lot looks for progress and for send timeouts.
const SWEEP_NS: u64 = 100_000_000;
const WAKER: Token = Token(usize::MAX);

struct Parked {
    id: JobId,
    job: Box<Job>,
    /// The socket's unsent bytes at the last look.
    queued: u64,
}

/// The requests parked, keyed by their queue slot (unique while they are in the system).
pub struct Lot {
    registry: Registry,
    waker: Waker,
    stop: AtomicBool,
    parked: Mutex<HashMap<usize, Parked>>,
}

impl Lot {
    /// The lot and the poller its thread will watch ([`run`]).
    pub fn new() -> io::Result<(Lot, Poll)> {
        let poll = Poll::new()?;
        let lot = Lot {
            registry: poll.registry().try_clone()?,
            waker: Waker::new(poll.registry(), WAKER)?,
            stop: AtomicBool::new(false),
            parked: Mutex::new(HashMap::new()),
        };
        Ok((lot, poll))
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<usize, Parked>> {
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks a request whose socket is full (the queue already knows: `Queue::park`). Gives
    /// it back if its socket cannot be watched.
    pub fn park(&self, id: JobId, job: Box<Job>) -> Result<(), Box<Job>> {
        let fd = job.conn.stream.as_raw_fd();
        let queued = unsent(fd);
        // Under the lock, so the lot's thread sees the request as soon as its event can come.
        let mut parked = self.lock();
        if self
            .registry
            .register(&mut SourceFd(&fd), Token(id.index()), Interest::WRITABLE)
            .is_err()
        {
            return Err(job);
        }
        parked.insert(id.index(), Parked { id, job, queued });
        Ok(())
    }

    /// Requests parked now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes what is still parked and ends the lot's thread (once no worker is left to park).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
    }

    fn unwatch(&self, p: &Parked) {
        let fd = p.job.conn.stream.as_raw_fd();
        let _ = self.registry.deregister(&mut SourceFd(&fd));
    }
}

/// The lot's thread: wakes parked requests whose socket became writable, closes those whose
/// client hung up or made no progress for the send timeout.
pub fn run(sh: Arc<Shared>, mut poll: Poll, log: Option<Sender<Record>>) {
    let timeout_ns = (sh.cfg.send_timeout_ms * 1e6) as u64;
    let mut events = Events::with_capacity(256);
    let mut last_sweep = now_ns();
    let mut woken = Vec::new();
    let mut dead = Vec::new();
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
                    dead.push(p);
                } else {
                    woken.push(p);
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
                    dead.push(p);
                }
            }
        }
        for mut p in woken.drain(..) {
            p.job.parked_ns += now.saturating_sub(p.job.parked_at_ns);
            // Writable again means the client took bytes.
            p.job.progress_ns = now;
            if let Err(job) = sh.queue.wake(p.id, p.job, now) {
                // The queue closed (end of the run): the request cannot be served.
                sh.queue.abandon(p.id);
                worker::finish(&sh, log.as_ref(), *job, false, now);
            }
        }
        for mut p in dead.drain(..) {
            p.job.parked_ns += now.saturating_sub(p.job.parked_at_ns);
            sh.queue.abandon(p.id);
            worker::finish(&sh, log.as_ref(), *p.job, false, now);
        }
        if stopping && sh.lot.is_empty() {
            return;
        }
    }
}
