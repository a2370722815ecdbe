//! Processor sharing, exact: every job present receives an equal share of the CPUs at every
//! instant (GPS: a share proportional to its weight). Computed with a virtual clock, so each
//! event costs O(log n) and no quantum approximates the fluid.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::{
    Carry, Dequeue, Enqueue, Fluid, JobId, JobView, Params, Policy, PolicyInfo, Service, SpecError,
};

pub static PS_INFO: PolicyInfo = PolicyInfo {
    name: "ps",
    aliases: &["processor-sharing"],
    summary: "Processor sharing, exact fluid: n jobs on k CPUs each run at rate min(1, k/n).",
    params: &[],
    build: build_ps,
};

pub static GPS_INFO: PolicyInfo = PolicyInfo {
    name: "gps",
    aliases: &["wfq"],
    summary: "Generalised processor sharing: fluid shares proportional to weight (one CPU).",
    params: &[],
    build: build_gps,
};

fn build_ps(_: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(Box::new(Share::new(false)))
}

fn build_gps(_: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(Box::new(Share::new(true)))
}

/// Virtual finish time `vfin`: the virtual clock `v` grows by the service one unit of weight
/// receives, so a job of weight w finishes when v reaches v_join + remaining / w.
pub struct Share {
    weighted: bool,
    cpus: usize,
    v: f64,
    last: f64,
    total_weight: f64,
    heap: BinaryHeap<(Reverse<OrdF64>, Reverse<u64>, u32)>,
    /// Per slot: virtual finish, weight, size.
    slots: Vec<(f64, f64, f64)>,
    n: usize,
    seq: u64,
}

#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
#[allow(clippy::derive_ord_xor_partial_ord)]
impl Ord for OrdF64 {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

impl Share {
    fn new(weighted: bool) -> Share {
        Share {
            weighted,
            cpus: 1,
            v: 0.0,
            last: 0.0,
            total_weight: 0.0,
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            n: 0,
            seq: 0,
        }
    }

    /// Service per unit of weight per unit of time.
    fn rate(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else if self.cpus == 1 {
            1.0 / self.total_weight
        } else {
            (self.cpus as f64 / self.n as f64).min(1.0)
        }
    }
}

impl Policy for Share {
    fn name(&self) -> &'static str {
        if self.weighted {
            "gps"
        } else {
            "ps"
        }
    }
    fn enqueue(&mut self, job: &JobView, now: f64, _: Enqueue<'_>) {
        self.advance(now);
        self.add(job, now);
    }
    fn dequeue(&mut self, job: &JobView, now: f64, _: Dequeue) -> Carry {
        // Rare (migration only): rebuild the heap without it.
        self.advance(now);
        let before = self.heap.len();
        let keep: Vec<_> = self.heap.drain().filter(|e| e.2 != job.id.0).collect();
        let found = keep.len() < before;
        self.heap.extend(keep);
        if found {
            let (_, w, _) = self.slots[job.id.index()];
            self.total_weight -= w;
            self.n -= 1;
            if self.n == 0 {
                self.total_weight = 0.0;
                self.v = 0.0;
            }
        }
        Carry::NONE
    }
    fn pick_next(&mut self, _: f64) -> Option<JobId> {
        None
    }
    fn len(&self) -> usize {
        self.n
    }
    fn entitlement(&self, job: &JobView) -> f64 {
        if self.weighted {
            job.weight
        } else {
            1.0
        }
    }
    fn service(&self) -> Service {
        Service::Fluid
    }
    fn fluid(&mut self) -> Option<&mut dyn Fluid> {
        Some(self)
    }
}

impl Fluid for Share {
    fn set_cpus(&mut self, cpus: usize) -> Result<(), String> {
        if self.weighted && cpus > 1 {
            return Err("gps shares one CPU exactly; use ps (equal shares) for cpus > 1".into());
        }
        self.cpus = cpus;
        Ok(())
    }
    fn advance(&mut self, now: f64) {
        if now > self.last {
            self.v += (now - self.last) * self.rate();
            self.last = now;
        }
    }
    fn add(&mut self, job: &JobView, _: f64) {
        let w = if self.weighted { job.weight } else { 1.0 };
        let vfin = self.v + job.remaining / w;
        let i = job.id.index();
        if i >= self.slots.len() {
            self.slots.resize(i + 1, (0.0, 0.0, 0.0));
        }
        self.slots[i] = (vfin, w, job.size);
        self.seq += 1;
        self.heap
            .push((Reverse(OrdF64(vfin)), Reverse(self.seq), job.id.0));
        self.total_weight += w;
        self.n += 1;
    }
    fn next_event(&self, _: f64) -> Option<f64> {
        let (Reverse(OrdF64(vfin)), _, _) = self.heap.peek()?;
        Some(self.last + ((vfin - self.v).max(0.0)) / self.rate())
    }
    fn pop_done(&mut self) -> Option<JobId> {
        let &(Reverse(OrdF64(vfin)), _, id) = self.heap.peek()?;
        // Relative tolerance: the event time was computed from this very vfin.
        let gap = vfin - self.v;
        // Done when within rounding of the virtual clock, or when the time left is below what
        // the real clock can resolve (the engine would wake up at the same instant again).
        // The clock restarts at 0 whenever the queue empties, so `v` stays as small as one
        // busy period allows and this tolerance stays at the level of rounding.
        if gap > 1e-12 * self.v.abs().max(1.0)
            && gap / self.rate() > 1e-12 * self.last.abs().max(1.0)
        {
            return None;
        }
        self.heap.pop();
        // Snap the clock so rounding does not accumulate over millions of jobs.
        self.v = self.v.max(vfin);
        let (_, w, _) = self.slots[id as usize];
        self.total_weight -= w;
        self.n -= 1;
        if self.n == 0 {
            self.total_weight = 0.0;
            self.v = 0.0;
        }
        Some(JobId(id))
    }
    fn attained(&self, id: JobId) -> f64 {
        let (vfin, w, size) = self.slots[id.index()];
        (size - (vfin - self.v) * w).clamp(0.0, size)
    }
    fn busy_cpus(&self) -> f64 {
        self.n.min(self.cpus) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, size: f64) -> JobView {
        JobView::new(JobId(id), 0.0, size)
    }

    #[test]
    fn two_jobs_share_then_the_longer_finishes_alone() {
        // Sizes 1 and 3 at time 0: both at rate 1/2 until t=2 (job 0 done), job 1 done at 4.
        let mut ps = Share::new(false);
        ps.add(&job(0, 1.0), 0.0);
        ps.add(&job(1, 3.0), 0.0);
        let t = ps.next_event(0.0).unwrap();
        assert!((t - 2.0).abs() < 1e-12);
        ps.advance(t);
        assert_eq!(ps.pop_done(), Some(JobId(0)));
        assert!((ps.attained(JobId(1)) - 1.0).abs() < 1e-12);
        let t = ps.next_event(t).unwrap();
        assert!((t - 4.0).abs() < 1e-12);
    }

    #[test]
    fn gps_weights_split_the_cpu() {
        // Weights 3 and 1, sizes 3 and 3: job 0 runs at 3/4 and ends at 4.
        let mut gps = Share::new(true);
        let mut a = job(0, 3.0);
        a.weight = 3.0;
        gps.add(&a, 0.0);
        gps.add(&job(1, 3.0), 0.0);
        let t = gps.next_event(0.0).unwrap();
        assert!((t - 4.0).abs() < 1e-12);
        gps.advance(t);
        assert_eq!(gps.pop_done(), Some(JobId(0)));
        assert!((gps.attained(JobId(1)) - 1.0).abs() < 1e-12);
    }
}
