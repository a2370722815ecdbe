//! One load-generator thread: an edge-triggered event loop over its connections, with a
//! timerfd for send times precise to microseconds.
//!
//! Latency is timed from the *intended* send time (wrk2's rule): in the open loop the arrival
//! instants are drawn in advance, and a request that waits for a connection, or for a loop
//! that fell behind, carries that wait in its response time instead of hiding it (no
//! coordinated omission). A send later than `miss` after its intended time is counted.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use schedlab_model::dist::Dist;

use super::{LoadConfig, Progress, Rec, ERR_CLOSED, ERR_CONNECT, ERR_PROTOCOL, ERR_TIMEOUT};
use crate::clock::now_ns;

const TIMER: Token = Token(usize::MAX - 1);
const TICK_NS: u64 = 50_000_000;

/// When requests are sent.
pub enum Arrivals {
    /// Inter-arrival times drawn from a distribution in ms.
    Dist(Dist),
    /// A fixed period, starting at `phase` (threads interleave).
    Constant { period_ns: f64, phase_ns: f64 },
}

pub enum Plan {
    Closed {
        /// (global client id, fixed class) of each client of this thread.
        clients: Vec<(u32, Option<u32>)>,
        think: Dist,
    },
    Open {
        arrivals: Arrivals,
    },
    /// Scripted sends: (offset ns, target, class).
    Script {
        sends: Vec<(u64, usize, i64)>,
    },
}

pub struct ThreadPlan {
    pub index: usize,
    pub threads: usize,
    pub plan: Plan,
    pub jobs: Option<u64>,
    pub warmup: u64,
    pub seed: u64,
    /// Connections opened before the start.
    pub preconnect: usize,
    pub max_connections: usize,
}

