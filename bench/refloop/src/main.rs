//! The reference loop of issue 12: one CPU, an open stream, a binary-heap event list, and
//! each policy written out by hand with no abstraction, no per-CPU state and no statistics
//! beyond the mean response. It draws arrivals and sizes from the same generator streams and
//! the same sampling code as the simulator, so it simulates the same jobs; bench/mm1.py runs it
//! beside `schedlab.simulate` and reports schedlab's throughput as a fraction of this one.
//!
//! refloop --policy fcfs|srpt|ps|rr [--quantum Q] --jobs N --seed S [--arrival D] [--size D]
//!         [--summary]
//! prints one JSON line: jobs, seconds (the loop alone, set-up excluded), response_mean.
//! `--summary` also streams every completed job into schedlab's own summary
//! (`schedlab_model::summary::Summarizer`, what the simulator does per job): the loop's speed
//! then is the ceiling of any engine that keeps today's summary.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::process::ExitCode;
use std::time::Instant;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use schedlab_model::dist::Dist;
use schedlab_model::summary::{JobRow, Summarizer};

/// An event time ordered totally (the heap is a min-heap through `Reverse`).
#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct Time(f64);
impl Eq for Time {}
#[allow(clippy::derive_ord_xor_partial_ord)]
impl Ord for Time {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrival,
    /// The CPU's current run ends (completion, expired quantum, or a PS departure); the
    /// number tells a stale event (the run was changed since) from a live one.
    RunEnd(u64),
}

type Events = BinaryHeap<Reverse<(Time, Event)>>;

/// The simulator's stream derivation (`schedlab_sim::engine::stream`): arrivals use stream 1,
/// sizes stream 2.
fn stream(seed: u64, index: u64) -> Xoshiro256PlusPlus {
    let mut z = seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Xoshiro256PlusPlus::seed_from_u64(z ^ (z >> 31))
}

struct Source {
    arrival: Dist,
    size: Dist,
    rng_arrival: Xoshiro256PlusPlus,
    rng_size: Xoshiro256PlusPlus,
    issued: u64,
    jobs: u64,
}

impl Source {
    /// Schedules the next arrival after `now`, if any jobs are left to issue.
    fn next(&mut self, now: f64, events: &mut Events) {
        if self.issued < self.jobs {
            let t = now + self.arrival.sample(&mut self.rng_arrival);
            events.push(Reverse((Time(t), Event::Arrival)));
        }
    }
    fn size(&mut self) -> f64 {
        self.issued += 1;
        self.size.sample(&mut self.rng_size)
    }
}

/// Mean response over the completed jobs, and with `--summary` schedlab's summary of them.
#[derive(Default)]
struct Responses {
    n: u64,
    sum: f64,
    summary: Option<Summarizer>,
}

impl Responses {
    fn new(summary: bool) -> Responses {
        Responses {
            summary: summary.then(|| Summarizer::new(vec!["all".into()], 0)),
            ..Responses::default()
        }
    }

    fn add(&mut self, r: f64) {
        self.n += 1;
        self.sum += r;
    }

    /// A job of `size` that arrived at `arrival` completes at `now` (`--summary`).
    fn add_summarized(&mut self, arrival: f64, size: f64, now: f64) {
        let r = now - arrival;
        self.add(r);
        if let Some(s) = &mut self.summary {
            s.add(&JobRow {
                client: -1,
                class: 0,
                arrival,
                completion: now,
                size,
                wait: r - size,
                response: r,
                slowdown: r / size,
                context_switches: 0.0,
                migrations: 0.0,
            });
        }
    }
}

fn fcfs(src: &mut Source) -> Responses {
    let mut events = Events::new();
    let mut queue: VecDeque<(f64, f64)> = VecDeque::new();
    let mut running: Option<f64> = None;
    let mut out = Responses::new(false);
    src.next(0.0, &mut events);
    while let Some(Reverse((Time(now), ev))) = events.pop() {
        match ev {
            Event::Arrival => {
                let size = src.size();
                src.next(now, &mut events);
                if running.is_none() {
                    running = Some(now);
                    events.push(Reverse((Time(now + size), Event::RunEnd(0))));
                } else {
                    queue.push_back((now, size));
                }
            }
            Event::RunEnd(_) => {
                out.add(now - running.take().expect("a job runs"));
                if let Some((arrival, size)) = queue.pop_front() {
                    running = Some(arrival);
                    events.push(Reverse((Time(now + size), Event::RunEnd(0))));
                }
            }
        }
    }
    out
}

