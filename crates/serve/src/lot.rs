//! The parking lot's ledger: which requests are parked on a full socket, and their
//! registration with the lot's poller. The thread that watches it is [`crate::park`].

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use mio::unix::SourceFd;
use mio::{Interest, Poll, Registry, Token, Waker};
use schedlab_policy::JobId;

use crate::request::{unsent, Job};

/// The token of the lot's waker on its poller.
pub(crate) const WAKER: Token = Token(usize::MAX);

/// A request off the workers, under the queue slot the policy knows it by.
pub(crate) struct Parked {
    pub(crate) id: JobId,
    pub(crate) job: Box<Job>,
    /// The socket's unsent bytes at the last look.
    pub(crate) queued: u64,
}

/// The requests parked, keyed by their queue slot (unique while they are in the system).
pub struct Lot {
    registry: Registry,
    waker: Waker,
    /// Set by [`Lot::stop`], or by the lot's thread when its poller fails.
    pub(crate) stop: AtomicBool,
    parked: Mutex<HashMap<usize, Parked>>,
}

impl Lot {
    /// The lot and the poller its thread will watch ([`crate::park::run`]).
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

    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<usize, Parked>> {
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

    pub(crate) fn unwatch(&self, p: &Parked) {
        let fd = p.job.conn.stream.as_raw_fd();
        let _ = self.registry.deregister(&mut SourceFd(&fd));
    }
}
