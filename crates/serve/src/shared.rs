//! What the master shares with the workers and the parking lot: the configuration, the
//! policy-ordered buffer, the lot, the counters, and the inbox through which a worker hands a
//! connection back to the master.

use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};

use mio::Waker;

use crate::clock::now_ns;
use crate::config::ServeConfig;
use crate::lot::Lot;
use crate::queue::Queue;
use crate::request::{Conn, Job, Msg};

/// What the master shares with the workers.
pub struct Shared {
    pub cfg: ServeConfig,
    pub queue: Queue<Box<Job>>,
    /// Requests waiting for their client to read (a full socket), off the workers.
    pub lot: Lot,
    pub draining: AtomicBool,
    pub(crate) inbox: Mutex<Vec<(Arc<Conn>, Msg)>>,
    pub(crate) waker: Arc<Waker>,
    pub busy_ns: Vec<AtomicU64>,
    pub served: AtomicU64,
    pub aborted: AtomicU64,
}

impl Shared {
    fn notify(&self, conn: Arc<Conn>, msg: Msg) {
        let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        let wake = inbox.is_empty();
        inbox.push((conn, msg));
        drop(inbox);
        if wake {
            let _ = self.waker.wake();
        }
    }
}

// The hand-back of a connection lives here, beside the inbox it writes to.
impl Conn {
    /// The worker is done and the connection stays open.
    pub fn release(self: &Arc<Self>, sh: &Shared) {
        self.done_at.store(now_ns(), Relaxed);
        self.busy.store(false, SeqCst);
        if self.pending.swap(false, SeqCst) {
            sh.notify(self.clone(), Msg::Ready);
        }
    }

    /// The worker is done and the connection closes: after a complete response the write side
    /// closes and the master drains what the client still sends; after an abort, at once.
    pub fn close_from_worker(self: &Arc<Self>, sh: &Shared, complete: bool) {
        let _ = self.stream.shutdown(if complete {
            Shutdown::Write
        } else {
            Shutdown::Both
        });
        sh.notify(self.clone(), Msg::Close { linger: complete });
    }
}
