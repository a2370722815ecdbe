//! Hand-computed schedules and queueing identities, checked through the public API.

use schedlab_policy::{ParamValue, Params};
use schedlab_sim::spec::SimSpec;
use schedlab_sim::{simulate, Output};

fn trace(rows: &str) -> String {
    trace_with("arrival,size", rows)
}

fn trace_with(header: &str, rows: &str) -> String {
    let dir = std::env::temp_dir().join(format!("schedlab-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!(
        "{:x}.csv",
        rows.len() * 31 + header.len() * 7 + rows.bytes().map(|b| b as usize).sum::<usize>()
    ));
    std::fs::write(&path, format!("{header}\n{rows}")).unwrap();
    path.to_string_lossy().into_owned()
}

/// Per job, sorted by job: (job, response rounded to 1e-9 ms, CPU of its last run).
fn job_rows(out: &Output) -> Vec<(i64, f64, i64)> {
    let jobs = out.jobs.as_ref().unwrap();
    let mut r: Vec<(i64, f64, i64)> = (0..jobs.len())
        .map(|i| {
            let response = (jobs.response[i] * 1e9).round() / 1e9;
            (jobs.job[i] as i64, response, jobs.cpu[i] as i64)
        })
        .collect();
    r.sort_by_key(|x| x.0);
    r
}

