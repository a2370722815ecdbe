//! Real processes, from a single-threaded test binary (the coordinator refuses to fork from a
//! multi-threaded process, and libtest runs tests on threads). Each check asserts numbers
//! against the kernel's own counters or its weight table.

use schedlab_dispatch::{parse_plan, run, Output};

fn task(class: u32, extra: &str) -> String {
    format!(
        r#"{{"class": {class}, "sched": {{"policy": "other"{extra}}}, "affinity": [0],
            "start_cpus": null, "release_after": null, "jobs": 1, "size": "det:200",
            "think": null, "io": null, "rttime_us": null, "seed": {class}}}"#
    )
}

fn run_plan(text: &str) -> Output {
    run(parse_plan(text).expect("plan")).expect("run")
}

fn cpu_ms(o: &Output, i: usize, contended: bool) -> f64 {
    let t = &o.tasks[i];
    let end = if contended { &t.contended } else { &t.end };
    (end.cpu_ns.unwrap() - t.base.cpu_ns.unwrap()) as f64 / 1e6
}

/// A 200 ms job is 200 ms of the worker's CPU time, as the kernel's schedstat counts it.
fn calibrated_work() {
    let o = run_plan(&format!(
        r#"{{"tasks": [{}], "cpus": [0], "time": null, "hard_timeout": 20000, "sample": null,
            "dispatcher": null}}"#,
        task(0, "")
    ));
    let job = o.jobs.cpu_time[0];
    assert!((job - 200.0).abs() < 1.0, "job CPU {job}");
    let kernel = cpu_ms(&o, 0, false);
    assert!((200.0..210.0).contains(&kernel), "schedstat CPU {kernel}");
    println!("test calibrated_work ... ok (job {job:.3} ms, schedstat {kernel:.3} ms)");
}

/// Nice 0 against nice 5 on one CPU: CPU shares follow the kernel's weights 1024 and 335,
/// over the interval both were runnable.
fn nice_weights() {
    let o = run_plan(&format!(
        r#"{{"tasks": [{}, {}], "cpus": [0], "time": null, "hard_timeout": 20000,
            "sample": null, "dispatcher": null}}"#,
        task(0, r#", "nice": 0"#),
        task(1, r#", "nice": 5"#)
    ));
    let (a, b) = (cpu_ms(&o, 0, true), cpu_ms(&o, 1, true));
    let share = a / (a + b);
    let theory = 1024.0 / (1024.0 + 335.0);
    assert!((share - theory).abs() < 0.02, "share {share} vs {theory}");
    println!("test nice_weights ... ok (share {share:.4}, kernel weights give {theory:.4})");
}

fn main() {
    calibrated_work();
    nice_weights();
    println!("2 passed, 0 failed");
}
