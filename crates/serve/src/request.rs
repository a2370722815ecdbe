//! A request and its connection, as the master, the workers and the parking lot share them:
//! the connection ([`Conn`]), the request on its way ([`Job`]), its row of the log
//! ([`Record`]), and the socket's unsent bytes (`unsent`). Who does what with them is in
//! [`crate::server`], [`crate::worker`] and [`crate::park`].

use std::fs::File;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use mio::net::TcpStream;
use serde::Serialize;

/// A client connection, shared by the master and the worker serving it.
pub struct Conn {
    pub stream: TcpStream,
    pub(crate) token: usize,
    pub(crate) busy: AtomicBool,
    pub(crate) pending: AtomicBool,
    pub(crate) done_at: AtomicU64,
}

pub(crate) enum Msg {
    /// Handed back with input waiting.
    Ready,
    /// The worker is done with it and it must close (after a lingering read if `linger`).
    Close { linger: bool },
}

/// One row of the server's per-request log.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    pub request_id: i64,
    /// HTTP status; 0 when the transfer was abandoned (client gone or too slow).
    pub status: u16,
    pub class: i64,
    pub bytes: u64,
    pub sent: u64,
    /// First worker that served it; -1 for answers of the master (errors).
    pub worker: i32,
    /// When the master parsed it.
    pub arrival_ns: u64,
    /// When it entered the buffer (0 for answers of the master).
    pub admitted_ns: u64,
    /// 0 when no worker ever ran it.
    pub first_run_ns: u64,
    pub completion_ns: u64,
    pub wait_ns: u64,
    pub service_ns: u64,
    /// Time parked on a full socket, waiting for the client to read (in `completion_ns −
    /// arrival_ns`, in neither `wait_ns` nor `service_ns`), and how many times it parked.
    pub parked_ns: u64,
    pub parks: u32,
    pub turns: u32,
    pub switches: u32,
    pub workers: u32,
    pub path: String,
    /// Every pass of a worker over the request, `worker:start_ns:end_ns` separated by `;` (one
    /// CSV field): which worker served it when. Passes of one worker with no other request
    /// between them are one of `turns` but separate segments here; their times add up to
    /// `service_ns`.
    #[serde(serialize_with = "segments_field")]
    pub segments: Vec<Segment>,
}

fn segments_field<S: serde::Serializer>(segments: &[Segment], s: S) -> Result<S::Ok, S::Error> {
    use std::fmt::Write;
    let mut text = String::with_capacity(segments.len() * 32);
    for (i, (w, a, b)) in segments.iter().enumerate() {
        if i > 0 {
            text.push(';');
        }
        let _ = write!(text, "{w}:{a}:{b}");
    }
    s.serialize_str(&text)
}

/// A request on its way through the server.
pub struct Job {
    pub conn: Arc<Conn>,
    pub file: File,
    pub size: u64,
    /// Body bytes sent so far.
    pub sent: u64,
    /// The response head, followed by the first packet's body when that is small (one write).
    pub head: Vec<u8>,
    /// Bytes of `head` written.
    pub head_off: usize,
    /// Body bytes at the end of `head`.
    pub head_body: u64,
    /// Whether all of `head` is written.
    pub head_sent: bool,
    pub head_only: bool,
    /// The packet being sent, if a full socket interrupted it.
    pub packet: Option<Packet>,
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
    /// Time parked on a full socket, and how many times it parked.
    pub parked_ns: u64,
    pub parks: u32,
    /// When it last parked (the end of the turn that met the full socket).
    pub parked_at_ns: u64,
    /// When the client last took bytes (a write went through, or the socket drained while
    /// parked): the send timeout counts from here.
    pub progress_ns: u64,
    pub turns: u32,
    pub switches: u32,
    pub first_worker: i32,
    pub workers: Vec<u16>,
    /// The worker that ran its last turn (-1: none yet).
    pub last_worker: i32,
    /// Every pass of a worker over it (worker, start ns, end ns), kept only while the log is on.
    pub segments: Vec<Segment>,
}

/// A packet under way: body bytes still to write, and the fraction of a packet it is.
#[derive(Clone, Copy, Debug)]
pub struct Packet {
    pub left: u64,
    pub fraction: f64,
}

/// One pass of a worker over a request: (worker, start ns, end ns) on the server's clock.
pub type Segment = (u16, u64, u64);

/// Bytes written to the socket that the client has not acknowledged (SIOCOUTQ): the
/// parking lot's measure of progress, since the kernel says "writable" only when half of a
/// large send buffer is free, which a client reading steadily but slowly may take longer than
/// the send timeout to reach.
pub(crate) fn unsent(fd: RawFd) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int through the pointer.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    if r == 0 {
        n.max(0) as u64
    } else {
        u64::MAX // unknown: never counts as progress
    }
}
