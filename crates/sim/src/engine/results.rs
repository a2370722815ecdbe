//! The end of a run: open intervals closed, then the counters only the engine knows (busy
//! time, the measured window, events), the load tables and the per-task shares handed to the
//! model's summary, which computes everything else the same way for every world.

use schedlab_model::balance::LoadSamples;
use schedlab_model::summary::{Counters, JobTable, TaskInput};
use schedlab_policy::JobId;
use serde::Serialize;

use super::{Engine, Output, NONE};

/// One stretch of a job on a CPU.
#[derive(Clone, Debug, Serialize)]
pub struct Segment {
    pub cpu: u32,
    pub job: u64,
    pub task: i64,
    pub start: f64,
    pub end: f64,
}

/// Load distribution of one runqueue (`cpu` = -1 for the global queue): the share of the
/// measured time it held `runnable` jobs (queued or running), and the share of the measured
/// completions that happened on it while it held that many (the completing job included).
#[derive(Clone, Debug, Serialize)]
pub struct LoadRow {
    pub cpu: i32,
    pub runnable: u32,
    pub time_share: f64,
    pub completion_share: f64,
}

/// Runnable jobs of one runqueue at one sampling instant (key `load_sample`).
#[derive(Clone, Debug, Serialize)]
pub struct LoadSample {
    pub time: f64,
    pub cpu: i32,
    pub runnable: u32,
}

