//! The master thread: accepts connections, reads and parses requests, resolves files and puts
//! the requests into the policy-ordered bounded buffer; and the connection bookkeeping around
//! it (keep-alive, timeouts, drain on SIGINT/SIGTERM).
//!
//! One thread reads every connection through `mio` (epoll, edge-triggered), so thousands of
//! connections cost one thread and a few hundred bytes each. A connection whose request is in
//! the buffer or on a worker is "busy": the master reads nothing more from it until the worker
//! hands it back, so responses on one connection never overtake each other. Handing back needs
//! no message in the common case: the worker clears `busy`, and only if the master saw input
//! meanwhile (`pending`) does the worker wake it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use mio::net::{TcpListener, TcpStream, UnixStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use schedlab_model::SpecError;
use serde::Serialize;

use crate::clock::{ms_since, now_ns};
use crate::config::ServeConfig;
use crate::http::{self, Method, Parsed};
use crate::lot::Lot;
use crate::park;
use crate::queue::{Admit, Queue};
use crate::request::{Conn, Job, Msg, Record};
use crate::root::{decode_target, Root};
use crate::shared::Shared;
use crate::worker;

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
const SIGNAL: Token = Token(usize::MAX - 3);
const SWEEP_NS: u64 = 100_000_000;
/// How long a connection closed after an error keeps draining input, so the client reads the
/// error instead of a reset (nginx's lingering close).
const LINGER_NS: u64 = 2_000_000_000;
/// Reads of a lingering connection's input per event (of `scratch`'s size each).
const LINGER_READS: usize = 64;
/// Requests of one connection the master answers itself (a 404, a 400) before it turns to the
/// others for a round: a client pipelining such requests as fast as they were answered held
/// the master, and every other connection waited for its next request to be read.
const ANSWERS_PER_TURN: usize = 64;

/// What a server did, written to `stats` at exit and returned to the caller.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub policy: String,
    pub workers: usize,
    pub buffer: usize,
    pub served: u64,
    pub aborted: u64,
    /// Answers of the master by status (400, 403, 404, 405, 408, 431, 505).
    pub errors: BTreeMap<u16, u64>,
    pub connections: u64,
    /// Connections answered 503 and closed at once (over `max_connections`, or out of
    /// descriptors): not in `errors`.
    pub rejected: u64,
    pub header_timeouts: u64,
    pub idle_closed: u64,
    /// Connections closed because handling them panicked (a bug; the server carries on).
    pub panics: u64,
    pub busy_ms: Vec<f64>,
    /// CLOCK_MONOTONIC ns at which the policy's clock reads 0.
    pub epoch_ns: u64,
    pub started_ns: u64,
    pub stopped_ns: u64,
    /// Requests still waiting when the drain timeout ran out (not served).
    pub dropped: u64,
    /// Whether every request in flight at the stop signal completed.
    pub drained: bool,
    /// Open connections at most, after clamping to the descriptor limit.
    pub max_connections: usize,
    /// What the server changed of its configuration, and why (printed at the start).
    pub notes: Vec<String>,
}

struct Entry {
    conn: Arc<Conn>,
    buf: Vec<u8>,
    first_byte_ns: u64,
    idle_since_ns: u64,
    /// Whether the last read emptied the socket (edge-triggered: no event for old input).
    drained: bool,
    /// Closing: discard input until this time, then close.
    linger_until: Option<u64>,
}