/// FCFS as above, each completed job also streamed into schedlab's summary (`--summary`).
fn fcfs_summarized(src: &mut Source) -> Responses {
    let mut events = Events::new();
    let mut queue: VecDeque<(f64, f64)> = VecDeque::new();
    let mut running: Option<(f64, f64)> = None;
    let mut out = Responses::new(true);
    src.next(0.0, &mut events);
    while let Some(Reverse((Time(now), ev))) = events.pop() {
        match ev {
            Event::Arrival => {
                let size = src.size();
                src.next(now, &mut events);
                if running.is_none() {
                    running = Some((now, size));
                    events.push(Reverse((Time(now + size), Event::RunEnd(0))));
                } else {
                    queue.push_back((now, size));
                }
            }
            Event::RunEnd(_) => {
                let (arrival, size) = running.take().expect("a job runs");
                out.add_summarized(arrival, size, now);
                if let Some((arrival, size)) = queue.pop_front() {
                    running = Some((arrival, size));
                    events.push(Reverse((Time(now + size), Event::RunEnd(0))));
                }
            }
        }
    }
    out
}

/// Preemptive shortest remaining processing time.
fn srpt(src: &mut Source) -> Responses {
    let mut events = Events::new();
    // (remaining, arrival) of the waiting jobs, smallest remaining first.
    let mut queue: BinaryHeap<Reverse<(Time, Time)>> = BinaryHeap::new();
    // The running job: arrival, remaining at `since`, since.
    let mut running: Option<(f64, f64, f64)> = None;
    let mut version = 0u64;
    let mut out = Responses::new(false);
    src.next(0.0, &mut events);
    while let Some(Reverse((Time(now), ev))) = events.pop() {
        match ev {
            Event::Arrival => {
                let size = src.size();
                src.next(now, &mut events);
                match running {
                    Some((arrival, left, since)) if size < left - (now - since) => {
                        queue.push(Reverse((Time(left - (now - since)), Time(arrival))));
                        version += 1;
                        running = Some((now, size, now));
                        events.push(Reverse((Time(now + size), Event::RunEnd(version))));
                    }
                    Some(_) => queue.push(Reverse((Time(size), Time(now)))),
                    None => {
                        version += 1;
                        running = Some((now, size, now));
                        events.push(Reverse((Time(now + size), Event::RunEnd(version))));
                    }
                }
            }
            Event::RunEnd(v) if v == version => {
                let (arrival, _, _) = running.take().expect("a job runs");
                out.add(now - arrival);
                if let Some(Reverse((Time(left), Time(arrival)))) = queue.pop() {
                    version += 1;
                    running = Some((arrival, left, now));
                    events.push(Reverse((Time(now + left), Event::RunEnd(version))));
                }
            }
            Event::RunEnd(_) => {}
        }
    }
    out
}

/// Egalitarian processor sharing by virtual time: every present job receives service at
/// rate 1/n, so a job leaves when the virtual time reaches its arrival's virtual time plus its
/// size.
fn ps(src: &mut Source) -> Responses {
    let mut events = Events::new();
    // (virtual finish time, arrival) of the present jobs.
    let mut present: BinaryHeap<Reverse<(Time, Time)>> = BinaryHeap::new();
    let mut virtual_now = 0.0;
    let mut last = 0.0;
    let mut version = 0u64;
    let mut out = Responses::new(false);
    src.next(0.0, &mut events);
    while let Some(Reverse((Time(now), ev))) = events.pop() {
        let n = present.len();
        if n > 0 {
            virtual_now += (now - last) / n as f64;
        }
        last = now;
        match ev {
            Event::Arrival => {
                let size = src.size();
                src.next(now, &mut events);
                present.push(Reverse((Time(virtual_now + size), Time(now))));
            }
            Event::RunEnd(v) if v == version => {
                let Reverse((_, Time(arrival))) = present.pop().expect("a job is present");
                out.add(now - arrival);
            }
            Event::RunEnd(_) => continue,
        }
        version += 1;
        if let Some(&Reverse((Time(finish), _))) = present.peek() {
            let at = now + (finish - virtual_now).max(0.0) * present.len() as f64;
            events.push(Reverse((Time(at), Event::RunEnd(version))));
        }
    }
    out
}