fn run(policy: &str, params: &[(&str, f64)], rows: &str) -> Output {
    let spec = SimSpec {
        policy: Some(policy.into()),
        params: Some(Params(
            params
                .iter()
                .map(|(k, v)| (k.to_string(), ParamValue::Num(*v)))
                .collect(),
        )),
        trace: Some(trace(rows)),
        keep_jobs: Some(true),
        keep_schedule: Some(true),
        ..Default::default()
    };
    simulate(&spec).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn textbook_three_jobs_mean_wait() {
    // Jobs of 24, 3, 3 at time 0. FCFS: waits 0, 24, 27 -> 17. SJF: 6, 0, 3 -> 3.
    // RR q=4: P1 0-4, P2 4-7, P3 7-10, P1 10-30: waits 6, 4, 7 -> 17/3.
    let rows = "0,24\n0,3\n0,3\n";
    let fcfs = run("fcfs", &[], rows);
    assert!((fcfs.summary.wait_mean - 17.0).abs() < 1e-12);
    let sjf = run("sjf", &[], rows);
    assert!((sjf.summary.wait_mean - 3.0).abs() < 1e-12);
    let rr = run("rr", &[("quantum", 4.0)], rows);
    assert!((rr.summary.wait_mean - 17.0 / 3.0).abs() < 1e-12);
    let segs: Vec<(u64, f64, f64)> = rr
        .schedule
        .unwrap()
        .iter()
        .map(|s| (s.job, s.start, s.end))
        .collect();
    assert_eq!(&segs[..3], &[(0, 0.0, 4.0), (1, 4.0, 7.0), (2, 7.0, 10.0)]);
    // P1 runs its remaining 20 in five quanta with no one else queued.
    assert!(segs[3..].iter().all(|s| s.0 == 0));
    assert_eq!(segs.last().unwrap().2, 30.0);
    // No switch counted while P1 continues alone.
    assert_eq!(rr.summary.context_switches, 1.0);
}

#[test]
fn conservation_and_littles_law_mm1() {
    let spec = SimSpec {
        policy: Some("fcfs".into()),
        load: Some(0.8),
        size: Some("exp:1".into()),
        jobs: Some(200_000),
        warmup: Some(schedlab_sim::spec::WarmupSpec::Jobs(1000)),
        seed: Some(3),
        ..Default::default()
    };
    let s = simulate(&spec).unwrap().summary;
    assert!(
        (s.busy_time / s.work_served - 1.0).abs() < 1e-9,
        "{} vs {}",
        s.busy_time,
        s.work_served
    );
    let little = s.arrival_rate * s.response_mean;
    assert!(
        (s.mean_in_system / little - 1.0).abs() < 0.01,
        "L={} lambda W={little}",
        s.mean_in_system
    );
    assert!((s.utilization - 0.8).abs() < 0.01, "rho={}", s.utilization);
    assert!(
        (s.response_mean - 5.0).abs() < 0.25,
        "E[T]={}",
        s.response_mean
    );
}

#[test]
fn lottery_schedule_segment_by_segment() {
    // Job 0 (3 tickets, 4 units) and job 1 (1 ticket, 3 units) at time 0, quantum 1, one CPU.
    // Every turn is a whole quantum, so no compensation tickets arise. Each turn a ticket is
    // drawn among the queued jobs: u in [0, total); job 0 holds [0, 3) while queued, job 1 the
    // next ticket(s). The draws are replayed from the policy's own seeded generator.
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    let spec = SimSpec {
        policy: Some("lottery".into()),
        params: Some(Params::new().with("quantum", ParamValue::Num(1.0))),
        trace: Some(trace_with("arrival,size,tickets", "0,4,3\n0,3,1\n")),
        keep_schedule: Some(true),
        seed: Some(9),
        ..Default::default()
    };
    let out = simulate(&spec).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(schedlab_sim::engine::policy_seed(9, 0));
    let mut left = [4.0, 3.0];
    let tickets = [3.0, 1.0];
    let mut t = 0.0;
    let mut expected = Vec::new();
    while left.iter().any(|&l| l > 0.0) {
        let total: f64 = (0..2).filter(|&j| left[j] > 0.0).map(|j| tickets[j]).sum();
        let u = rng.random::<f64>() * total;
        let winner = if left[0] > 0.0 && u < tickets[0] {
            0
        } else {
            1
        };
        let winner = if left[winner] > 0.0 { winner } else { 0 };
        expected.push((winner as u64, t, t + 1.0));
        left[winner] -= 1.0;
        t += 1.0;
    }
    let got: Vec<(u64, f64, f64)> = out
        .schedule
        .unwrap()
        .iter()
        .map(|s| (s.job, s.start, s.end))
        .collect();
    assert_eq!(got, expected);
    // Both jobs were drawn while both were queued: the replay covered real draws.
    let first_of_1 = expected.iter().position(|s| s.0 == 1).unwrap();
    assert!(first_of_1 < 6, "{expected:?}");
}

#[test]
fn a_run_cut_short_hands_back_a_table_without_its_unused_room() {
    // A million jobs asked, 100 time units allowed: about 90 measured (M/M/1 at load 0.9).
    // The table reserved room for the million; what it hands over holds what it measured.
    let spec = SimSpec {
        policy: Some("fcfs".into()),
        load: Some(0.9),
        size: Some("exp:1".into()),
        jobs: Some(1_000_000),
        time: Some(100.0),
        warmup: Some(schedlab_sim::spec::WarmupSpec::Jobs(0)),
        keep_jobs: Some(true),
        ..Default::default()
    };
    let jobs = simulate(&spec).unwrap().jobs.unwrap();
    assert!((30..300).contains(&jobs.len()), "{}", jobs.len());
    assert!(jobs.response.capacity() <= 2 * jobs.len());
    assert!(jobs.migrations.capacity() <= 2 * jobs.len());
}

#[test]
fn a_job_that_finds_the_machine_empty_pays_its_wake_up() {
    // One CPU, FCFS, jobs of 2, 2, 1 sent at 0, 1, 5; each reaches the machine 0.2 later and
    // starts after 0.1 (start_cost). Job 0 finds it empty and wakes it (0.5 more): runs
    // 0.8-2.8, response 2.8. Job 1 finds job 0 there: runs 2.9-4.9, response 3.9. Job 2 finds
    // it empty again: runs 5.8-6.8, response 1.8. Without idle_wake: 2.3, 3.4, 1.3.
    let spec = |idle_wake: Option<f64>, policy: &str| SimSpec {
        policy: Some(policy.into()),
        trace: Some(trace("0,2\n1,2\n5,1\n")),
        start_cost: Some(0.1),
        dispatch_delay: Some(0.2),
        idle_wake,
        keep_jobs: Some(true),
        keep_schedule: Some(true),
        ..Default::default()
    };
    let responses = |out: &Output| job_rows(out).iter().map(|x| x.1).collect::<Vec<f64>>();
    let woken = simulate(&spec(Some(0.5), "fcfs")).unwrap();
    assert_eq!(responses(&woken), vec![2.8, 3.9, 1.8]);
    let starts: Vec<f64> = woken
        .schedule
        .unwrap()
        .iter()
        .map(|s| (s.start * 1e9).round() / 1e9)
        .collect();
    assert_eq!(starts, vec![0.8, 2.9, 5.8]);
    let plain = simulate(&spec(None, "fcfs")).unwrap();
    assert_eq!(responses(&plain), vec![2.3, 3.4, 1.3]);
    // Fluid policies have no first run to pay it on.
    let e = simulate(&spec(Some(0.5), "ps")).err().expect("refused");
    assert!(e.to_string().starts_with("idle_wake = 0.5"), "{e}");
}

#[test]
fn a_run_that_drains_stops_sending_at_its_time_and_finishes_what_it_holds() {
    let responses = |out: &Output| {
        let jobs = out.jobs.as_ref().unwrap();
        let mut r: Vec<(f64, f64)> = jobs
            .arrival
            .iter()
            .copied()
            .zip(jobs.response.iter().copied())
            .collect();
        r.sort_by(|a, b| a.0.total_cmp(&b.0));
        r.into_iter()
            .map(|x| ((x.0 * 1e9).round() / 1e9, (x.1 * 1e9).round() / 1e9))
            .collect::<Vec<(f64, f64)>>()
    };
    // Closed: one client thinks 1, sends a job of 2 (reaching the machine 0.25 later): sent
    // at 1 (runs 1.25-3.25), at 4.25 (runs 4.5-6.5); its next send, at 7.5, is past time = 5.
    // Drained: both jobs finish, responses 2.25 and 2.25, the run ends at 6.5. Cut at 5: one.
    let closed = |drain: Option<bool>| SimSpec {
        clients: Some(1),
        think: Some("det:1".into()),
        size: Some("det:2".into()),
        dispatch_delay: Some(0.25),
        time: Some(5.0),
        drain,
        keep_jobs: Some(true),
        ..Default::default()
    };
    let drained = simulate(&closed(Some(true))).unwrap();
    assert_eq!(responses(&drained), vec![(1.0, 2.25), (4.25, 2.25)]);
    assert_eq!(drained.summary.unfinished, 0);
    assert!((drained.summary.sim_time - 6.5).abs() < 1e-9);
    // Sampled, the load series goes on until the last job is done, then stops.
    let sampled = simulate(&SimSpec {
        load_sample: Some(0.5),
        ..closed(Some(true))
    })
    .unwrap();
    let series = sampled.load_series.as_ref().expect("sampled");
    assert_eq!(series.last().map(|s| s.time), Some(6.5));
    let cut = simulate(&closed(None)).unwrap();
    assert_eq!(responses(&cut), vec![(1.0, 2.25)]);
    assert_eq!(cut.summary.unfinished, 1);
    // Open: sends every 1.5 (at 1.5, 3, 4.5; the one at 6 is past time = 5), jobs of 1 on one
    // CPU: all three finish, the last at 5.5, though it arrives after nothing.
    let open = SimSpec {
        arrival: Some("det:1.5".into()),
        size: Some("det:1".into()),
        time: Some(5.0),
        drain: Some(true),
        warmup: Some(schedlab_sim::spec::WarmupSpec::Jobs(0)),
        keep_jobs: Some(true),
        ..Default::default()
    };
    let out = simulate(&open).unwrap();
    assert_eq!(responses(&out), vec![(1.5, 1.0), (3.0, 1.0), (4.5, 1.0)]);
    // An open trace stops at its first row sent at or after time.
    let rows = SimSpec {
        trace: Some(trace("0,1\n2,3\n5,1\n6,1\n")),
        time: Some(5.0),
        drain: Some(true),
        keep_jobs: Some(true),
        ..Default::default()
    };
    let out = simulate(&rows).unwrap();
    assert_eq!(responses(&out), vec![(0.0, 1.0), (2.0, 3.0)]);
    // Without time there is nothing to drain after.
    let e = simulate(&SimSpec {
        drain: Some(true),
        jobs: Some(10),
        ..Default::default()
    })
    .err()
    .expect("refused");
    assert!(e.to_string().starts_with("drain = true"), "{e}");
}

#[test]
fn a_dispatcher_on_cpu_0_holds_up_what_cpu_0_runs() {
    // Two CPUs, one FCFS queue, four jobs of 1 ms at 0; the dispatcher works 0.1 on CPU 0 for
    // each job's first run. Job 0 starts on CPU 0 after the dispatcher's 0.1 for it (0.1-1.1);
    // job 1 on CPU 1 at once (0-1), and the dispatcher's 0.1 for it holds job 0 up (ends 1.2).
    // At 1 job 2 goes to CPU 1 (1-2): job 0 ends at 1.3. Job 3 on CPU 0 after the
    // dispatcher's 0.1 for it: 1.4-2.4. Without the dispatcher: 1, 1, 2, 2.
    let spec = |dispatcher_cost: Option<f64>, policy: &str| SimSpec {
        policy: Some(policy.into()),
        trace: Some(trace("0,1\n0,1\n0,1\n0,1\n")),
        cpus: Some(2),
        dispatcher_cost,
        keep_jobs: Some(true),
        keep_schedule: Some(true),
        ..Default::default()
    };
    let held = simulate(&spec(Some(0.1), "fcfs")).unwrap();
    assert_eq!(
        job_rows(&held),
        vec![(0, 1.3, 0), (1, 1.0, 1), (2, 2.0, 1), (3, 2.4, 0)]
    );
    let plain = simulate(&spec(None, "fcfs")).unwrap();
    let responses: Vec<f64> = job_rows(&plain).iter().map(|x| x.1).collect();
    assert_eq!(responses, vec![1.0, 1.0, 2.0, 2.0]);
    // Fluid policies have no first run to pay it on.
    let e = simulate(&spec(Some(0.1), "ps")).err().expect("refused");
    assert!(e.to_string().starts_with("dispatcher_cost = 0.1"), "{e}");
}

#[test]
fn a_dispatcher_working_on_an_idle_cpu_0_delays_the_next_job_there() {
    // Per-CPU runqueues, tasks placed in turn (0, 1, 0): job 0 (0.2 ms) at 0 on CPU 0 runs
    // 0.1-0.3 after the dispatcher's 0.1; job 1 (1 ms) at 0.5 on CPU 1 runs 0.5-1.5 while
    // the dispatcher works for it on the idle CPU 0 until 0.6; job 2 (1 ms) at 0.55 on CPU 0
    // waits for that (0.05), then for the dispatcher's 0.1 for itself: 0.7-1.7, response 1.15.
    let spec = SimSpec {
        policy: Some("fcfs".into()),
        trace: Some(trace("0,0.2\n0.5,1\n0.55,1\n")),
        cpus: Some(2),
        runqueues: Some("per-cpu".into()),
        placement: Some("rr".into()),
        dispatcher_cost: Some(0.1),
        keep_jobs: Some(true),
        ..Default::default()
    };
    let out = simulate(&spec).unwrap();
    assert_eq!(job_rows(&out), vec![(0, 0.3, 0), (1, 1.0, 1), (2, 1.15, 0)]);
}

#[test]
fn a_jobs_end_keeps_its_cpu_before_the_next_job() {
    // One CPU, FCFS, end_cost 0.5: job 0 (1 ms at 0) ends at 1 and keeps the CPU until 1.5;
    // job 1 (1 ms at 0) runs 1.5-2.5 (response 2.5) and keeps it until 3; job 2 (1 ms at 2.7)
    // waits for that end: 3-4, response 1.3. Without it: 1, 2, 1.
    let spec = |end_cost: Option<f64>, policy: &str| SimSpec {
        policy: Some(policy.into()),
        trace: Some(trace("0,1\n0,1\n2.7,1\n")),
        end_cost,
        keep_jobs: Some(true),
        ..Default::default()
    };
    let ends = simulate(&spec(Some(0.5), "fcfs")).unwrap();
    assert_eq!(job_rows(&ends), vec![(0, 1.0, 0), (1, 2.5, 0), (2, 1.3, 0)]);
    let plain = simulate(&spec(None, "fcfs")).unwrap();
    assert_eq!(
        job_rows(&plain),
        vec![(0, 1.0, 0), (1, 2.0, 0), (2, 1.0, 0)]
    );
    // Fluid policies have no end of a run to pay it after.
    let e = simulate(&spec(Some(0.5), "ps")).err().expect("refused");
    assert!(e.to_string().starts_with("end_cost = 0.5"), "{e}");
}

#[test]
fn a_wake_up_keeps_a_job_out_of_its_runqueue_after_its_io() {
    // One CPU, FCFS, two clients of one job each: 2 ms of CPU in two bursts of 1 with an I/O
    // of 0.5 between, wake_delay 1. A runs 0-1, waits 1-1.5 and is back at 2.5; B runs 1-2
    // and is back at 3.5; the CPU idles 2-2.5; A 2.5-3.5, B 3.5-4.5. Without it: A back at
    // 1.5 runs 2-3, B back at 2.5 runs 3-4.
    let spec = |wake_delay: Option<f64>| SimSpec {
        policy: Some("fcfs".into()),
        clients: Some(2),
        jobs: Some(2),
        think: Some("det:0".into()),
        size: Some("det:2".into()),
        bursts: Some(2),
        io: Some("det:0.5".into()),
        wake_delay,
        keep_jobs: Some(true),
        ..Default::default()
    };
    let woke = simulate(&spec(Some(1.0))).unwrap();
    assert_eq!(job_rows(&woke), vec![(0, 3.5, 0), (1, 4.5, 0)]);
    let plain = simulate(&spec(None)).unwrap();
    assert_eq!(job_rows(&plain), vec![(0, 3.0, 0), (1, 4.0, 0)]);
}
