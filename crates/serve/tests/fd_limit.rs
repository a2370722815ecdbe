//! The server out of file descriptors (EMFILE), in a test binary of its own: the limit is the
//! whole process's. It used to go deaf for good: the edge-triggered listener was never woken
//! again for the connections left in the accept queue. Now the queued connections get a 503
//! while descriptors lack, and the server answers again as soon as some are free. Issue 15's
//! "must show": under `ulimit -n 256`, 400 connections opened and closed, then a request
//! answered within 1 s.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use schedlab_serve::Server;

mod common;
use common::local_spec;

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

/// The clients, in a process of their own (`SCHEDLAB_FD_CLIENT` set) so that their sockets do
/// not use the server's descriptors; started before the limit is lowered, so it has the
/// machine's. Reads one command a line on stdin, answers one line on stdout:
/// - `shed ADDR`: opens 30 connections that never send, then reads the last 10 (those left in
///   the server's accept queue) and prints how many got a 503 (`SHED n`);
/// - `flood ADDR N`: opens N connections at once, holds them 300 ms, closes them all, then
///   sends one request and prints how many connections it opened, how long the connects took,
///   the request's status (0: none) and how long it took to answer (`FLOOD n ms status us`).
fn client_mode() {
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let addr: SocketAddr = words[1].parse().unwrap();
        match words[0] {
            "shed" => {
                let idle: Vec<TcpStream> =
                    (0..30).map(|_| TcpStream::connect(addr).unwrap()).collect();
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
            "flood" => {
                let n: usize = words[2].parse().unwrap();
                let t0 = Instant::now();
                let conns: Vec<TcpStream> = (0..n)
                    .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok())
                    .collect();
                let took = t0.elapsed();
                std::thread::sleep(Duration::from_millis(300));
                let opened = conns.len();
                drop(conns);
                let t1 = Instant::now();
                let status = get(addr).unwrap_or(0);
                let after = t1.elapsed();
                println!(
                    "FLOOD {opened} {} {status} {}",
                    took.as_millis(),
                    after.as_micros()
                );
            }
            other => panic!("unknown command {other}"),
        }
    }
}

/// Sends one command to the client process and returns the numbers of its answer.
fn ask(child: &mut Child, out: &mut BufReader<ChildStdout>, cmd: &str, tag: &str) -> Vec<u64> {
    writeln!(child.stdin.as_mut().unwrap(), "{cmd}").unwrap();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the client process ended"
        );
        // The harness may print the test's name first, on the same line.
        if let Some(rest) = line.split(tag).nth(1) {
            return rest
                .split_whitespace()
                .map(|w| w.parse().unwrap())
                .collect();
        }
    }
}

#[test]
fn out_of_descriptors_it_sheds_with_503_and_recovers() {
    if std::env::var_os("SCHEDLAB_FD_CLIENT").is_some() {
        return client_mode();
    }
    let mut client = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "out_of_descriptors_it_sheds_with_503_and_recovers",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SCHEDLAB_FD_CLIENT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut client_out = BufReader::new(client.stdout.take().unwrap());
    // A hard limit of 256 descriptors for this process (the server's).
    let lim = libc::rlimit {
        rlim_cur: 256,
        rlim_max: 256,
    };
    // SAFETY: setrlimit with a valid struct; this test binary holds only this test.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), b"hello\n").unwrap();
    let spec = local_spec(dir.path());
    let server = Server::bind(spec.validate().unwrap()).unwrap();
    // The default of 10,000 connections cannot fit in 256 descriptors: clamped, and said.
    let own = 32 + 128 + 2 * 2; // the server's own, the default buffer of 128, 2 workers
    assert_eq!(server.max_connections(), 256 - own);
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
    let shed = ask(
        &mut client,
        &mut client_out,
        &format!("shed {addr}"),
        "SHED ",
    )[0];
    // Those the server could not take are answered 503 and closed, not left hanging.
    assert_eq!(shed, 10);

    // Descriptors free again: the server answers at once.
    drop(hog);
    for _ in 0..5 {
        assert_eq!(get(addr), Some(200));
    }

    // Issue 15: under `ulimit -n 256`, 400 connections opened (at once: the server takes what
    // its descriptors allow and sheds the rest) and closed, then a request answered within
    // 1 s. Before, the server never answered again.
    let flood = ask(
        &mut client,
        &mut client_out,
        &format!("flood {addr} 400"),
        "FLOOD ",
    );
    let after = Duration::from_micros(flood[3]);
    eprintln!(
        "400 connections opened in {} ms and closed; the next request answered {} in {after:?}",
        flood[1], flood[2]
    );
    assert_eq!(flood[0], 400, "every connect went through");
    assert_eq!(flood[2], 200);
    assert!(after < Duration::from_secs(1), "{after:?}");
    drop(client.stdin.take());
    assert!(client.wait().unwrap().success());
    handle.stop();
    let stats = thread.join().unwrap();
    // The 10 of the first part, and at least the 400 the limit left no room for.
    let room = 256 - 10;
    assert!(
        stats.rejected >= 10 + 400 - room as u64,
        "{}",
        stats.rejected
    );
    eprintln!("rejected with 503: {}", stats.rejected);
}
