//! A run until precise in the os world: the coordinator reads the job records the workers have
//! completed since its last look, in completion order, and feeds their responses to the
//! rule every world uses (`schedlab_model::output::PrecisionWatch`).

use std::sync::atomic::Ordering;

use schedlab_model::output::PrecisionWatch;

use crate::plan::Plan;
use crate::shm::Shm;

/// How often the coordinator reads new records (ns): often enough that a run stops within a
/// fraction of a second of being precise, rarely enough to cost nothing.
pub const POLL_NS: u64 = 50_000_000;

pub struct Watch {
    rule: PrecisionWatch,
    /// Records of each task already read.
    read: Vec<u64>,
    /// Completed jobs still to leave out (the warm-up, by count).
    skip: u64,
    warmup_time_ns: u64,
    fresh: Vec<(u64, f64)>,
    pub precise: bool,
}

impl Watch {
    /// None unless the plan runs until precise.
    pub fn new(plan: &Plan) -> Option<Watch> {
        let target = plan.precision?;
        Some(Watch {
            rule: PrecisionWatch::new(target, plan.first_look),
            read: vec![0; plan.tasks.len()],
            skip: plan.warmup,
            warmup_time_ns: (plan.warmup_time.max(0.0) * 1e6) as u64,
            fresh: Vec::new(),
            precise: false,
        })
    }

    /// Reads what completed since the last poll; true once the run is precise.
    pub fn poll(&mut self, shm: &Shm, t0: u64) -> bool {
        if self.precise {
            return true;
        }
        self.fresh.clear();
        for (i, read) in self.read.iter_mut().enumerate() {
            let recorded = shm.slot(i).recorded.load(Ordering::Acquire);
            for k in *read..recorded {
                let r = shm.read(i, k);
                if r.arrival.saturating_sub(t0) >= self.warmup_time_ns {
                    let response = r.completion.saturating_sub(r.arrival) as f64 / 1e6;
                    self.fresh.push((r.completion, response));
                }
            }
            *read = recorded;
        }
        // Tasks complete in parallel: one series in the order of their completions.
        self.fresh.sort_unstable_by_key(|&(done, _)| done);
        for &(_, response) in &self.fresh {
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            if self.rule.add(response) {
                self.precise = true;
                break;
            }
        }
        self.precise
    }

    pub fn measured(&self) -> u64 {
        self.rule.n()
    }
}