/// Stops a running server from another thread, as SIGTERM does.
#[derive(Clone)]
pub struct Handle {
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl Handle {
    pub fn stop(&self) {
        self.stop.store(true, SeqCst);
        let _ = self.waker.wake();
    }
}

pub struct Server {
    poll: Poll,
    listener: Option<TcpListener>,
    addr: SocketAddr,
    sh: Arc<Shared>,
    /// The parking lot's poller, until its thread takes it.
    lot_poll: Option<Poll>,
    root: Root,
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
    open: usize,
    stop: Arc<AtomicBool>,
    draining: bool,
    scratch: Vec<u8>,
    seq: u64,
    log: Option<Sender<Record>>,
    stats: Stats,
    /// Requests parsed in this round of events, admitted together.
    admits: Vec<(Box<Job>, Admit)>,
    /// A descriptor held back for when the others run out (EMFILE): closed, it lets the server
    /// accept a waiting connection to answer 503 and close it, instead of leaving it hanging.
    reserve: Option<File>,
    /// Connections may wait in the listen queue: accept stopped on an error (out of
    /// descriptors), and the edge-triggered listener will not say so again.
    accept_pending: bool,
    /// Connections left with requests to answer after `ANSWERS_PER_TURN`: taken up again
    /// after the next round of events, which then does not wait.
    again: Vec<Arc<Conn>>,
}

/// The listen backlog asked for (the kernel caps it at net.core.somaxconn).
const LISTEN_BACKLOG: i32 = 4096;

/// Raises the soft limit on open descriptors to the hard one: each connection is one, and a
/// server at the common default of 1,024 runs out long before `max_connections`. Returns the
/// soft limit it leaves (None: unknown).
fn raise_fd_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return Some(raised.rlim_cur);
            }
        }
    }
    Some(lim.rlim_cur)
}

/// Descriptors `max_connections` must leave to the server itself: its own (listener, pollers,
/// wakers, log, the reserve for shedding, standard streams) and a file per request that may
/// be in flight (the buffer, one per worker, and as many parked).
fn own_descriptors(cfg: &ServeConfig) -> usize {
    32 + cfg.buffer + 2 * cfg.workers
}

/// What a connection's input is after `read_away`.
#[derive(PartialEq)]
enum Input {
    /// Nothing more to read now (or the reads of one turn are used up).
    Waiting,
    /// The client closed, or the socket failed: nothing will come.
    Ended,
}

enum Flow {
    /// Answered by the master; the connection stays open: parse the next request.
    Continue,
    /// Handed to the workers, or closed.
    Stop,
}

