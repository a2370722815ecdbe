//! Multi-level feedback queue (as in OSTEP): new jobs enter the top level; a job that uses up
//! its allotment at a level moves down; round robin within a level; a job at a higher level
//! preempts, and the preempted job resumes first at its level with the rest of its slice; every
//! `boost_period` ms all jobs return to the top with a new slice, so none starves (the boost
//! is taken at the first scheduling event at or after its time).

use crate::keyed::SliceUse;
use crate::{
    Carry, Dequeue, Enqueue, FifoQueue, JobId, JobView, ParamDefault, ParamInfo, ParamKind, Params,
    Policy, PolicyInfo, SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "mlfq",
    aliases: &[],
    summary: "Multi-level feedback queue with per-level quanta, allotments and priority boost.",
    params: &[
        ParamInfo {
            name: "levels",
            kind: ParamKind::Count,
            unit: Unit::Count,
            default: ParamDefault::Derived("3, or the length of quanta"),
            help: "number of priority levels",
        },
        ParamInfo {
            name: "quantum",
            kind: ParamKind::Positive,
            unit: Unit::Work,
            default: ParamDefault::Num(10.0),
            help: "quantum of the top level; each lower level doubles it",
        },
        ParamInfo {
            name: "quanta",
            kind: ParamKind::List,
            unit: Unit::Work,
            default: ParamDefault::Derived("quantum, 2*quantum, 4*quantum, ..."),
            help: "quantum per level, top first (overrides quantum)",
        },
        ParamInfo {
            name: "allotment",
            kind: ParamKind::List,
            unit: Unit::Work,
            default: ParamDefault::Derived("one quantum per level"),
            help: "service a job may receive at a level before it moves down",
        },
        ParamInfo {
            name: "boost_period",
            kind: ParamKind::Positive,
            unit: Unit::Time,
            default: ParamDefault::Unset("none: no boost"),
            help: "period of the priority boost that moves every job to the top level",
        },
    ],
    build,
};

/// More levels than any study uses; each is a queue, and the default quanta double per level.
const MAX_LEVELS: usize = 64;

fn per_level(
    list: Option<Vec<f64>>,
    levels: usize,
    key: &str,
) -> Result<Option<Vec<f64>>, SpecError> {
    match list {
        None => Ok(None),
        Some(v) if v.len() == 1 => Ok(Some(vec![v[0]; levels])),
        Some(v) if v.len() == levels => Ok(Some(v)),
        Some(v) => Err(SpecError::new(
            key,
            format!("{v:?}"),
            format!("one value, or one per level ({levels})"),
        )),
    }
}

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, SpecError> {
    let quanta_given = p.list("quanta");
    let levels = match (&quanta_given, p.num("levels")) {
        (_, Some(l)) => l as usize,
        (Some(q), None) if q.len() > 1 => q.len(),
        _ => 3,
    };
    if levels > MAX_LEVELS {
        let key = if p.num("levels").is_some() {
            "levels"
        } else {
            "quanta"
        };
        return Err(SpecError::new(
            key,
            levels,
            format!("at most {MAX_LEVELS} levels"),
        ));
    }
    let base = p.number("quantum");
    let quanta = per_level(quanta_given, levels, "quanta")?.unwrap_or_else(|| {
        (0..levels)
            .map(|l| base * f64::powi(2.0, l as i32))
            .collect()
    });
    let allotment = per_level(p.list("allotment"), levels, "allotment")?.unwrap_or(quanta.clone());
    let boost = p.num("boost_period");
    Ok(Box::new(Mlfq {
        queues: (0..levels).map(|_| FifoQueue::default()).collect(),
        quanta,
        allotment,
        boost,
        next_boost: boost.unwrap_or(f64::INFINITY),
        epoch: 0,
        state: Vec::new(),
        slices: SliceUse::default(),
    }))
}

/// A job's level and the service it received there (its allotment used), as of boost `epoch`;
/// `demoted`: it moved down during its current run.
#[derive(Clone, Copy, Default)]
struct JobState {
    level: usize,
    used: f64,
    epoch: u64,
    demoted: bool,
}

pub struct Mlfq {
    queues: Vec<FifoQueue>,
    quanta: Vec<f64>,
    allotment: Vec<f64>,
    boost: Option<f64>,
    next_boost: f64,
    epoch: u64,
    state: Vec<JobState>,
    slices: SliceUse,
}