/// Round robin with a quantum: the running job goes back to the tail when its quantum
/// expires, behind the jobs that arrived meanwhile.
fn rr(src: &mut Source, quantum: f64) -> Responses {
    let mut events = Events::new();
    // (arrival, remaining) of the waiting jobs.
    let mut queue: VecDeque<(f64, f64)> = VecDeque::new();
    // The running job: arrival, remaining after this run, and whether this run finishes it.
    let mut running: Option<(f64, f64)> = None;
    let mut out = Responses::new(false);
    let start = |job: (f64, f64), now: f64, events: &mut Events| {
        let run = job.1.min(quantum);
        events.push(Reverse((Time(now + run), Event::RunEnd(0))));
        (job.0, job.1 - run)
    };
    src.next(0.0, &mut events);
    while let Some(Reverse((Time(now), ev))) = events.pop() {
        match ev {
            Event::Arrival => {
                let size = src.size();
                src.next(now, &mut events);
                if running.is_none() {
                    running = Some(start((now, size), now, &mut events));
                } else {
                    queue.push_back((now, size));
                }
            }
            Event::RunEnd(_) => {
                let (arrival, left) = running.take().expect("a job runs");
                if left > 1e-12 {
                    queue.push_back((arrival, left));
                } else {
                    out.add(now - arrival);
                }
                if let Some(job) = queue.pop_front() {
                    running = Some(start(job, now, &mut events));
                }
            }
        }
    }
    out
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |key: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == key)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let policy = get("--policy", "fcfs");
    let (jobs, seed, quantum) = match (
        get("--jobs", "1000000").parse::<u64>(),
        get("--seed", "1").parse::<u64>(),
        get("--quantum", "0.1").parse::<f64>(),
    ) {
        (Ok(j), Ok(s), Ok(q)) if q > 0.0 => (j, s, q),
        _ => {
            eprintln!("refloop: --jobs and --seed take whole numbers, --quantum a positive number");
            return ExitCode::from(2);
        }
    };
    let dist = |key: &str, default: &str| Dist::parse(key, &get(&format!("--{key}"), default));
    let (arrival, size) = match (
        dist("arrival", "exp:1.1111111111111112"),
        dist("size", "exp:1"),
    ) {
        (Ok(a), Ok(s)) => (a, s),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("refloop: {e}");
            return ExitCode::from(2);
        }
    };
    let mut src = Source {
        arrival,
        size,
        rng_arrival: stream(seed, 1),
        rng_size: stream(seed, 2),
        issued: 0,
        jobs,
    };
    let summarized = args.iter().any(|a| a == "--summary");
    if summarized && policy != "fcfs" {
        eprintln!("refloop: --summary = (given): expected --policy fcfs (its only use)");
        return ExitCode::from(2);
    }
    let clock = Instant::now();
    let out = match policy.as_str() {
        "fcfs" if summarized => fcfs_summarized(&mut src),
        "fcfs" => fcfs(&mut src),
        "srpt" => srpt(&mut src),
        "ps" => ps(&mut src),
        "rr" => rr(&mut src, quantum),
        other => {
            eprintln!("refloop: --policy = {other}: expected one of fcfs, srpt, ps, rr");
            return ExitCode::from(2);
        }
    };
    let seconds = clock.elapsed().as_secs_f64();
    println!(
        "{{\"policy\": \"{policy}\", \"jobs\": {}, \"seconds\": {seconds}, \"response_mean\": {}}}",
        out.n,
        out.sum / out.n as f64
    );
    ExitCode::SUCCESS
}