impl Server {
    /// Binds the listening socket; `port` 0 picks a free port (see `local_addr`). A failure
    /// names the key that caused it: the root that cannot be opened, the host and port that
    /// cannot be listened on (in use, not ours to bind).
    pub fn bind(cfg: ServeConfig) -> Result<Server, SpecError> {
        let root = Root::new(&cfg.root).map_err(|e| {
            SpecError::new(
                "root",
                cfg.root.display(),
                format!("a directory this process can open ({e})"),
            )
        })?;
        let listen_error = |e: io::Error| {
            SpecError::new(
                "port",
                cfg.port,
                format!(
                    "a port free to listen on at {} ({e}); port 0 picks any free one",
                    cfg.host
                ),
            )
        };
        let addr = (cfg.host.as_str(), cfg.port)
            .to_socket_addrs()
            .map_err(|e| SpecError::new("host", &cfg.host, format!("an address ({e})")))?
            .next()
            .ok_or_else(|| SpecError::new("host", &cfg.host, "an address"))?;
        let mut listener = TcpListener::bind(addr).map_err(listen_error)?;
        // mio listens with std's backlog of 128: a burst of connects overflows it and each
        // dropped SYN costs its client a 1 s retransmit. Listening again raises it (the
        // kernel caps it at net.core.somaxconn).
        // SAFETY: listen on the descriptor the listener owns.
        unsafe { libc::listen(listener.as_raw_fd(), LISTEN_BACKLOG) };
        let mut cfg = cfg;
        let mut notes = Vec::new();
        if let Some(fds) = raise_fd_limit() {
            let room = (fds as usize).saturating_sub(own_descriptors(&cfg)).max(1);
            if cfg.max_connections > room {
                notes.push(format!(
                    "max_connections = {} clamped to {room}: the descriptor limit \
                     (RLIMIT_NOFILE) is {fds}, less {} for the server's own and the files of \
                     requests in flight",
                    cfg.max_connections,
                    own_descriptors(&cfg)
                ));
                cfg.max_connections = room;
            }
        }
        let system = |e: io::Error| SpecError::new("server", "(start)", e.to_string());
        let addr = listener.local_addr().map_err(system)?;
        let poll = Poll::new().map_err(system)?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(system)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(system)?);
        let mut policy = schedlab_policy::build(&cfg.policy, &cfg.params, cfg.seed)?;
        // The workers share one queue: a request is served by one worker at a time.
        policy.serving_cpus(cfg.workers);
        let queue = Queue::new(policy, cfg.buffer, cfg.workers);
        let (lot, lot_poll) = Lot::new().map_err(system)?;
        let stats = Stats {
            policy: cfg.policy.clone(),
            workers: cfg.workers,
            buffer: cfg.buffer,
            max_connections: cfg.max_connections,
            notes,
            epoch_ns: queue.epoch_ns(),
            ..Default::default()
        };
        let sh = Arc::new(Shared {
            busy_ns: (0..cfg.workers).map(|_| AtomicU64::new(0)).collect(),
            cfg,
            queue,
            lot,
            draining: AtomicBool::new(false),
            inbox: Mutex::new(Vec::new()),
            waker,
            served: AtomicU64::new(0),
            aborted: AtomicU64::new(0),
        });
        Ok(Server {
            reserve: File::open("/dev/null").ok(),
            accept_pending: false,
            again: Vec::new(),
            poll,
            lot_poll: Some(lot_poll),
            listener: Some(listener),
            addr,
            sh,
            root,
            entries: Vec::new(),
            free: Vec::new(),
            open: 0,
            stop: Arc::new(AtomicBool::new(false)),
            draining: false,
            scratch: vec![0; 64 * 1024],
            seq: 0,
            log: None,
            stats,
            admits: Vec::new(),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Open connections at most, after clamping to the descriptor limit.
    pub fn max_connections(&self) -> usize {
        self.sh.cfg.max_connections
    }

    pub fn handle(&self) -> Handle {
        Handle {
            stop: self.stop.clone(),
            waker: self.sh.waker.clone(),
        }
    }

    /// Serves until stopped (by `Handle::stop`, or SIGINT/SIGTERM when `signals`), then
    /// drains: no new connections, idle ones close, requests in flight complete (within
    /// `drain_timeout`), workers exit.
    pub fn run(mut self, signals: bool) -> io::Result<Stats> {
        // SAFETY: setting SIGPIPE to ignored is process-wide and idempotent; Rust binaries
        // and CPython already do it. Writes use MSG_NOSIGNAL anyway; this covers sendfile.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let mut sig_ids = Vec::new();
        let mut sig_rx = None;
        if signals {
            let (rx, tx) = std::os::unix::net::UnixStream::pair()?;
            rx.set_nonblocking(true)?;
            tx.set_nonblocking(true)?;
            for s in [libc::SIGINT, libc::SIGTERM] {
                let fd = tx.try_clone()?;
                sig_ids.push(signal_hook::low_level::pipe::register(s, fd)?);
                // The flag too: a master waiting for room in the buffer reads it (the pipe
                // reaches it only through the poll it is not in).
                sig_ids.push(signal_hook::flag::register(s, self.stop.clone())?);
            }
            let mut rx = UnixStream::from_std(rx);
            self.poll
                .registry()
                .register(&mut rx, SIGNAL, Interest::READABLE)?;
            sig_rx = Some(rx);
        }
        let result = self.serve(sig_rx.as_mut());
        for id in sig_ids {
            signal_hook::low_level::unregister(id);
        }
        result
    }

    fn serve(&mut self, mut sig_rx: Option<&mut UnixStream>) -> io::Result<Stats> {
        self.stats.started_ns = now_ns();
        let (log_tx, logger) = match &self.sh.cfg.log {
            Some(path) => {
                let (tx, h) = spawn_logger(path)?;
                (Some(tx), Some(h))
            }
            None => (None, None),
        };
        self.log = log_tx.clone();
        let workers: Vec<JoinHandle<()>> = (0..self.sh.cfg.workers)
            .map(|w| {
                let sh = self.sh.clone();
                let log = log_tx.clone();
                std::thread::Builder::new()
                    .name(format!("schedlab-w{w}"))
                    .spawn(move || worker::run(sh, w, log))
            })
            .collect::<io::Result<_>>()?;
        let lot = {
            let sh = self.sh.clone();
            let log = log_tx.clone();
            let poll = self.lot_poll.take().expect("a server runs once");
            std::thread::Builder::new()
                .name("schedlab-park".into())
                .spawn(move || park::run(sh, poll, log))?
        };
        drop(log_tx);
        if self.sh.cfg.announce {
            use std::io::Write;
            let mut out = io::stdout().lock();
            let _ = writeln!(
                out,
                "schedlab serve: listening on http://{} (policy {}, {} workers, buffer {})",
                self.addr, self.sh.cfg.policy, self.sh.cfg.workers, self.sh.cfg.buffer
            );
            let _ = out.flush();
            for note in &self.stats.notes {
                eprintln!("schedlab serve: {note}");
            }
        }
        let mut events = Events::with_capacity(1024);
        let mut last_sweep = now_ns();
        let mut drain_deadline = u64::MAX;
        let mut forced = false;
        loop {
            let timeout = if !self.again.is_empty() {
                0
            } else if self.draining {
                5
            } else {
                100
            };
            if let Err(e) = self
                .poll
                .poll(&mut events, Some(std::time::Duration::from_millis(timeout)))
            {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => self.drain_inbox(),
                    SIGNAL => {
                        if let Some(rx) = sig_rx.as_deref_mut() {
                            let mut b = [0u8; 64];
                            while matches!(rx.read(&mut b), Ok(n) if n > 0) {}
                        }
                        self.stop.store(true, SeqCst);
                    }
                    Token(t) => self.guarded(t, |s| s.on_event(t)),
                }
            }
            for conn in std::mem::take(&mut self.again) {
                // As an event: a request read since may have given it to a worker.
                if let Some(t) = self.token_of(&conn) {
                    self.guarded(t, |s| s.on_event(t));
                }
            }
            self.flush_admits();
            if self.stop.load(SeqCst) && !self.draining {
                self.begin_drain();
                drain_deadline = now_ns() + (self.sh.cfg.drain_timeout_ms * 1e6) as u64;
            }
            let now = now_ns();
            if now - last_sweep >= SWEEP_NS {
                self.sweep(now);
                last_sweep = now;
            }
            if self.accept_pending {
                self.accept(); // closes since may have freed descriptors
            }
            if self.draining {
                self.drain_inbox();
                let busy = self
                    .entries
                    .iter()
                    .flatten()
                    .any(|e| e.conn.busy.load(SeqCst));
                if self.sh.queue.in_system() == 0 && !busy {
                    break;
                }
                if now > drain_deadline {
                    forced = true;
                    break;
                }
            }
        }
        // Closed before any connection is cut: a worker whose request is cut must not take
        // the next one (whose connection is cut too) and count it aborted, not dropped.
        let left = self.sh.queue.close();
        self.stats.dropped = left.len() as u64;
        drop(left);
        if forced {
            // The drain timeout is a bound: a worker still sending to a client that does not
            // read would hold the exit up to its send timeout (and again at every wait).
            // Shutting the busy connections down makes its send fail now.
            for e in self.entries.iter().flatten() {
                if e.conn.busy.load(SeqCst) {
                    let _ = e.conn.stream.shutdown(Shutdown::Both);
                }
            }
        }
        for w in workers {
            let _ = w.join();
        }
        // A turn that ended between the close and the cut went back into the closed queue.
        self.stats.dropped += self.sh.queue.close().len() as u64;
        // No worker parks any more: what is still parked is closed, counted and logged.
        self.sh.lot.stop();
        let _ = lot.join();
        for t in 0..self.entries.len() {
            self.read_away(t);
            self.close(t);
        }
        self.log = None;
        if let Some(h) = logger {
            let _ = h.join();
        }
        self.stats.drained = !forced;
        self.stats.stopped_ns = now_ns();
        self.stats.served = self.sh.served.load(Relaxed);
        self.stats.aborted = self.sh.aborted.load(Relaxed);
        self.stats.busy_ms = self
            .sh
            .busy_ns
            .iter()
            .map(|b| b.load(Relaxed) as f64 / 1e6)
            .collect();
        if let Some(path) = &self.sh.cfg.stats {
            write_json(path, &self.stats)?;
        }
        Ok(self.stats.clone())
    }

    fn accept(&mut self) {
        loop {
            let Some(listener) = &self.listener else {
                return;
            };
            match listener.accept() {
                Ok((stream, _)) => {
                    if self.open >= self.sh.cfg.max_connections || self.draining {
                        let msg = http::error_response(503, false, false);
                        let _ = (&stream).write_nonblocking(&msg);
                        self.stats.rejected += 1;
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let t = self.free.pop().unwrap_or_else(|| {
                        self.entries.push(None);
                        self.entries.len() - 1
                    });
                    let fd = stream.as_raw_fd();
                    if self
                        .poll
                        .registry()
                        .register(&mut SourceFd(&fd), Token(t), Interest::READABLE)
                        .is_err()
                    {
                        self.free.push(t);
                        continue;
                    }
                    self.entries[t] = Some(Entry {
                        conn: Arc::new(Conn {
                            stream,
                            token: t,
                            busy: AtomicBool::new(false),
                            pending: AtomicBool::new(false),
                            done_at: AtomicU64::new(0),
                        }),
                        buf: Vec::new(),
                        first_byte_ns: 0,
                        idle_since_ns: now_ns(),
                        drained: false,
                        linger_until: None,
                    });
                    self.open += 1;
                    self.stats.connections += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_pending = false;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    // Out of descriptors: the edge-triggered listener will not wake us for
                    // the connections already queued, so without this the server goes deaf
                    // for good. With the reserve descriptor freed, take one and answer it
                    // 503; without one, retry on the next sweep and after every close.
                    self.accept_pending = true;
                    if !self.shed_one() {
                        return;
                    }
                }
                // A connection reset before accept, or any other failure: try the next one,
                // and once more on the next sweep.
                Err(_) => {
                    self.accept_pending = true;
                    return;
                }
            }
        }
    }

    /// Out of descriptors: gives back the reserve one, accepts a queued connection, answers it
    /// 503 and closes it, then takes the reserve again. False when there is nothing to shed.
    fn shed_one(&mut self) -> bool {
        let (Some(listener), Some(reserve)) = (&self.listener, self.reserve.take()) else {
            return false;
        };
        drop(reserve);
        let shed = match listener.accept() {
            Ok((stream, _)) => {
                let msg = http::error_response(503, false, false);
                let _ = (&stream).write_nonblocking(&msg);
                self.stats.rejected += 1;
                true
            }
            Err(_) => false,
        };
        self.reserve = File::open("/dev/null").ok();
        shed
    }

    fn drain_inbox(&mut self) {
        let msgs = std::mem::take(&mut *self.sh.inbox.lock().unwrap_or_else(|e| e.into_inner()));
        for (conn, msg) in msgs {
            let Some(t) = self.token_of(&conn) else {
                continue;
            };
            match msg {
                Msg::Ready => {
                    if self.draining {
                        self.close_after_response(t);
                    } else {
                        // Through the same hand-over as an event: the master may have taken
                        // the connection back since the worker sent this (an event in
                        // between found it free and sent its next request to the workers);
                        // reading on then would put two requests of one connection in flight
                        // and interleave their responses.
                        self.guarded(t, |s| s.on_event(t));
                    }
                }
                // The worker is done with it: the master's alone again, so that events reach
                // the lingering read (a client's close ends it at once) and a stop does not
                // wait for it as for a request in flight. Left busy, it held every stop after
                // a `Connection: close` response for the whole linger (2 s).
                Msg::Close { linger: true } if self.draining => self.close_after_response(t),
                Msg::Close { linger: true } => self.finish(t),
                Msg::Close { linger: false } => self.close(t),
            }
        }
    }

    fn token_of(&self, conn: &Arc<Conn>) -> Option<usize> {
        // The pointer check refuses a slot reused by a newer connection.
        let t = conn.token;
        let live = self.entries.get(t)?.as_ref()?;
        Arc::ptr_eq(&live.conn, conn).then_some(t)
    }

    /// Handles a connection; a bug that panics costs that connection, not the server.
    fn guarded(&mut self, t: usize, f: impl FnOnce(&mut Self)) {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))).is_ok();
        if !ok {
            self.stats.panics += 1;
            if self.entries[t]
                .as_ref()
                .is_some_and(|e| !e.conn.busy.load(SeqCst))
            {
                self.close(t);
            }
        }
    }

    fn on_event(&mut self, t: usize) {
        let Some(e) = self.entries.get_mut(t).and_then(|e| e.as_mut()) else {
            return;
        };
        // An event (or the hand-back of one seen while busy) says input came after the last
        // read: a request parsed from the buffer must not take the socket for empty, or the
        // bytes behind it wait for an edge that was already spent.
        e.drained = false;
        let conn = &e.conn;
        if conn.busy.load(SeqCst) {
            conn.pending.store(true, SeqCst);
            if conn.busy.load(SeqCst) || !conn.pending.swap(false, SeqCst) {
                return;
            }
        }
        self.process(t);
    }

    /// Parses what is buffered and reads more, until a request goes to the workers, the
    /// socket is empty, or the connection closes.
    fn process(&mut self, t: usize) {
        let mut answered = 0;
        loop {
            let Some(e) = self.entries[t].as_mut() else {
                return;
            };
            if e.linger_until.is_some() {
                if self.read_away(t) == Input::Ended {
                    self.close(t);
                }
                return;
            }
            if !e.buf.is_empty() {
                match http::parse(&e.buf, self.sh.cfg.max_header) {
                    Parsed::Complete(req) => {
                        e.buf.drain(..req.len);
                        let more = !e.buf.is_empty() || !e.drained;
                        if e.buf.is_empty() && e.buf.capacity() > 4096 {
                            e.buf = Vec::new();
                        }
                        e.first_byte_ns = now_ns();
                        match self.dispatch(t, req, more) {
                            Flow::Continue => {
                                answered += 1;
                                if answered == ANSWERS_PER_TURN {
                                    let conn = &self.entries[t].as_ref().expect("live").conn;
                                    if !self.again.iter().any(|c| Arc::ptr_eq(c, conn)) {
                                        self.again.push(conn.clone());
                                    }
                                    return;
                                }
                                continue;
                            }
                            Flow::Stop => return,
                        }
                    }
                    Parsed::Error(status) => {
                        self.answer(t, status, false, None);
                        return;
                    }
                    // Read on, though the last read was short: an end of file that came with
                    // the partial request raises no new edge, and its connection would wait
                    // for the header timeout (in CLOSE_WAIT, holding a descriptor, counted a
                    // 408) although its client has gone.
                    Parsed::Partial => {}
                }
            }
            let e = self.entries[t].as_mut().expect("live entry");
            match (&e.conn.stream).read(&mut self.scratch) {
                Ok(0) => return self.close(t),
                Ok(n) => {
                    if e.buf.is_empty() {
                        e.first_byte_ns = now_ns();
                    }
                    e.buf.extend_from_slice(&self.scratch[..n]);
                    e.drained = n < self.scratch.len();
                }
                Err(x) if x.kind() == io::ErrorKind::Interrupted => {}
                Err(x) if x.kind() == io::ErrorKind::WouldBlock => {
                    e.drained = true;
                    return;
                }
                Err(_) => return self.close(t),
            }
        }
    }

    fn dispatch(&mut self, t: usize, req: http::Request, more: bool) -> Flow {
        let keep = req.keep_alive && !self.draining;
        let rel = match decode_target(&req.target) {
            Ok(r) => r,
            Err(d) => {
                let keep = keep && d != crate::root::Denied::BadRequest;
                return self.answer(t, d.status(), keep, Some(&req));
            }
        };
        let (file, size, index) = match self.root.open(&rel) {
            Ok(f) => f,
            Err(d) => return self.answer(t, d.status(), keep, Some(&req)),
        };
        let cfg = &self.sh.cfg;
        let class = cfg.classify(req.class.as_deref(), &rel);
        let admit = match cfg.classes.get(class as usize) {
            Some(c) => Admit {
                bytes: size,
                class,
                priority: c.priority,
                tickets: c.tickets,
                weight: c.weight,
                deadline: c.deadline,
            },
            None => Admit {
                bytes: size,
                class,
                priority: 0.0,
                tickets: 1.0,
                weight: 1.0,
                deadline: None,
            },
        };
        let mut head = Vec::with_capacity(256 + if size <= 16384 { size as usize } else { 0 });
        let ctype = http::content_type(if index { b"index.html" } else { &rel });
        http::write_head(&mut head, 200, size, ctype, keep);
        let conn = self.entries[t].as_ref().expect("live entry").conn.clone();
        let now = now_ns();
        self.seq += 1;
        let job = Box::new(Job {
            conn: conn.clone(),
            file,
            size,
            sent: 0,
            head,
            head_off: 0,
            head_body: 0,
            head_sent: false,
            head_only: req.method == Method::Head,
            packet: None,
            keep_alive: keep,
            class,
            request_id: req.request_id,
            path: rel,
            seq: self.seq,
            arrival_ns: now,
            admitted_ns: 0,
            first_run_ns: 0,
            wait_ns: 0,
            service_ns: 0,
            parked_ns: 0,
            parks: 0,
            parked_at_ns: 0,
            progress_ns: 0,
            turns: 0,
            switches: 0,
            first_worker: -1,
            workers: Vec::new(),
            last_worker: -1,
            segments: Vec::new(),
        });
        conn.busy.store(true, SeqCst);
        if more {
            conn.pending.store(true, SeqCst);
        }
        self.admits.push((job, admit));
        Flow::Stop
    }

    /// Puts the requests parsed since the last call into the buffer, under one lock; blocks
    /// while it is full.
    fn flush_admits(&mut self) {
        if self.admits.is_empty() {
            return;
        }
        let refused = self.sh.queue.push_all_until(&mut self.admits, &self.stop);
        for job in refused {
            job.conn.busy.store(false, SeqCst);
            if let Some(t) = self.token_of(&job.conn) {
                self.close(t);
            }
        }
    }

    /// The master answers with an error status itself: to `req` when it parsed, its head
    /// alone if it was a HEAD.
    fn answer(&mut self, t: usize, status: u16, keep: bool, req: Option<&http::Request>) -> Flow {
        let request_id = req.and_then(|r| r.request_id);
        let path = req.map(|r| r.target.as_str());
        let head_only = req.is_some_and(|r| r.method == Method::Head);
        *self.stats.errors.entry(status).or_default() += 1;
        if let Some(log) = &self.log {
            let now = now_ns();
            let _ = log.send(Record {
                request_id: request_id.map_or(-1, |i| i as i64),
                status,
                class: -1,
                bytes: 0,
                sent: 0,
                worker: -1,
                arrival_ns: now,
                admitted_ns: 0,
                first_run_ns: 0,
                completion_ns: now,
                wait_ns: 0,
                service_ns: 0,
                parked_ns: 0,
                parks: 0,
                turns: 0,
                switches: 0,
                workers: 0,
                path: path.unwrap_or("").to_string(),
                segments: Vec::new(),
            });
        }
        let e = self.entries[t].as_mut().expect("live entry");
        let msg = http::error_response(status, keep, head_only);
        let complete = (&e.conn.stream).write_nonblocking(&msg);
        if keep && complete {
            e.idle_since_ns = now_ns();
            return Flow::Continue;
        }
        self.linger(t);
        Flow::Stop
    }

    /// Closes a connection whose responses are all written after a lingering read.
    fn finish(&mut self, t: usize) {
        let e = self.entries[t].as_mut().expect("live entry");
        e.conn.busy.store(false, SeqCst);
        e.conn.pending.store(false, SeqCst);
        self.linger(t);
    }

    /// A lingering close: the write side shuts (the kernel sends what is left, then the end of
    /// file) and the input is read and thrown away until the client closes or the linger runs
    /// out (`process` and `sweep` see to both).
    fn linger(&mut self, t: usize) {
        let e = self.entries[t].as_mut().expect("live entry");
        let _ = e.conn.stream.shutdown(Shutdown::Write);
        e.linger_until = Some(now_ns() + LINGER_NS);
        e.buf = Vec::new();
        self.process(t);
    }

    /// Closes a connection whose responses are all written, at a stop: at once (a stop does
    /// not wait for a client that keeps its socket open), but with its input read first. A
    /// close with input unread makes the kernel answer with a reset, which throws away the
    /// response's unsent tail and what the client has not read yet: a request pipelined behind
    /// one served at a stop cut that one's 3 MB response to 113 KB, although it was logged and
    /// counted as served. With nothing unread the kernel sends the tail, then the end of file.
    fn close_after_response(&mut self, t: usize) {
        if let Some(e) = &self.entries[t] {
            let _ = e.conn.stream.shutdown(Shutdown::Write);
        }
        self.read_away(t);
        self.close(t);
    }

    /// Reads and throws away what a connection has waiting (so that closing it sends an end
    /// of file rather than a reset), at most `LINGER_READS` reads: a client that writes as
    /// fast as the master reads must not hold it (each new arrival raises a new edge).
    fn read_away(&mut self, t: usize) -> Input {
        let Some(e) = &self.entries[t] else {
            return Input::Ended;
        };
        for _ in 0..LINGER_READS {
            match (&e.conn.stream).read(&mut self.scratch) {
                Ok(0) => return Input::Ended,
                Ok(_) => {}
                Err(x) if x.kind() == io::ErrorKind::Interrupted => {}
                Err(x) if x.kind() == io::ErrorKind::WouldBlock => return Input::Waiting,
                Err(_) => return Input::Ended,
            }
        }
        Input::Waiting
    }

    fn close(&mut self, t: usize) {
        if let Some(e) = self.entries[t].take() {
            let fd = e.conn.stream.as_raw_fd();
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
            self.free.push(t);
            self.open -= 1;
        }
    }

    fn sweep(&mut self, now: u64) {
        let header = (self.sh.cfg.header_timeout_ms * 1e6) as u64;
        let idle = (self.sh.cfg.idle_timeout_ms * 1e6) as u64;
        for t in 0..self.entries.len() {
            let Some(e) = &self.entries[t] else { continue };
            if let Some(until) = e.linger_until {
                if now > until {
                    self.close(t);
                }
                continue;
            }
            if e.conn.busy.load(SeqCst) {
                continue;
            }
            if !e.buf.is_empty() {
                if now.saturating_sub(e.first_byte_ns) > header {
                    self.stats.header_timeouts += 1;
                    self.answer(t, 408, false, None);
                }
            } else {
                let since = e.idle_since_ns.max(e.conn.done_at.load(Relaxed));
                if now.saturating_sub(since) > idle {
                    self.stats.idle_closed += 1;
                    self.close(t);
                }
            }
        }
    }

    fn begin_drain(&mut self) {
        self.draining = true;
        self.sh.draining.store(true, SeqCst);
        if let Some(mut l) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut l);
        }
        // Idle connections close now; lingering ones go on reading until the drain ends (it does
        // not wait for them) and are read once more then, before they close.
        for t in 0..self.entries.len() {
            if self.entries[t]
                .as_ref()
                .is_some_and(|e| !e.conn.busy.load(SeqCst) && e.linger_until.is_none())
            {
                self.read_away(t);
                self.close(t);
            }
        }
    }
}

