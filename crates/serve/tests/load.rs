//! The load generator against the server (and against tiny hand-made peers for the parts of
//! HTTP the server never sends), on 127.0.0.1.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use schedlab_serve::config::ServeSpec;
use schedlab_serve::load::{self, BurstGroup, BurstSpec, LoadSpec, TargetSpec};
use schedlab_serve::Server;

fn serve(
    root: &std::path::Path,
    cost: Option<&str>,
    workers: u32,
) -> (
    String,
    schedlab_serve::Handle,
    std::thread::JoinHandle<schedlab_serve::Stats>,
) {
    let cfg = ServeSpec {
        root: Some(root.display().to_string()),
        port: Some(0),
        announce: Some(false),
        cpus: Some(workers),
        cost: cost.map(String::from),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let server = Server::bind(cfg).unwrap();
    let url = format!("http://{}", server.local_addr());
    let handle = server.handle();
    (
        url,
        handle,
        std::thread::spawn(move || server.run(false).unwrap()),
    )
}

fn root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.bin"), vec![b'a'; 1000]).unwrap();
    std::fs::write(dir.path().join("b.bin"), vec![b'b'; 3000]).unwrap();
    dir
}

fn targets() -> Option<Vec<TargetSpec>> {
    Some(vec![
        TargetSpec {
            path: "/a.bin".into(),
            weight: Some(1.0),
            class: None,
        },
        TargetSpec {
            path: "/b.bin".into(),
            weight: Some(1.0),
            class: None,
        },
    ])
}