pub struct ThreadOut {
    pub done: Vec<Rec>,
    /// Every measured request that completed with a response: its intended send and its
    /// completion (ns), kept whether or not `keep_requests` is, for the run's summary.
    pub measured: Vec<(u64, u64)>,
    pub intervals: Vec<Histogram<u64>>,
    pub missed: u64,
    pub sent: u64,
    pub bytes: u64,
    pub connections: u64,
    pub errors: [u64; 5],
    pub status: std::collections::BTreeMap<u16, u64>,
    pub last_done_ns: u64,
    /// When this thread stopped sending (its time, its quota, the precision rule, its script).
    pub stopped_ns: u64,
    pub warm_done: u64,
    /// The earliest intended send of a measured request (`u64::MAX`: none).
    pub first_measured_ns: u64,
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum State {
    Connecting,
    Idle,
    Sending,
    Receiving,
}

enum Chunk {
    Size,
    Data(u64),
    DataEnd,
    Trailers,
}

enum Body {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
}

struct CConn {
    stream: TcpStream,
    state: State,
    out: Vec<u8>,
    out_pos: usize,
    hdr: Vec<u8>,
    cbuf: Vec<u8>,
    body: Option<Body>,
    status: u16,
    bytes: u64,
    close_after: bool,
    cur: Option<usize>,
    client: Option<usize>,
    deadline: u64,
}

struct TimerFd(OwnedFd);

impl TimerFd {
    fn new() -> io::Result<TimerFd> {
        // SAFETY: plain syscall with constant flags; the result is checked below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    /// Fires at the absolute CLOCK_MONOTONIC time `at_ns` (0 disarms).
    fn arm(&self, at_ns: u64) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: a valid itimerspec for the call; no old value requested.
        unsafe {
            libc::timerfd_settime(
                self.0.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
    }
    fn clear(&self) {
        let mut b = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer; EAGAIN is fine.
        unsafe { libc::read(self.0.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
    }
}

pub struct Engine<'a> {
    cfg: &'a LoadConfig,
    plan: ThreadPlan,
    addr: SocketAddr,
    poll: Poll,
    timer: TimerFd,
    armed: u64,
    conns: Vec<Option<CConn>>,
    free: Vec<usize>,
    open: usize,
    idle: Vec<usize>,
    backlog: VecDeque<usize>,
    wakeups: BinaryHeap<Reverse<(u64, usize)>>,
    client_conn: Vec<Option<usize>>,
    recs: Vec<Option<Rec>>,
    rec_free: Vec<usize>,
    issued: u64,
    stop_issuing: bool,
    outstanding: usize,
    next_arrival: u64,
    script_pos: usize,
    rng: Xoshiro256PlusPlus,
    scratch: Vec<u8>,
    start: u64,
    progress: Arc<Progress>,
    out: ThreadOut,
}

fn new_hist() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits")
}

impl<'a> Engine<'a> {
    pub fn new(cfg: &'a LoadConfig, plan: ThreadPlan, progress: Arc<Progress>) -> io::Result<Self> {
        let poll = Poll::new()?;
        let timer = TimerFd::new()?;
        poll.registry().register(
            &mut SourceFd(&timer.0.as_raw_fd()),
            TIMER,
            Interest::READABLE,
        )?;
        let clients = match &plan.plan {
            Plan::Closed { clients, .. } => clients.len(),
            _ => 0,
        };
        let seed = plan.seed ^ (plan.index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Ok(Engine {
            cfg,
            addr: cfg.addr,
            poll,
            timer,
            armed: 0,
            conns: Vec::new(),
            free: Vec::new(),
            open: 0,
            idle: Vec::new(),
            backlog: VecDeque::new(),
            wakeups: BinaryHeap::new(),
            client_conn: vec![None; clients],
            recs: Vec::new(),
            rec_free: Vec::new(),
            issued: 0,
            stop_issuing: false,
            outstanding: 0,
            next_arrival: 0,
            script_pos: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            scratch: vec![0; 64 * 1024],
            start: 0,
            progress,
            plan,
            out: ThreadOut {
                done: Vec::new(),
                measured: Vec::new(),
                intervals: Vec::new(),
                missed: 0,
                sent: 0,
                bytes: 0,
                connections: 0,
                errors: [0; 5],
                status: Default::default(),
                last_done_ns: 0,
                stopped_ns: 0,
                warm_done: 0,
                first_measured_ns: u64::MAX,
            },
        })
    }

    fn connect(&mut self) -> Option<usize> {
        let stream = TcpStream::connect(self.addr).ok()?;
        let _ = stream.set_nodelay(true);
        let t = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let fd = stream.as_raw_fd();
        if self
            .poll
            .registry()
            .register(
                &mut SourceFd(&fd),
                Token(t),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            self.free.push(t);
            return None;
        }
        self.conns[t] = Some(CConn {
            stream,
            state: State::Connecting,
            out: Vec::with_capacity(256),
            out_pos: 0,
            hdr: Vec::new(),
            cbuf: Vec::new(),
            body: None,
            status: 0,
            bytes: 0,
            close_after: false,
            cur: None,
            client: None,
            deadline: now_ns() + (self.cfg.timeout_ms * 1e6) as u64,
        });
        self.open += 1;
        self.out.connections += 1;
        Some(t)
    }

    fn close(&mut self, t: usize) {
        if let Some(c) = self.conns[t].take() {
            let fd = c.stream.as_raw_fd();
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
            self.free.push(t);
            self.open -= 1;
            if let Some(cl) = c.client {
                self.client_conn[cl] = None;
            }
            self.idle.retain(|i| *i != t);
        }
    }

    /// Opens the connections of the plan and waits until they are up (or time out).
    pub fn preconnect(&mut self) {
        let n = match &self.plan.plan {
            Plan::Closed { clients, .. } => clients.len(),
            _ => self.plan.preconnect.min(self.plan.max_connections),
        };
        for i in 0..n {
            let Some(t) = self.connect() else { continue };
            if let Plan::Closed { .. } = self.plan.plan {
                self.conns[t].as_mut().unwrap().client = Some(i);
                self.client_conn[i] = Some(t);
            }
        }
        let deadline = now_ns() + (self.cfg.timeout_ms * 1e6) as u64;
        let mut events = Events::with_capacity(1024);
        while now_ns() < deadline
            && self
                .conns
                .iter()
                .flatten()
                .any(|c| c.state == State::Connecting)
        {
            let _ = self
                .poll
                .poll(&mut events, Some(std::time::Duration::from_millis(10)));
            for ev in events.iter() {
                let t = ev.token().0;
                if t == TIMER.0 {
                    continue;
                }
                if !self.check_connected(t) {
                    self.close(t);
                }
            }
        }
        for t in 0..self.conns.len() {
            if self.conns[t]
                .as_ref()
                .is_some_and(|c| c.state == State::Connecting)
            {
                self.close(t);
            }
        }
        if !matches!(self.plan.plan, Plan::Closed { .. }) {
            self.idle = (0..self.conns.len())
                .filter(|t| self.conns[*t].is_some())
                .collect();
        }
    }

    /// Connecting -> Idle once the socket is connected; false if the connect failed.
    fn check_connected(&mut self, t: usize) -> bool {
        let Some(c) = self.conns[t].as_mut() else {
            return false;
        };
        if c.state != State::Connecting {
            return true;
        }
        match c.stream.take_error() {
            Ok(None) => {}
            _ => return false,
        }
        match c.stream.peer_addr() {
            Ok(_) => {
                c.state = State::Idle;
                true
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => true,
            Err(_) => false,
        }
    }

    /// Runs the plan from `start_at` (after `preconnect`).
    pub fn run(mut self, start_at: u64) -> ThreadOut {
        // All threads start together; the run's clock starts at `start_at`.
        while now_ns() < start_at {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        self.start = start_at;
        self.next_arrival = self.start;
        match &self.plan.plan {
            Plan::Closed { clients, .. } => {
                for i in 0..clients.len() {
                    self.wakeups.push(Reverse((self.start, i)));
                }
            }
            Plan::Open {
                arrivals: Arrivals::Constant { phase_ns, .. },
            } => self.next_arrival = self.start + *phase_ns as u64,
            _ => {}
        }
        let end_issue = self
            .cfg
            .time_ms
            .map_or(u64::MAX, |t| self.start + (t * 1e6) as u64);
        let mut events = Events::with_capacity(1024);
        let mut next_tick = now_ns() + TICK_NS;
        loop {
            let now = now_ns();
            if now >= end_issue || self.progress.precise.load(Relaxed) {
                self.stop_sending(now);
            }
            self.fire_due(now);
            if self.stop_issuing && self.outstanding == 0 {
                break;
            }
            let next = self.next_due().min(next_tick);
            let timeout = if next <= now_ns() {
                // Something is due already: look at the sockets without sleeping.
                std::time::Duration::ZERO
            } else {
                if next != self.armed {
                    self.timer.arm(next);
                    self.armed = next;
                }
                std::time::Duration::from_millis(100)
            };
            let _ = self.poll.poll(&mut events, Some(timeout));
            for ev in events.iter() {
                let t = ev.token();
                if t == TIMER {
                    self.timer.clear();
                    self.armed = 0;
                    continue;
                }
                self.on_event(t.0, ev.is_readable(), ev.is_writable() || ev.is_error());
            }
            let now = now_ns();
            if now >= next_tick {
                self.sweep(now);
                next_tick = now + TICK_NS;
            }
        }
        self.out
    }

    fn next_due(&self) -> u64 {
        if self.stop_issuing {
            return u64::MAX;
        }
        let mut next = u64::MAX;
        match &self.plan.plan {
            Plan::Open { .. } => next = self.next_arrival,
            Plan::Script { sends } => {
                if let Some((off, _, _)) = sends.get(self.script_pos) {
                    next = self.start + off;
                }
            }
            Plan::Closed { .. } => {}
        }
        if let Some(Reverse((t, _))) = self.wakeups.peek() {
            next = next.min(*t);
        }
        next
    }

    fn stop_sending(&mut self, now: u64) {
        if !self.stop_issuing {
            self.stop_issuing = true;
            self.out.stopped_ns = now;
        }
    }

    fn quota_reached(&self) -> bool {
        self.plan
            .jobs
            .is_some_and(|j| self.issued >= j + self.plan.warmup)
    }

    fn fire_due(&mut self, now: u64) {
        if self.stop_issuing {
            return;
        }
        loop {
            if self.quota_reached() {
                self.stop_sending(now);
                return;
            }
            let (intended, target, class) = match &self.plan.plan {
                Plan::Open { arrivals } => {
                    if self.next_arrival > now {
                        break;
                    }
                    let intended = self.next_arrival;
                    let gap = match arrivals {
                        Arrivals::Dist(d) => d.sample(&mut self.rng) * 1e6,
                        Arrivals::Constant { period_ns, .. } => *period_ns,
                    };
                    self.next_arrival = intended + gap.max(0.0) as u64;
                    let (target, class) = self.cfg.workload.pick(&mut self.rng, None);
                    (intended, target, class)
                }
                Plan::Script { sends } => {
                    let Some(&(off, target, class)) = sends.get(self.script_pos) else {
                        self.stop_sending(now);
                        return;
                    };
                    if self.start + off > now {
                        break;
                    }
                    self.script_pos += 1;
                    (self.start + off, target, class)
                }
                Plan::Closed { .. } => break,
            };
            self.issue(intended, None, target, class);
        }
        while let Some(Reverse((t, client))) = self.wakeups.peek().copied() {
            if t > now {
                break;
            }
            if self.quota_reached() {
                self.stop_sending(now);
                break;
            }
            self.wakeups.pop();
            let fixed = match &self.plan.plan {
                Plan::Closed { clients, .. } => clients[client].1,
                _ => None,
            };
            let (target, class) = self.cfg.workload.pick(&mut self.rng, fixed);
            self.issue(t, Some(client), target, class);
        }
    }

    fn issue(&mut self, intended: u64, client: Option<usize>, target: usize, class: i64) {
        let p = &self.plan;
        let id = p.index as u64 + p.threads as u64 * self.issued;
        self.issued += 1;
        let warm = self.issued <= p.warmup;
        let global_client = match (&p.plan, client) {
            (Plan::Closed { clients, .. }, Some(c)) => clients[c].0 as i64,
            _ => -1,
        };
        let rec = Rec {
            id,
            client: global_client,
            class,
            target: target as u32,
            intended,
            sent: 0,
            done: 0,
            bytes: 0,
            status: 0,
            error: 0,
            warm,
        };
        let r = match self.rec_free.pop() {
            Some(i) => {
                self.recs[i] = Some(rec);
                i
            }
            None => {
                self.recs.push(Some(rec));
                self.recs.len() - 1
            }
        };
        self.outstanding += 1;
        let t = match client {
            Some(c) => match self.client_conn[c] {
                Some(t) => Some(t),
                None => {
                    let t = self.connect();
                    if let Some(t) = t {
                        self.conns[t].as_mut().unwrap().client = Some(c);
                        self.client_conn[c] = Some(t);
                    }
                    t
                }
            },
            None => match self.idle.pop() {
                Some(t) => Some(t),
                None if self.open < self.plan.max_connections => self.connect(),
                None => {
                    self.backlog.push_back(r);
                    return;
                }
            },
        };
        match t {
            Some(t) => self.attach(t, r),
            None => self.finish_rec(r, ERR_CONNECT, client),
        }
    }

    /// Gives request `r` to connection `t`; sends it now if connected.
    fn attach(&mut self, t: usize, r: usize) {
        let cfg = self.cfg;
        let rec = self.recs[r].as_ref().expect("live record");
        let c = self.conns[t].as_mut().expect("live connection");
        c.cur = Some(r);
        c.out.clear();
        c.out_pos = 0;
        let target = &cfg.workload.targets[rec.target as usize];
        let _ = write!(
            c.out,
            "GET {}{} HTTP/1.1\r\nHost: {}\r\nX-Request-Id: {}\r\n",
            cfg.base, target.path, cfg.host_header, rec.id
        );
        if rec.class >= 0 {
            if let Some(name) = cfg.workload.classes.get(rec.class as usize) {
                let _ = write!(c.out, "X-Schedlab-Class: {name}\r\n");
            }
        }
        if !cfg.keep_alive {
            c.out.extend_from_slice(b"Connection: close\r\n");
        }
        c.out.extend_from_slice(b"\r\n");
        if c.state == State::Idle {
            self.start_send(t);
        }
    }

    fn start_send(&mut self, t: usize) {
        let now = now_ns();
        let c = self.conns[t].as_mut().expect("live connection");
        let r = c.cur.expect("a request to send");
        let rec = self.recs[r].as_mut().expect("live record");
        rec.sent = now;
        if now.saturating_sub(rec.intended) > (self.cfg.miss_ms * 1e6) as u64 && !rec.warm {
            self.out.missed += 1;
            self.progress.missed.fetch_add(1, Relaxed);
        }
        self.out.sent += 1;
        self.progress.sent.fetch_add(1, Relaxed);
        c.state = State::Sending;
        c.deadline = now + (self.cfg.timeout_ms * 1e6) as u64;
        c.hdr.clear();
        c.body = None;
        c.bytes = 0;
        c.status = 0;
        c.close_after = false;
        self.write_more(t);
    }

    fn write_more(&mut self, t: usize) {
        let c = self.conns[t].as_mut().expect("live connection");
        while c.out_pos < c.out.len() {
            match (&c.stream).write(&c.out[c.out_pos..]) {
                Ok(n) => c.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.fail(t, ERR_CLOSED),
            }
        }
        c.state = State::Receiving;
    }

    fn on_event(&mut self, t: usize, readable: bool, writable: bool) {
        let Some(c) = self.conns.get(t).and_then(|c| c.as_ref()) else {
            return;
        };
        if c.state == State::Connecting {
            if !writable && !readable {
                return;
            }
            if !self.check_connected(t) {
                return self.fail(t, ERR_CONNECT);
            }
            let c = self.conns[t].as_ref().unwrap();
            if c.state == State::Idle && c.cur.is_some() {
                self.start_send(t);
            } else if c.state == State::Idle && c.client.is_none() {
                self.idle.push(t);
                if let Some(r) = self.backlog.pop_front() {
                    self.idle.pop();
                    self.attach(t, r);
                }
            }
        }
        let Some(c) = self.conns.get(t).and_then(|c| c.as_ref()) else {
            return;
        };
        if writable && c.state == State::Sending {
            self.write_more(t);
        }
        if readable {
            self.read(t);
        }
    }

    fn read(&mut self, t: usize) {
        loop {
            let Some(c) = self.conns[t].as_mut() else {
                return;
            };
            match (&c.stream).read(&mut self.scratch) {
                Ok(0) => {
                    let until_close = matches!(c.body, Some(Body::UntilClose));
                    if c.cur.is_some() && until_close && c.state == State::Receiving {
                        c.close_after = true;
                        return self.complete(t);
                    }
                    if c.cur.is_some() {
                        return self.fail(t, ERR_CLOSED);
                    }
                    return self.close(t);
                }
                Ok(n) => {
                    let mut data = std::mem::take(&mut self.scratch);
                    let r = self.feed(t, &data[..n]);
                    std::mem::swap(&mut self.scratch, &mut data);
                    match r {
                        Feed::More => {}
                        Feed::Done => self.complete(t),
                        Feed::Bad => return self.fail(t, ERR_PROTOCOL),
                    }
                    // A short read emptied the socket; more input raises a new event
                    // (edge-triggered), so a read that would only say EAGAIN is saved. Not
                    // when the response ends at the peer's close: a FIN that came with the
                    // last bytes raises no new event, so read on until EOF or EAGAIN.
                    let until_close = self.conns[t]
                        .as_ref()
                        .is_some_and(|c| matches!(c.body, Some(Body::UntilClose)));
                    if n < self.scratch.len() && !until_close {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    if self.conns[t].as_ref().is_some_and(|c| c.cur.is_some()) {
                        return self.fail(t, ERR_CLOSED);
                    }
                    return self.close(t);
                }
            }
        }
    }

    /// Consumes response bytes.
    fn feed(&mut self, t: usize, data: &[u8]) -> Feed {
        let c = self.conns[t].as_mut().expect("live connection");
        if c.cur.is_none() || c.state != State::Receiving {
            return if data.is_empty() {
                Feed::More
            } else {
                Feed::Bad
            };
        }
        if c.body.is_none() {
            c.hdr.extend_from_slice(data);
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut resp = httparse::Response::new(&mut headers);
            let n = match resp.parse(&c.hdr) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) if c.hdr.len() < 64 * 1024 => return Feed::More,
                _ => return Feed::Bad,
            };
            let status = resp.code.unwrap_or(0);
            let mut len = None;
            let mut chunked = false;
            let mut close = resp.version == Some(0);
            for h in resp.headers.iter() {
                if h.name.eq_ignore_ascii_case("content-length") {
                    len = std::str::from_utf8(h.value)
                        .ok()
                        .and_then(|v| v.trim().parse::<u64>().ok());
                    if len.is_none() {
                        return Feed::Bad;
                    }
                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = h.value.to_ascii_lowercase().ends_with(b"chunked");
                } else if h.name.eq_ignore_ascii_case("connection") {
                    let v = h.value.to_ascii_lowercase();
                    if v.windows(5).any(|w| w == b"close") {
                        close = true;
                    } else if v.windows(10).any(|w| w == b"keep-alive") {
                        close = false;
                    }
                }
            }
            c.status = status;
            c.close_after = close || !self.cfg.keep_alive;
            c.body = Some(
                if status == 204 || status == 304 || (100..200).contains(&status) {
                    Body::Length(0)
                } else if chunked {
                    Body::Chunked(Chunk::Size)
                } else if let Some(l) = len {
                    Body::Length(l)
                } else {
                    Body::UntilClose
                },
            );
            let rest = c.hdr.split_off(n);
            c.hdr.clear();
            return Self::body(c, &rest);
        }
        Self::body(c, data)
    }

    fn body(c: &mut CConn, mut data: &[u8]) -> Feed {
        loop {
            match c.body.as_mut().expect("headers parsed") {
                Body::Length(left) => {
                    let k = (*left).min(data.len() as u64);
                    *left -= k;
                    c.bytes += k;
                    data = &data[k as usize..];
                    return match (*left == 0, data.is_empty()) {
                        (true, true) => Feed::Done,
                        (true, false) => Feed::Bad,
                        (false, _) => Feed::More,
                    };
                }
                Body::UntilClose => {
                    c.bytes += data.len() as u64;
                    return Feed::More;
                }
                Body::Chunked(state) => match state {
                    Chunk::Size => {
                        let Some(i) = memchr::memchr(b'\n', data) else {
                            c.cbuf.extend_from_slice(data);
                            return if c.cbuf.len() > 1024 {
                                Feed::Bad
                            } else {
                                Feed::More
                            };
                        };
                        c.cbuf.extend_from_slice(&data[..=i]);
                        data = &data[i + 1..];
                        match httparse::parse_chunk_size(&c.cbuf) {
                            Ok(httparse::Status::Complete((_, 0))) => *state = Chunk::Trailers,
                            Ok(httparse::Status::Complete((_, n))) => *state = Chunk::Data(n),
                            _ => return Feed::Bad,
                        }
                        c.cbuf.clear();
                    }
                    Chunk::Data(left) => {
                        let k = (*left).min(data.len() as u64);
                        *left -= k;
                        c.bytes += k;
                        data = &data[k as usize..];
                        if *left == 0 {
                            *state = Chunk::DataEnd;
                        } else {
                            return Feed::More;
                        }
                    }
                    Chunk::DataEnd => {
                        let need = 2 - c.cbuf.len();
                        let k = need.min(data.len());
                        c.cbuf.extend_from_slice(&data[..k]);
                        data = &data[k..];
                        if c.cbuf.len() < 2 {
                            return Feed::More;
                        }
                        if c.cbuf != b"\r\n" {
                            return Feed::Bad;
                        }
                        c.cbuf.clear();
                        *state = Chunk::Size;
                    }
                    Chunk::Trailers => {
                        c.cbuf.extend_from_slice(data);
                        if c.cbuf.starts_with(b"\r\n")
                            || c.cbuf.windows(4).any(|w| w == b"\r\n\r\n")
                        {
                            c.cbuf.clear();
                            return Feed::Done;
                        }
                        return if c.cbuf.len() > 8192 {
                            Feed::Bad
                        } else {
                            Feed::More
                        };
                    }
                },
            }
            if data.is_empty() {
                // More chunks to come (or the final CRLF).
                return Feed::More;
            }
        }
    }

    fn complete(&mut self, t: usize) {
        let c = self.conns[t].as_mut().expect("live connection");
        let r = c.cur.take().expect("a request in flight");
        c.state = State::Idle;
        let (status, bytes, close, client) = (c.status, c.bytes, c.close_after, c.client);
        c.body = None;
        {
            let rec = self.recs[r].as_mut().expect("live record");
            rec.status = status;
            rec.bytes = bytes;
        }
        self.finish_rec(r, 0, client);
        if close {
            self.close(t);
            if client.is_none() {
                self.next_from_backlog(None);
            }
        } else if client.is_none() {
            self.next_from_backlog(Some(t));
        }
    }

    /// A free connection (or a slot to open one) takes the oldest backlogged request.
    fn next_from_backlog(&mut self, t: Option<usize>) {
        match (self.backlog.pop_front(), t) {
            (Some(r), Some(t)) => self.attach(t, r),
            (Some(r), None) => match self.connect() {
                Some(t) => self.attach(t, r),
                None => self.finish_rec(r, ERR_CONNECT, None),
            },
            (None, Some(t)) => self.idle.push(t),
            (None, None) => {}
        }
    }

    fn fail(&mut self, t: usize, err: u8) {
        let c = self.conns[t].as_mut().expect("live connection");
        let cur = c.cur.take();
        let client = c.client;
        self.close(t);
        if let Some(r) = cur {
            self.finish_rec(r, err, client);
        }
        if client.is_none() && !self.backlog.is_empty() {
            self.next_from_backlog(None);
        }
    }

    /// Records a finished request and, in the closed loop, schedules its client's next one.
    fn finish_rec(&mut self, r: usize, err: u8, client: Option<usize>) {
        let now = now_ns();
        let mut rec = self.recs[r].take().expect("live record");
        self.rec_free.push(r);
        self.outstanding -= 1;
        rec.done = now;
        rec.error = err;
        if rec.sent == 0 {
            rec.sent = now;
        }
        self.progress.done.fetch_add(1, Relaxed);
        if rec.warm {
            self.out.warm_done += 1;
            // Kept with their flag: a replay of the run needs every request a client sent.
            if self.cfg.keep_requests {
                self.out.done.push(rec);
            }
        } else {
            if err == 0 {
                self.out.measured.push((rec.intended, now));
                if self.cfg.hdr_log.is_some() {
                    // The interval log's histograms count whole microseconds.
                    let us = (now.saturating_sub(rec.intended) / 1000).max(1);
                    let i = (now.saturating_sub(self.start) / 1_000_000_000) as usize;
                    while self.out.intervals.len() <= i {
                        self.out.intervals.push(new_hist());
                    }
                    // record() grows the histogram (auto-resize); saturating_record would
                    // clamp to the initial range without a word.
                    if self.out.intervals[i].record(us).is_err() {
                        self.out.intervals[i].saturating_record(us);
                    }
                }
                *self.out.status.entry(rec.status).or_default() += 1;
                self.progress
                    .measured(now.saturating_sub(rec.intended) as f64 / 1e6);
                self.out.bytes += rec.bytes;
            } else {
                self.out.errors[err as usize] += 1;
                self.progress.errors.fetch_add(1, Relaxed);
            }
            self.out.last_done_ns = self.out.last_done_ns.max(now);
            self.out.first_measured_ns = self.out.first_measured_ns.min(rec.intended);
            if self.cfg.keep_requests {
                self.out.done.push(rec);
            }
        }
        if let (Some(c), Plan::Closed { think, .. }) = (client, &self.plan.plan) {
            if !self.stop_issuing {
                let mut pause = (think.sample(&mut self.rng) * 1e6).max(0.0) as u64;
                if err != 0 {
                    // A refused or broken connection: back off instead of spinning.
                    pause = pause.max(10_000_000);
                }
                self.wakeups.push(Reverse((now + pause, c)));
            }
        }
    }

    /// Times out requests that took longer than `timeout`.
    fn sweep(&mut self, now: u64) {
        for t in 0..self.conns.len() {
            let Some(c) = &self.conns[t] else { continue };
            if now > c.deadline && (c.cur.is_some() || c.state == State::Connecting) {
                if c.cur.is_some() {
                    self.fail(t, ERR_TIMEOUT);
                } else {
                    self.close(t);
                }
            }
        }
        if self.plan.index == 0 {
            self.progress.tick(self.cfg, self.start, now);
        }
    }
}

enum Feed {
    More,
    Done,
    Bad,
}
