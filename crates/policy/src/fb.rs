//! Foreground-background / least attained service: the jobs that have received the least
//! service share the CPU. Exact fluid on one CPU (a stack of groups at equal attained
//! service); with a quantum, time-sliced LAS on any number of CPUs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::{
    Carry, Dequeue, Enqueue, Fluid, JobId, JobView, KeyRule, KeyedPolicy, ParamDefault, ParamInfo,
    ParamKind, Params, Policy, PolicyInfo, Service, SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "fb",
    aliases: &["las"],
    summary: "Foreground-background (least attained service); exact fluid, or sliced by quantum.",
    params: &[ParamInfo {
        name: "quantum",
        kind: ParamKind::Positive,
        unit: Unit::Work,
        default: ParamDefault::Unset("none: exact fluid, one CPU"),
        help: "time-sliced LAS: run the least-served job for up to one quantum",
    }],
    build,
};

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(match p.num("quantum") {
        Some(q) => KeyedPolicy::boxed(SlicedLas { quantum: q }),
        None => Box::<LasFluid>::default(),
    })
}

pub struct SlicedLas {
    quantum: f64,
}

impl KeyRule for SlicedLas {
    const NAME: &'static str = "fb";
    fn key(&self, job: &JobView, _: f64) -> f64 {
        job.attained
    }
    fn preempts(&self, incoming: &JobView, running: &JobView, _: f64) -> bool {
        incoming.attained < running.attained
    }
    fn slice(&self) -> Option<f64> {
        Some(self.quantum)
    }
}

/// Jobs that have all received `level` service; within a group the smallest finishes first.
struct Group {
    level: f64,
    members: BinaryHeap<(Reverse<Size>, Reverse<u64>, u32)>,
}

#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct Size(f64);
impl Eq for Size {}
#[allow(clippy::derive_ord_xor_partial_ord)]
impl Ord for Size {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Groups sorted by level, highest first; the last one (least attained) is served.
#[derive(Default)]
pub struct LasFluid {
    groups: Vec<Group>,
    last: f64,
    n: usize,
    seq: u64,
}

const EPS: f64 = 1e-9;

impl LasFluid {
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= EPS * a.abs().max(b.abs()).max(1.0)
    }
    /// A time step too small to move a clock that reads `self.last`.
    fn unresolvable(&self, dt: f64) -> bool {
        dt <= 1e-12 * self.last.abs().max(1.0)
    }
    fn merge_top(&mut self) {
        let mut top = self.groups.pop().expect("two groups");
        let below = self.groups.last_mut().expect("two groups");
        if top.members.len() > below.members.len() {
            std::mem::swap(&mut top.members, &mut below.members);
        }
        below.members.append(&mut top.members);
    }
}

impl Policy for LasFluid {
    fn name(&self) -> &'static str {
        "fb"
    }
    fn enqueue(&mut self, job: &JobView, now: f64, _: Enqueue<'_>) {
        self.advance(now);
        self.add(job, now);
    }
    fn dequeue(&mut self, job: &JobView, _: f64, _: Dequeue) -> Carry {
        for g in &mut self.groups {
            let before = g.members.len();
            g.members.retain(|m| m.2 != job.id.0);
            if g.members.len() < before {
                self.n -= 1;
            }
        }
        self.groups.retain(|g| !g.members.is_empty());
        Carry::NONE
    }
    fn pick_next(&mut self, _: f64) -> Option<JobId> {
        None
    }
    fn len(&self) -> usize {
        self.n
    }
    fn service(&self) -> Service {
        Service::Fluid
    }
    fn fluid(&mut self) -> Option<&mut dyn Fluid> {
        Some(self)
    }
}

