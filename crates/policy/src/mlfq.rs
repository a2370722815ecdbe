//! Multi-level feedback queue (as in OSTEP): new jobs enter the top level; a job that uses up
//! its allotment at a level moves down; round robin within a level; a job at a higher level
//! preempts; every `boost` time units all jobs return to the top, so none starves.

use crate::{
    Enqueue, FifoQueue, JobId, JobView, ParamError, ParamInfo, ParamKind, Params, Policy,
    PolicyInfo,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "mlfq",
    aliases: &[],
    summary: "Multi-level feedback queue with per-level quanta, allotments and priority boost.",
    params: &[
        ParamInfo {
            name: "levels",
            kind: ParamKind::Count,
            default: "3",
            help: "number of priority levels",
        },
        ParamInfo {
            name: "quantum",
            kind: ParamKind::Positive,
            default: "10",
            help: "quantum of the top level; each lower level doubles it",
        },
        ParamInfo {
            name: "quanta",
            kind: ParamKind::List,
            default: "quantum, 2*quantum, 4*quantum, ...",
            help: "quantum per level, top first (overrides quantum)",
        },
        ParamInfo {
            name: "allotment",
            kind: ParamKind::List,
            default: "one quantum per level",
            help: "service a job may receive at a level before it moves down",
        },
        ParamInfo {
            name: "boost",
            kind: ParamKind::Positive,
            default: "none",
            help: "period of the priority boost that moves every job to the top level",
        },
    ],
    build,
};

fn per_level(
    list: Option<Vec<f64>>,
    levels: usize,
    key: &str,
) -> Result<Option<Vec<f64>>, ParamError> {
    match list {
        None => Ok(None),
        Some(v) if v.len() == 1 => Ok(Some(vec![v[0]; levels])),
        Some(v) if v.len() == levels => Ok(Some(v)),
        Some(v) => Err(ParamError {
            key: key.into(),
            value: format!("{v:?}"),
            allowed: format!("one value, or one per level ({levels})"),
        }),
    }
}

fn build(p: &Params, _: u64) -> Result<Box<dyn Policy>, ParamError> {
    let quanta_given = p.list("quanta");
    let levels = match (&quanta_given, p.num("levels")) {
        (_, Some(l)) => l as usize,
        (Some(q), None) if q.len() > 1 => q.len(),
        _ => 3,
    };
    let base = p.num_or("quantum", 10.0);
    let quanta = per_level(quanta_given, levels, "quanta")?.unwrap_or_else(|| {
        (0..levels)
            .map(|l| base * f64::powi(2.0, l as i32))
            .collect()
    });
    let allotment = per_level(p.list("allotment"), levels, "allotment")?.unwrap_or(quanta.clone());
    Ok(Box::new(Mlfq {
        queues: (0..levels).map(|_| FifoQueue::default()).collect(),
        quanta,
        allotment,
        boost: p.num("boost"),
        next_boost: p.num("boost").unwrap_or(f64::INFINITY),
        epoch: 0,
        state: Vec::new(),
    }))
}

#[derive(Clone, Copy, Default)]
struct JobState {
    level: usize,
    used: f64,
    epoch: u64,
}

pub struct Mlfq {
    queues: Vec<FifoQueue>,
    quanta: Vec<f64>,
    allotment: Vec<f64>,
    boost: Option<f64>,
    next_boost: f64,
    epoch: u64,
    state: Vec<JobState>,
}

impl Mlfq {
    /// The job's state, reset to the top if a boost happened since it was last seen.
    fn current(&mut self, id: JobId) -> &mut JobState {
        let epoch = self.epoch;
        let s = &mut self.state[id.index()];
        if s.epoch != epoch {
            *s = JobState {
                level: 0,
                used: 0.0,
                epoch,
            };
        }
        s
    }
    fn maybe_boost(&mut self, now: f64) {
        let Some(period) = self.boost else { return };
        if now < self.next_boost {
            return;
        }
        self.epoch += 1;
        self.next_boost = (now / period).floor() * period + period;
        let mut order = Vec::new();
        for q in &mut self.queues {
            order.extend(q.drain_live());
        }
        for id in order {
            self.current(id);
            self.queues[0].push_back(id);
        }
    }
    fn level_of(&self, id: JobId) -> usize {
        let s = self.state[id.index()];
        if s.epoch == self.epoch {
            s.level
        } else {
            0
        }
    }
}

impl Policy for Mlfq {
    fn name(&self) -> &'static str {
        "mlfq"
    }
    fn enqueue(&mut self, job: &JobView, now: f64, why: Enqueue) {
        let i = job.id.index();
        if i >= self.state.len() {
            self.state.resize(i + 1, JobState::default());
        }
        if matches!(why, Enqueue::Arrival) {
            self.state[i] = JobState {
                level: 0,
                used: 0.0,
                epoch: self.epoch,
            };
        }
        self.maybe_boost(now);
        let level = self.current(job.id).level;
        // A preempted job has not used its turn: it resumes first at its level.
        if why == Enqueue::Preempted {
            self.queues[level].push_front(job.id);
        } else {
            self.queues[level].push_back(job.id);
        }
    }
    fn dequeue(&mut self, id: JobId) {
        for q in &mut self.queues {
            q.remove(id);
        }
    }
    fn pick_next(&mut self, now: f64) -> Option<JobId> {
        self.maybe_boost(now);
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
            self.quanta[level]
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
        let spent = used >= self.allotment[s.level] * (1.0 - 1e-12);
        self.state[job.id.index()] = match spent {
            true => JobState {
                level: (s.level + 1).min(bottom),
                used: 0.0,
                epoch: s.epoch,
            },
            false => JobState { used, ..s },
        };
    }
    fn len(&self) -> usize {
        self.queues.iter().map(FifoQueue::len).sum()
    }
}
