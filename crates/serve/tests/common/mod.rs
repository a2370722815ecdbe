//! What the server's integration tests share: a real server on a free port of 127.0.0.1, run
//! on a thread until stopped, and the spec every test starts from.
#![allow(dead_code)] // each test binary uses its own part of it

use std::net::SocketAddr;
use std::path::Path;
use std::thread::JoinHandle;

use schedlab_serve::config::ServeSpec;
use schedlab_serve::{Handle, Server, Stats};

pub struct Running {
    pub addr: SocketAddr,
    pub handle: Handle,
    pub thread: Option<JoinHandle<Stats>>,
}

impl Running {
    pub fn stop(mut self) -> Stats {
        self.handle.stop();
        self.thread.take().unwrap().join().unwrap()
    }
}

pub fn start(spec: ServeSpec) -> Running {
    let server = Server::bind(spec.validate().unwrap()).unwrap();
    let addr = server.local_addr();
    let handle = server.handle();
    let thread = std::thread::spawn(move || server.run(false).unwrap());
    Running {
        addr,
        handle,
        thread: Some(thread),
    }
}

/// Serving `root` on a free port, without the start-up line.
pub fn local_spec(root: &Path) -> ServeSpec {
    ServeSpec {
        root: Some(root.display().to_string()),
        port: Some(0),
        announce: Some(false),
        ..Default::default()
    }
}