impl Fluid for LasFluid {
    fn set_cpus(&mut self, cpus: usize) -> Result<(), String> {
        if cpus != 1 {
            return Err(
                "fb without a quantum is exact on one CPU; set quantum for cpus > 1".into(),
            );
        }
        Ok(())
    }
    fn advance(&mut self, now: f64) {
        let mut dt = (now - self.last).max(0.0);
        self.last = now;
        loop {
            let g = self.groups.len();
            let Some(top) = self.groups.last() else {
                return;
            };
            let n = top.members.len() as f64;
            if g >= 2 {
                let next = self.groups[g - 2].level;
                let to_merge = (next - top.level) * n;
                // Merge also when the gap is below what the clock can resolve, or the
                // engine would be asked to wake up again at the same instant.
                if dt >= to_merge || Self::close(top.level, next) || self.unresolvable(to_merge) {
                    dt = (dt - to_merge).max(0.0);
                    self.merge_top();
                    continue;
                }
            }
            if dt > 0.0 {
                self.groups.last_mut().expect("top").level += dt / n;
            }
            return;
        }
    }
    fn add(&mut self, job: &JobView, _: f64) {
        self.seq += 1;
        let member = (Reverse(Size(job.size)), Reverse(self.seq), job.id.0);
        self.n += 1;
        let level = job.attained;
        // Find the first group (from the top) whose level is not above this job's.
        let mut at = self.groups.len();
        while at > 0
            && self.groups[at - 1].level < level
            && !Self::close(self.groups[at - 1].level, level)
        {
            at -= 1;
        }
        if at > 0 && Self::close(self.groups[at - 1].level, level) {
            self.groups[at - 1].members.push(member);
        } else {
            let mut members = BinaryHeap::new();
            members.push(member);
            self.groups.insert(at, Group { level, members });
        }
    }
    fn next_event(&self, now: f64) -> Option<f64> {
        let top = self.groups.last()?;
        let n = top.members.len() as f64;
        let (Reverse(Size(smallest)), _, _) = top.members.peek()?;
        let mut dt = (smallest - top.level).max(0.0) * n;
        if self.groups.len() > 1 {
            dt = dt.min((self.groups[self.groups.len() - 2].level - top.level) * n);
        }
        Some(now + dt)
    }
    fn pop_done(&mut self) -> Option<JobId> {
        let top = self.groups.last_mut()?;
        let &(Reverse(Size(size)), _, id) = top.members.peek()?;
        let n = top.members.len() as f64;
        let finite_gap = size > top.level && !Self::close(size, top.level);
        if finite_gap && (size - top.level) * n > 1e-12 * self.last.abs().max(1.0) {
            return None;
        }
        let top = self.groups.last_mut().expect("top");
        top.members.pop();
        if top.members.is_empty() {
            self.groups.pop();
        }
        self.n -= 1;
        Some(JobId(id))
    }
    fn attained(&self, id: JobId) -> f64 {
        self.groups
            .iter()
            .find(|g| g.members.iter().any(|m| m.2 == id.0))
            .map_or(0.0, |g| g.level)
    }
    fn busy_cpus(&self) -> f64 {
        if self.n > 0 {
            1.0
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newcomer_runs_alone_until_it_catches_up() {
        // Job 0 (size 4) runs alone for 2; job 1 (size 3) arrives at 2 and runs alone until it
        // has 2 too (t=4); then both share: job 1 done when level 3 (t=6), job 0 at t=7.
        let mut las = LasFluid::default();
        las.add(&JobView::new(JobId(0), 0.0, 4.0), 0.0);
        las.advance(2.0);
        las.add(&JobView::new(JobId(1), 2.0, 3.0), 2.0);
        let mut t = 2.0;
        let mut done = Vec::new();
        while !las.is_empty() {
            t = las.next_event(t).unwrap();
            las.advance(t);
            while let Some(id) = las.pop_done() {
                done.push((id.0, t));
            }
        }
        assert_eq!(done.len(), 2);
        assert_eq!(done[0].0, 1);
        assert!((done[0].1 - 6.0).abs() < 1e-9);
        assert!((done[1].1 - 7.0).abs() < 1e-9);
    }
}