impl Mlfq {
    fn slot(&mut self, id: JobId) -> &mut JobState {
        let i = id.index();
        if i >= self.state.len() {
            self.state.resize(i + 1, JobState::default());
        }
        &mut self.state[i]
    }
    /// The job's state, reset to the top if a boost happened since it was last seen.
    fn current(&mut self, id: JobId) -> &mut JobState {
        let epoch = self.epoch;
        let s = self.slot(id);
        if s.epoch != epoch {
            *s = JobState {
                epoch,
                ..JobState::default()
            };
        }
        s
    }
    /// The boost, if one is due: every queued job to the top level with a new slice (a
    /// preempted job does not keep the rest of its old level's slice). Whether it happened.
    fn maybe_boost(&mut self, now: f64) -> bool {
        let Some(period) = self.boost else {
            return false;
        };
        if now < self.next_boost {
            return false;
        }
        self.epoch += 1;
        self.next_boost = (now / period).floor() * period + period;
        let mut order = Vec::new();
        for q in &mut self.queues {
            order.extend(q.drain_live());
        }
        for id in order {
            self.current(id);
            self.slices.enqueue(id, Enqueue::Expired);
            self.queues[0].push_back(id);
        }
        true
    }
    fn level_of(&self, id: JobId) -> usize {
        match self.state.get(id.index()) {
            Some(s) if s.epoch == self.epoch => s.level,
            _ => 0,
        }
    }
}