impl Engine<'_> {
    pub(super) fn finish(mut self) -> Output {
        let end = self.now;
        // Close open intervals at the end of the run.
        for c in 0..self.cpus.len() {
            let cpu = &self.cpus[c];
            if let Some(id) = cpu.job {
                let ran = (end - cpu.run_start).clamp(0.0, cpu.run_len);
                let start = cpu.run_start;
                self.acct.overhead += cpu.run_start.min(end) - cpu.dispatched;
                let j = &mut self.jobs[id.index()];
                j.view.attained += ran;
                j.view.remaining -= ran;
                // The run in progress counts in its task's CPU time, as an ended one does.
                let task = j.task as usize;
                self.acct.served(task, start, start + ran);
            }
            if !self.cpus[c].busy_since.is_nan() {
                self.close_busy(c);
            }
        }
        self.set_in_system(0);
        for r in 0..self.rqs.len() {
            self.set_runnable(r, 0, 0.0);
        }
        if let Some(s) = &mut self.acct.shares {
            s.advance(end);
        }
        let (unfinished, partial) = self.unfinished_work();
        let a = &self.acct;
        let window_end = if a.measure_end.is_finite() {
            a.measure_end
        } else {
            end
        };
        let window = (window_end - a.measure_start).max(0.0);
        let k = self.cpus.len() as f64;
        let (busy_time, busy_per_cpu) = if self.fluid {
            let busy: f64 = self.rqs.iter().map(|rq| rq.fluid_busy).sum();
            let per: Vec<f64> = if self.per_cpu {
                self.rqs.iter().map(|rq| rq.fluid_busy_window).collect()
            } else {
                vec![self.rqs[0].fluid_busy_window / k; self.cpus.len()]
            };
            (busy, per)
        } else {
            let total: f64 = self.cpus.iter().map(|c| c.busy_total).sum::<f64>() - a.overhead;
            (total, self.cpus.iter().map(|c| c.busy_window).collect())
        };
        let (loads, runnable_mean_per_cpu) = self.load_tables();
        let tasks = self.task_inputs();
        let counters = Counters {
            policy: self.cfg.policy.clone(),
            seed: self.cfg.seed,
            cpus: self.cpus.len() as u32,
            measure_start: a.measure_start,
            measure_end: window_end,
            busy_per_cpu,
            busy_span: window,
            busy_time,
            work_served: a.work_completed + partial,
            overhead_time: a.overhead,
            runnable_mean_per_cpu,
            offered_load: self.cfg.offered_load.unwrap_or(f64::NAN),
            sim_time: end,
            warmup_jobs: self.warmup,
            unfinished,
            events: Some(a.events),
            batch_size: 0, // the summarizer has its batches (`Summarizer::in_batches`)
            arrivals_in_window: Some(a.measured_arrivals),
            completions_in_window: Some(a.completed_in_window),
            in_system_area: Some(a.in_system_area),
            precision: self.cfg.precision.map(|p| p.target),
            load_samples: self.load_samples(end),
        };
        let contended = a.shares.is_some().then(|| {
            let why = match a.share_closed_by {
                Some(task) => format!("task {task} finished its jobs"),
                // The os world's words for the same ends.
                None if a.measure_end.is_finite() => "time limit".into(),
                None => "end of run".into(),
            };
            // A client that finished in the warm-up left an empty interval, at its start.
            (a.share_end.max(a.measure_start).min(window_end), why)
        });
        let (mut summary, classes, tasks) = self.acct.summary.finish(&counters, &tasks);
        if let Some((at, why)) = contended {
            summary.contended_ms = Some(at);
            summary.contended_end = Some(why);
        }
        Output {
            summary,
            classes,
            tasks,
            loads,
            load_series: self.acct.series,
            jobs: self.acct.table.map(JobTable::trimmed),
            schedule: self.acct.schedule,
        }
    }

    /// The sampled runnable jobs per CPU, for the time to balance (per-CPU runqueues with
    /// `load_sample` only), from the release of a pinned start (`release_after`, 0 without).
    fn load_samples(&self, end: f64) -> Option<LoadSamples> {
        let series = self.acct.series.as_ref().filter(|_| self.per_cpu)?;
        let m = self.rqs.len();
        Some(LoadSamples {
            time: series.chunks(m).map(|c| c[0].time).collect(),
            runnable: series
                .chunks(m)
                .map(|c| c.iter().map(|s| s.runnable).collect())
                .collect(),
            release: self.cfg.machine.release_after,
            end,
        })
    }

    /// Jobs still present at the end, and the work they received. A job in a fluid runqueue
    /// has also received service since it joined it: its task is credited with it now (a
    /// fluid job's service is otherwise counted when its burst completes).
    fn unfinished_work(&mut self) -> (u64, f64) {
        let mut partial = 0.0;
        let mut unfinished = 0;
        for i in 0..self.jobs.len() {
            let j = &self.jobs[i];
            if !j.alive {
                continue;
            }
            unfinished += 1;
            let task = j.task as usize;
            let in_fluid = if self.rqs[j.rq as usize].fluid && j.queued {
                let f = self.rqs[j.rq as usize].policy.fluid().expect("fluid");
                f.attained(JobId(i as u32))
            } else {
                0.0
            };
            self.acct.served_fluid(task, in_fluid);
            partial += self.jobs[i].view.attained + in_fluid;
        }
        (unfinished, partial)
    }

    /// The load distribution of every runqueue, and its time-averaged runnable jobs.
    fn load_tables(&self) -> (Vec<LoadRow>, Vec<f64>) {
        let mut loads = Vec::new();
        let mut runnable_mean = Vec::new();
        for (r, rq) in self.rqs.iter().enumerate() {
            let total_time: f64 = rq.hist.bins().map(|(_, t, _)| t).sum();
            let total_done: u64 = rq.hist.bins().map(|(_, _, d)| d).sum();
            let mean: f64 = rq.hist.bins().map(|(n, t, _)| n as f64 * t).sum::<f64>() / total_time;
            runnable_mean.push(mean);
            for (n, time, done) in rq.hist.bins() {
                if time > 0.0 || done > 0 {
                    loads.push(LoadRow {
                        cpu: if self.per_cpu { r as i32 } else { NONE },
                        runnable: n as u32,
                        time_share: time / total_time,
                        completion_share: done as f64 / total_done as f64,
                    });
                }
            }
        }
        (loads, runnable_mean)
    }

    /// CPU received and entitled per persistent task (NaN when shares are not tracked).
    fn task_inputs(&self) -> Vec<TaskInput> {
        let a = &self.acct;
        (0..self.persistent)
            .map(|i| {
                let t = &self.tasks[i];
                let (service, entitled) = match &a.shares {
                    Some(s) => (a.service[i], s.entitled()[i]),
                    None => (f64::NAN, f64::NAN),
                };
                TaskInput {
                    task: i as u32,
                    class: self.cfg.classes[t.class as usize].name.clone(),
                    service,
                    entitled,
                    migrations: t.migrations as f64,
                    cpu: t.last_cpu,
                }
            })
            .collect()
    }
}