trait WriteNonBlocking {
    /// One non-blocking attempt to write all of `data`; true if it all went.
    fn write_nonblocking(self, data: &[u8]) -> bool;
}

impl WriteNonBlocking for &TcpStream {
    fn write_nonblocking(self, data: &[u8]) -> bool {
        use std::io::Write;
        let mut s = self;
        matches!(s.write(data), Ok(n) if n == data.len())
    }
}

fn spawn_logger(path: &Path) -> io::Result<(Sender<Record>, JoinHandle<()>)> {
    let mut w = csv::Writer::from_path(path).map_err(io::Error::other)?;
    let (tx, rx) = mpsc::channel::<Record>();
    let h = std::thread::Builder::new()
        .name("schedlab-log".into())
        .spawn(move || {
            for r in rx {
                let _ = w.serialize(r);
            }
            let _ = w.flush();
        })?;
    Ok((tx, h))
}

/// Writes JSON atomically: a reader never sees half a file.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(value).map_err(io::Error::other)?,
    )?;
    std::fs::rename(tmp, path)
}

/// The address a server would listen on and a few facts for messages.
pub fn describe(cfg: &ServeConfig) -> String {
    format!(
        "{}:{} policy {} workers {} buffer {} cost {}",
        cfg.host,
        cfg.port,
        cfg.policy,
        cfg.workers,
        cfg.buffer,
        cfg.cost.written()
    )
}

/// Milliseconds of a stats' run.
pub fn duration_ms(s: &Stats) -> f64 {
    ms_since(s.started_ns, s.stopped_ns)
}
