//! Independent runs (replications) on every core: each run is a pure function of its config,
//! so running them on threads gives the same bits as running them one after the other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::engine::{run, Output};
use crate::spec::Config;
use crate::SpecError;

/// Runs every config on up to `workers` threads (at least one); results in the configs' order.
pub fn run_many(cfgs: &[Config], workers: usize) -> Vec<Result<Output, SpecError>> {
    let workers = workers.clamp(1, cfgs.len().max(1));
    if workers == 1 {
        return cfgs.iter().map(run).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<Output, SpecError>>>> =
        cfgs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(cfg) = cfgs.get(i) else { break };
                let out = run(cfg);
                *slots[i].lock().expect("no thread panics holding a slot") = Some(out);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .expect("no thread panics holding a slot")
                .expect("every run was made")
        })
        .collect()
}

/// The threads a call should use by default: every core the process may run on.
pub fn available_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SimSpec;

    fn config(seed: u64) -> Config {
        let spec: SimSpec = serde_json::from_value(serde_json::json!({
            "policy": "rr", "params": {"quantum": 0.5}, "load": 0.8, "size": "exp:1",
            "jobs": 20_000, "seed": seed, "keep_jobs": true, "warmup": 0
        }))
        .expect("spec");
        spec.validate().expect("valid")
    }

    #[test]
    fn threads_give_the_bits_of_one_after_the_other() {
        let cfgs: Vec<Config> = (1..=5).map(config).collect();
        let one = run_many(&cfgs, 1);
        let many = run_many(&cfgs, 3);
        assert_eq!(one.len(), 5);
        for (a, b) in one.iter().zip(&many) {
            let (a, b) = (a.as_ref().expect("ran"), b.as_ref().expect("ran"));
            let (ja, jb) = (
                a.jobs.as_ref().expect("kept"),
                b.jobs.as_ref().expect("kept"),
            );
            assert_eq!(ja.response.len(), 20_000);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&ja.response), bits(&jb.response));
            assert_eq!(
                a.summary.response_mean.to_bits(),
                b.summary.response_mean.to_bits()
            );
        }
        // Different seeds are different runs, not one run copied.
        let first = one[0].as_ref().expect("ran").summary.response_mean;
        let second = one[1].as_ref().expect("ran").summary.response_mean;
        assert_ne!(first.to_bits(), second.to_bits());
    }
}