#[test]
fn closed_loop_counts_clients_jobs_and_bytes() {
    let dir = root();
    let (url, h, t) = serve(dir.path(), None, 2);
    let cfg = LoadSpec {
        url: Some(url),
        clients: Some(4),
        think: Some("exp:1".into()),
        targets: targets(),
        jobs: Some(400),
        warmup: Some(20),
        progress: Some(false),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let out = load::run(&cfg).unwrap();
    h.stop();
    let stats = t.join().unwrap();
    let s = &out.summary;
    assert_eq!((s.requests, s.errors, s.warmup), (400, 0, 20));
    assert_eq!(stats.served, 420);
    let r = &out.requests;
    // Every request sent is in the table, the warm-up's flagged: the first 20 sent.
    assert_eq!(r.id.len(), 420);
    assert_eq!(r.warm.iter().filter(|w| **w).count(), 20);
    assert!(r.warm[..20].iter().all(|w| *w) && !r.warm[20..].iter().any(|w| *w));
    assert!(r.client.iter().all(|c| (0..4).contains(c)));
    for c in 0..4 {
        assert!(
            r.client.iter().filter(|x| **x == c).count() > 40,
            "client {c} idle"
        );
    }
    assert!(r.status.iter().all(|x| *x == 200));
    // Bytes match the files picked.
    let expected: u64 = r.target[20..]
        .iter()
        .map(|t| {
            if out.targets[*t as usize] == "/a.bin" {
                1000
            } else {
                3000
            }
        })
        .sum();
    assert_eq!(r.bytes[20..].iter().sum::<u64>(), expected);
    assert_eq!(s.bytes, expected);
    // Response = completion - intended arrival, never negative, and sends follow arrivals.
    for i in 0..r.id.len() {
        assert!(r.sent[i] >= r.arrival[i] && r.completion[i] >= r.sent[i]);
    }
    // The summary's quantiles come from the histogram: p50 of the measured rows (after the
    // warm-up's 20) is within its resolution.
    let mut resp: Vec<f64> = (20..r.id.len())
        .map(|i| r.completion[i] - r.arrival[i])
        .collect();
    resp.sort_by(f64::total_cmp);
    let p50 = resp[resp.len() / 2];
    assert!(
        (s.response_p50 - p50).abs() <= 0.01 * p50 + 0.002,
        "{} vs {p50}",
        s.response_p50
    );
    assert!(s.response_max >= resp[resp.len() - 1] * 0.99);
}

#[test]
fn open_loop_keeps_its_schedule_and_counts_misses() {
    let dir = root();
    let (url, h, t) = serve(dir.path(), None, 2);
    let hlog = dir.path().join("out.hlog");
    let cfg = LoadSpec {
        url: Some(format!("{url}/a.bin")),
        rate: Some(2000.0),
        arrival: Some("constant".into()),
        jobs: Some(1000),
        hdr_log: Some(hlog.display().to_string()),
        progress: Some(false),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let out = load::run(&cfg).unwrap();
    h.stop();
    t.join().unwrap();
    let r = &out.requests;
    assert_eq!(r.id.len(), 1000);
    // Intended times are exactly every 0.5 ms, whatever happened on the wire.
    for (i, a) in r.arrival.iter().enumerate() {
        assert!((a - 0.5 * i as f64).abs() < 1e-6, "{i}: {a}");
    }
    let late = (0..1000)
        .filter(|i| r.sent[*i] - r.arrival[*i] > 1.0)
        .count() as u64;
    assert_eq!(out.summary.missed_sends, late);
    assert!((out.summary.offered_rate - 2000.0).abs() < 1e-9);
    let text = std::fs::read_to_string(&hlog).unwrap();
    assert!(text.starts_with("#schedlab load"));
    assert!(text.lines().filter(|l| !l.starts_with('#')).count() >= 1);
}

#[test]
fn poisson_arrivals_have_the_asked_mean_gap() {
    let dir = root();
    let (url, h, t) = serve(dir.path(), None, 2);
    let cfg = LoadSpec {
        url: Some(format!("{url}/a.bin")),
        arrival: Some("exp:0.5".into()),
        jobs: Some(4000),
        seed: Some(3),
        progress: Some(false),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let out = load::run(&cfg).unwrap();
    h.stop();
    t.join().unwrap();
    let a = &out.requests.arrival;
    let mean_gap = (a[a.len() - 1] - a[0]) / (a.len() - 1) as f64;
    // Exponential gaps: the mean of 4000 has a standard error of 0.5/sqrt(4000) = 0.0079.
    assert!((mean_gap - 0.5).abs() < 0.04, "{mean_gap}");
    let gaps: Vec<f64> = a.windows(2).map(|w| w[1] - w[0]).collect();
    let cv = {
        let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let v = gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / gaps.len() as f64;
        v.sqrt() / m
    };
    assert!((cv - 1.0).abs() < 0.1, "cv {cv}");
}

#[test]
fn a_burst_sends_each_group_at_its_time_on_its_own_connection() {
    let dir = root();
    let (url, h, t) = serve(dir.path(), Some("0ms+0.01ms/B"), 1);
    let cfg = LoadSpec {
        url: Some(url),
        burst: Some(BurstSpec::Groups(vec![
            BurstGroup {
                at: 0.0,
                count: 2,
                path: "/b.bin".into(),
                class: None,
            },
            BurstGroup {
                at: 20.0,
                count: 3,
                path: "/a.bin".into(),
                class: None,
            },
        ])),
        progress: Some(false),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let out = load::run(&cfg).unwrap();
    h.stop();
    t.join().unwrap();
    let r = &out.requests;
    assert_eq!(out.summary.connections, 5);
    let arrivals: Vec<f64> = r.arrival.clone();
    assert_eq!(arrivals, vec![0.0, 0.0, 20.0, 20.0, 20.0]);
    // One worker, FCFS: b (30 ms), b (30 ms), then the a's (10 ms each) behind them. The two
    // b's are sent at the same instant on two connections: either may reach the worker first.
    let done: Vec<f64> = r.completion.clone();
    let (first_b, second_b) = (done[0].min(done[1]), done[0].max(done[1]));
    assert!(first_b >= 29.0 && second_b >= 59.0, "{done:?}");
    for d in &done[2..] {
        assert!(*d >= 69.0, "{done:?}");
    }
}

/// A peer that answers every request with `response`, then (if `close`) closes.
fn fake_peer(response: &'static [u8], close: bool) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let mut s = s.unwrap();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                loop {
                    let n = match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    got.extend_from_slice(&buf[..n]);
                    while let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        got.drain(..i + 4);
                        // Dribble the response out in small pieces to exercise the parser.
                        for piece in response.chunks(7) {
                            if s.write_all(piece).is_err() {
                                return;
                            }
                            std::thread::sleep(Duration::from_micros(50));
                        }
                        if close {
                            return;
                        }
                    }
                }
            });
        }
    });
    format!("http://{addr}/x")
}

#[test]
fn parses_chunked_and_close_delimited_responses() {
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: y\r\n\r\n";
    let close = b"HTTP/1.0 200 OK\r\n\r\n0123456789";
    for (url, bytes) in [
        (fake_peer(chunked, false), 31u64),
        (fake_peer(close, true), 10),
    ] {
        let cfg = LoadSpec {
            url: Some(url),
            clients: Some(2),
            jobs: Some(30),
            progress: Some(false),
            timeout: Some(5000.0),
            ..Default::default()
        }
        .validate()
        .unwrap();
        let out = load::run(&cfg).unwrap();
        assert_eq!(out.summary.errors, 0, "{:?}", out.summary.errors_by_kind);
        assert_eq!(out.summary.requests, 30);
        assert!(out.requests.bytes.iter().all(|b| *b == bytes));
    }
}

#[test]
fn refused_connections_are_errors_not_hangs() {
    // A port nobody listens on: bind, read the port, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = LoadSpec {
        url: Some(format!("http://127.0.0.1:{port}/")),
        rate: Some(1000.0),
        jobs: Some(50),
        progress: Some(false),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let out = load::run(&cfg).unwrap();
    assert_eq!(out.summary.requests, 0);
    assert_eq!(out.summary.errors, 50);
    assert_eq!(out.summary.errors_by_kind.get("connect"), Some(&50));
    assert!(out.requests.error.iter().all(|e| *e == load::ERR_CONNECT));
}
