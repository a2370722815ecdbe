//! The server out of file descriptors (EMFILE), in a test binary of its own: the limit is the
//! whole process's. It used to go deaf for good: the edge-triggered listener was never woken
//! again for the connections left in the accept queue. Now the queued connections get a 503
//! while descriptors lack, and the server answers again as soon as some are free.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use schedlab_serve::config::ServeSpec;
use schedlab_serve::Server;

fn status_of(mut s: &TcpStream) -> Option<u16> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        }
    }
    let text = String::from_utf8_lossy(&buf);
    text.split_whitespace().nth(1)?.parse().ok()
}

fn get(addr: SocketAddr) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .ok()?;
    status_of(&s)
}

/// In the child (`SCHEDLAB_FD_CLIENT` set): opens 30 connections that never send, then reads
/// the last 10 (those left in the server's accept queue) and prints how many got a 503. A
/// process of its own, so that its sockets do not use the server's descriptors.
fn client_mode(addr: &str) {
    let addr: SocketAddr = addr.parse().unwrap();
    let idle: Vec<TcpStream> = (0..30).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let mut shed = 0;
    for s in idle.iter().rev().take(10) {
        s.set_read_timeout(Some(Duration::from_millis(2000)))
            .unwrap();
        if status_of(s) == Some(503) {
            shed += 1;
        }
    }
    println!("SHED {shed}");
}

#[test]
fn out_of_descriptors_it_sheds_with_503_and_recovers() {
    if let Ok(addr) = std::env::var("SCHEDLAB_FD_CLIENT") {
        return client_mode(&addr);
    }
    // A hard limit of 256 descriptors for this process (the server's).
    let lim = libc::rlimit {
        rlim_cur: 256,
        rlim_max: 256,
    };
    // SAFETY: setrlimit with a valid struct; this test binary holds only this test.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), b"hello\n").unwrap();
    let spec = ServeSpec {
        root: Some(dir.path().display().to_string()),
        port: Some(0),
        announce: Some(false),
        ..Default::default()
    };
    let server = Server::bind(spec.validate().unwrap()).unwrap();
    let addr = server.local_addr();
    let handle = server.handle();
    let thread = std::thread::spawn(move || server.run(false).unwrap());
    assert_eq!(get(addr), Some(200));

    // Use up all but 10 descriptors of the server's process; a client process then opens 30
    // connections that never send: the server takes about 10 and runs out, the rest wait in
    // its accept queue.
    let mut hog = Vec::new();
    while let Ok(f) = File::open("/dev/null") {
        hog.push(f);
    }
    hog.truncate(hog.len() - 10);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "out_of_descriptors_it_sheds_with_503_and_recovers",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SCHEDLAB_FD_CLIENT", addr.to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // The harness prints the test's name first, on the same line.
    let shed: u32 = text
        .split("SHED ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no client report: {text}"))
        .parse()
        .unwrap();
    // Those the server could not take are answered 503 and closed, not left hanging.
    assert_eq!(shed, 10, "{text}");

    // Descriptors free again: the server answers at once.
    drop(hog);
    for _ in 0..5 {
        assert_eq!(get(addr), Some(200));
    }
    handle.stop();
    let stats = thread.join().unwrap();
    assert!(stats.rejected >= 10, "{}", stats.rejected);
}