impl Policy for Mlfq {
    fn name(&self) -> &'static str {
        "mlfq"
    }
    fn enqueue(&mut self, job: &JobView, now: f64, why: Enqueue<'_>) {
        let epoch = self.epoch;
        match why {
            Enqueue::Arrival => {
                *self.slot(job.id) = JobState {
                    epoch,
                    ..JobState::default()
                }
            }
            Enqueue::Migrated(c) => {
                let bottom = self.queues.len() - 1;
                *self.slot(job.id) = JobState {
                    level: (c.level as usize).min(bottom),
                    used: c.level_used,
                    epoch,
                    demoted: false,
                }
            }
            _ => {}
        }
        // A job that used up its allotment in the run that a preemption ended has a new level
        // and a new slice: it goes to the tail of that level, as after an expired slice.
        let demoted = std::mem::take(&mut self.slot(job.id).demoted);
        let why = match why {
            Enqueue::Preempted { .. } if demoted => Enqueue::Expired,
            _ => why,
        };
        self.slices.enqueue(job.id, why);
        if self.maybe_boost(now) {
            self.slices.enqueue(job.id, Enqueue::Expired);
        }
        let level = self.current(job.id).level;
        if matches!(why, Enqueue::Preempted { .. }) {
            self.queues[level].push_front(job.id);
        } else {
            self.queues[level].push_back(job.id);
        }
    }
    fn dequeue(&mut self, job: &JobView, _: f64, why: Dequeue) -> Carry {
        for q in &mut self.queues {
            q.remove(job.id);
        }
        let s = *self.current(job.id);
        if why != Dequeue::Sleep {
            // The job is gone from here: the slot's next job (a task's next request, or a
            // job that wakes here after sleeping elsewhere) does not inherit its level.
            *self.slot(job.id) = JobState::default();
        }
        Carry {
            used: self.slices.leave(job.id),
            level: s.level as u32,
            level_used: s.used,
            ..Carry::NONE
        }
    }
    fn pick_next(&mut self, now: f64) -> Option<JobId> {
        let _ = self.maybe_boost(now);
        self.queues.iter_mut().find_map(|q| q.pop())
    }
    fn slice(&self, job: &JobView, _: f64) -> Option<f64> {
        let s = self.state[job.id.index()];
        let (level, used) = if s.epoch == self.epoch {
            (s.level, s.used)
        } else {
            (0, 0.0)
        };
        Some(
            self.slices
                .rest(job.id, self.quanta[level])
                .min(self.allotment[level] - used)
                .max(1e-12),
        )
    }
    fn preempts(&self, incoming: &JobView, running: &JobView, _: f64) -> bool {
        self.level_of(incoming.id) < self.level_of(running.id)
    }
    fn charge(&mut self, job: &JobView, ran: f64, _: f64) {
        let bottom = self.queues.len() - 1;
        let s = *self.current(job.id);
        let used = s.used + ran;
        if used >= self.allotment[s.level] * (1.0 - 1e-12) {
            // Allotment spent: one level down, with a new allotment and a new slice.
            *self.slot(job.id) = JobState {
                level: (s.level + 1).min(bottom),
                used: 0.0,
                epoch: s.epoch,
                demoted: true,
            };
            self.slices.enqueue(job.id, Enqueue::Expired);
        } else {
            self.slot(job.id).used = used;
        }
    }
    fn len(&self) -> usize {
        self.queues.iter().map(FifoQueue::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use crate::{build, Dequeue, Enqueue, JobId, JobView, ParamValue, Params, Policy};

    /// Runs jobs (arrival, size) on one CPU the way an engine does: arrivals enqueue, an
    /// arrival that preempts takes the CPU, a slice ends in Expired. Returns completion times.
    fn schedule(p: &mut Box<dyn Policy>, jobs: &[(f64, f64)]) -> Vec<f64> {
        let mut views: Vec<JobView> = jobs
            .iter()
            .enumerate()
            .map(|(i, &(a, s))| JobView::new(JobId(i as u32), a, s))
            .collect();
        let mut done = vec![f64::NAN; jobs.len()];
        let mut now = 0.0;
        let mut next_arrival = 0;
        let mut running: Option<(usize, f64, f64)> = None; // job, start, slice
        loop {
            while next_arrival < jobs.len() && jobs[next_arrival].0 <= now {
                let i = next_arrival;
                next_arrival += 1;
                p.enqueue(&views[i], now, Enqueue::Arrival);
                if let Some((r, start, _)) = running {
                    let mut cur = views[r].clone();
                    cur.attained += now - start;
                    cur.remaining -= now - start;
                    if p.preempts(&views[i], &cur, now) {
                        views[r] = cur;
                        p.charge(&views[r], now - start, now);
                        p.enqueue(&views[r], now, Enqueue::Preempted { ran: now - start });
                        running = None;
                    }
                }
            }
            if running.is_none() {
                match p.pick_next(now) {
                    Some(id) => {
                        let i = id.index();
                        let s = p.slice(&views[i], now).unwrap().min(views[i].remaining);
                        running = Some((i, now, s));
                    }
                    None if next_arrival < jobs.len() => {
                        now = jobs[next_arrival].0;
                        continue;
                    }
                    None => return done,
                }
            }
            let (r, start, slice) = running.unwrap();
            let end = start + slice;
            if next_arrival < jobs.len() && jobs[next_arrival].0 < end {
                now = jobs[next_arrival].0;
                continue;
            }
            now = end;
            views[r].attained += slice;
            views[r].remaining -= slice;
            p.charge(&views[r], slice, now);
            running = None;
            if views[r].remaining <= 1e-9 {
                done[r] = now;
                p.dequeue(&views[r], now, Dequeue::Exit);
            } else {
                p.enqueue(&views[r], now, Enqueue::Expired);
            }
        }
    }

    #[test]
    fn a_preempted_job_resumes_first_with_the_rest_of_its_slice() {
        // Quanta 1 and 10, allotments 2 and 30 (two and three slices). A and B (30 each) take
        // turns at the top (0-4) and both reach level 1. A runs from 4 with a 10-slice; C (3)
        // arrives at 5 and preempts it after 1. C runs 5-7 at the top, then drops to level 1,
        // behind A and B. A resumes at 7 with the 9 left of its slice (7-16), B runs 16-26,
        // and C finishes its last unit at 27 (a fresh slice for A would have run A 7-17 and
        // B 17-27, and C would end at 28). Then A 27-37, B 37-47, A's last 8 at 47-55 and
        // B's at 55-63.
        let params = Params::new()
            .with("quanta", ParamValue::List(vec![1.0, 10.0]))
            .with("allotment", ParamValue::List(vec![2.0, 30.0]));
        let mut p = build("mlfq", &params, 1).unwrap();
        let done = schedule(&mut p, &[(0.0, 30.0), (0.0, 30.0), (5.0, 3.0)]);
        assert_eq!(done, [55.0, 63.0, 27.0]);
    }

    #[test]
    fn a_job_demoted_in_a_preempted_run_goes_to_the_tail_with_a_new_slice() {
        // Quanta 1 and 10, allotment 1 at the top. D is demoted first and waits at level 1.
        // A's allotment runs out in the very run a preemption ends: A has a new level and a
        // new slice, so it queues behind D with a full 10, not ahead of it with 9.
        let params = Params::new()
            .with("quanta", ParamValue::List(vec![1.0, 10.0]))
            .with("allotment", ParamValue::List(vec![1.0, 30.0]));
        let mut p = build("mlfq", &params, 1).unwrap();
        let (d, a) = (
            JobView::new(JobId(0), 0.0, 50.0),
            JobView::new(JobId(1), 0.0, 50.0),
        );
        p.enqueue(&d, 0.0, Enqueue::Arrival);
        p.enqueue(&a, 0.0, Enqueue::Arrival);
        assert_eq!(p.pick_next(0.0), Some(d.id));
        p.charge(&d, 1.0, 1.0);
        p.enqueue(&d, 1.0, Enqueue::Expired);
        assert_eq!(p.pick_next(1.0), Some(a.id));
        p.charge(&a, 1.0, 2.0);
        p.enqueue(&a, 2.0, Enqueue::Preempted { ran: 1.0 });
        assert_eq!(p.pick_next(2.0), Some(d.id));
        assert_eq!(p.pick_next(2.0), Some(a.id));
        assert_eq!(p.slice(&a, 2.0), Some(10.0));
    }

    #[test]
    fn a_job_that_wakes_on_another_runqueue_keeps_its_level_and_leaves_none_behind() {
        let params = Params::new().with("quanta", ParamValue::List(vec![1.0, 10.0]));
        let (mut here, mut there) = (
            build("mlfq", &params, 1).unwrap(),
            build("mlfq", &params, 1).unwrap(),
        );
        let j = JobView::new(JobId(3), 0.0, 50.0);
        here.enqueue(&j, 0.0, Enqueue::Arrival);
        assert_eq!(here.pick_next(0.0), Some(j.id));
        here.charge(&j, 1.0, 1.0); // allotment of the top level used: level 1
        here.dequeue(&j, 1.0, Dequeue::Sleep);
        // It wakes on the other runqueue: this one lets it go with what it keeps.
        let mut carry = here.dequeue(&j, 5.0, Dequeue::Migrate);
        carry.asleep = true;
        assert_eq!(carry.level, 1);
        there.enqueue(&j, 5.0, Enqueue::Migrated(&carry));
        assert_eq!(there.pick_next(5.0), Some(j.id));
        assert_eq!(there.slice(&j, 5.0), Some(10.0));
        // The slot's next job (a task's next request) waking here starts at the top.
        let next = JobView::new(JobId(3), 6.0, 50.0);
        here.enqueue(&next, 6.0, Enqueue::Wakeup);
        assert_eq!(here.pick_next(6.0), Some(next.id));
        assert_eq!(here.slice(&next, 6.0), Some(1.0));
    }

    #[test]
    fn too_many_levels_are_refused_not_allocated() {
        let e = build(
            "mlfq",
            &Params::new().with("levels", ParamValue::Num(1e9)),
            1,
        )
        .err()
        .unwrap();
        assert_eq!(
            (e.key.as_str(), e.allowed.as_str()),
            ("levels", "at most 64 levels")
        );
    }

    #[test]
    fn boost_period_returns_every_job_to_the_top() {
        let params = Params::new()
            .with("quanta", ParamValue::List(vec![1.0, 100.0]))
            .with("boost_period", ParamValue::Num(10.0));
        let mut p = build("mlfq", &params, 1).unwrap();
        let long = JobView::new(JobId(0), 0.0, 1000.0);
        p.enqueue(&long, 0.0, Enqueue::Arrival);
        assert_eq!(p.pick_next(0.0), Some(JobId(0)));
        p.charge(&long, 1.0, 1.0);
        p.enqueue(&long, 1.0, Enqueue::Expired);
        // Level 1 now: a 100 slice, cut to 100 by the allotment.
        assert_eq!(p.pick_next(1.0), Some(JobId(0)));
        assert_eq!(p.slice(&long, 1.0), Some(100.0));
        p.charge(&long, 50.0, 51.0);
        p.enqueue(&long, 51.0, Enqueue::Expired);
        // Boosts fell due while it ran (every 10): the next hook puts it back at the top.
        assert_eq!(p.pick_next(51.0), Some(JobId(0)));
        assert_eq!(p.slice(&long, 51.0), Some(1.0));
    }
}
