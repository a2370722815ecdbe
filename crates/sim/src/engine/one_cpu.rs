//! The event loops of the textbook queue: one CPU, one runqueue, an open stream of one-burst
//! jobs, no timers; one loop for a discrete policy (turns on the CPU), one for a fluid one (PS,
//! GPS, FB: every job served at once). They are chosen once, at the start of a run
//! ([`Engine::one_cpu`]), and do what `step` and the machine's general dispatch, end of a run
//! and fluid service do for such a run, without their tests of what the run does not have
//! (per-CPU runqueues, threads, I/O, boosts, balancers, holds, a schedule, shares): the same
//! operations in the same order, so the same bits (`bench/bits.py`, the determinism tests).
//! Jobs are made, measured and retired by the same code as in the general loop
//! (`admit_arrivals`, `job_done`; a fluid's `fluid_enqueue`, `fluid_done`), and the run ends
//! through the same `finish`.
//!
//! A key that the general loop reads while the run goes must be handled here too, or be
//! listed in `one_cpu` as one that sends a run to the general loop; the tests below run every
//! policy and the costs this loop handles through both loops and compare the bits.

use schedlab_policy::{Enqueue, JobId};

use super::{earliest, Engine};
use crate::spec::{Boost, Runqueues, Workload};

impl Engine<'_> {
    /// Whether this run is one the one-CPU loop serves (checked once, before the run).
    pub(super) fn one_cpu(&self) -> bool {
        let cfg = self.cfg;
        let m = &cfg.machine;
        m.cpus == 1
            && m.runqueues == Runqueues::Global
            && matches!(cfg.workload, Workload::Open { .. })
            && !self.threads
            && !self.bounded
            && !self.scaled
            && !self.held
            && self.delay == 0.0
            && m.boost == Boost::None
            && !cfg.keep_schedule
            && cfg.load_sample.is_none()
            && self.acct.shares.is_none()
            && cfg.classes.iter().all(|c| c.bursts == 1 && !c.final_io)
    }

    /// Runs this run (one that `one_cpu` serves) through the loop of its kind of policy.
    pub(super) fn one_cpu_run(&mut self) {
        if self.fluid {
            self.one_cpu_fluid_loop();
        } else {
            self.one_cpu_loop();
        }
    }

    /// A fluid policy on the one CPU: the next event is an arrival or the fluid's own (a
    /// completion or a regrouping); the fluid is served up to it first, as `advance_to` does.
    fn one_cpu_fluid_loop(&mut self) {
        let stop = self.cfg.stop().unwrap_or(f64::INFINITY);
        loop {
            let t = earliest(self.next_open, self.fluid_next.min());
            if t == f64::INFINITY || t > stop {
                if stop.is_finite() {
                    self.advance_fluid(stop);
                    self.now = stop;
                }
                return;
            }
            self.advance_fluid(t);
            self.now = t;
            while self.fluid_next.min() <= t {
                self.acct.events += 1;
                self.fluid_done(0);
            }
            if self.next_open <= t {
                self.admit_arrivals();
                let mut ready = std::mem::take(&mut self.ready);
                // `make_ready` for an open arrival on the one runqueue, less its entitlement
                // (read only for shares, which this loop's runs do not keep).
                for &id in &ready {
                    self.enqueue(0, id, Enqueue::Arrival);
                }
                ready.clear();
                self.ready = ready;
            }
        }
    }

    fn one_cpu_loop(&mut self) {
        let stop = self.cfg.stop().unwrap_or(f64::INFINITY);
        let may_preempt = self.rqs[0].may_preempt;
        // When the run on the CPU ends (infinite while it is idle).
        let mut run_end = f64::INFINITY;
        loop {
            let t = earliest(self.next_open, run_end);
            if t == f64::INFINITY || t > stop {
                if stop.is_finite() {
                    self.now = stop;
                }
                return;
            }
            self.now = t;
            let now = t;
            // The job whose slice expired now, if any (one CPU: at most one).
            let mut expired = None;
            if run_end <= now {
                self.acct.events += 1;
                expired = self.one_cpu_end_run(false).1;
                run_end = f64::INFINITY;
            }
            // Arrivals are the only newcomers (no timers), enqueued before the expired job.
            let arrived = self.next_open <= now;
            let ready = if arrived {
                self.admit_arrivals();
                std::mem::take(&mut self.ready)
            } else {
                Vec::new()
            };
            for &id in &ready {
                let w = self.jobs[id.index()].view.weight;
                self.set_runnable(0, 1, w);
                self.one_cpu_enqueue(id, Enqueue::Arrival);
            }
            if let Some(id) = expired {
                self.one_cpu_enqueue(id, Enqueue::Expired);
            }
            if self.cpus[0].job.is_none() {
                if let Some(id) = self.rqs[0].policy.pick_next(now) {
                    self.jobs[id.index()].queued = false;
                    run_end = self.one_cpu_dispatch(id);
                }
            }
            if arrived {
                if may_preempt {
                    for &id in &ready {
                        let j = &self.jobs[id.index()];
                        if j.alive && j.queued {
                            run_end = self.one_cpu_maybe_preempt(id, run_end);
                        }
                    }
                }
                let mut ready = ready;
                ready.clear();
                self.ready = ready;
            }
        }
    }

    #[inline(always)]
    fn one_cpu_enqueue(&mut self, id: JobId, why: Enqueue<'_>) {
        let now = self.now;
        let j = &mut self.jobs[id.index()];
        j.rq = 0;
        j.ready_since = now;
        j.queued = true;
        self.rqs[0].policy.enqueue(&j.view, now, why);
    }

    /// A newcomer takes the CPU if the policy says it preempts the running job. Returns when
    /// the CPU's run ends now.
    fn one_cpu_maybe_preempt(&mut self, id: JobId, run_end: f64) -> f64 {
        let now = self.now;
        let Some(running) = self.cpus[0].job else {
            return run_end;
        };
        let running = self.current_view(0, running);
        let incoming = &self.jobs[id.index()].view;
        if !self.rqs[0].policy.preempts(incoming, &running, now) {
            return run_end;
        }
        let (ran, victim) = self.one_cpu_end_run(true);
        let victim = victim.expect("preempted job");
        self.one_cpu_enqueue(victim, Enqueue::Preempted { ran });
        match self.rqs[0].policy.pick_next(now) {
            Some(next) => {
                self.jobs[next.index()].queued = false;
                self.one_cpu_dispatch(next)
            }
            None => f64::INFINITY,
        }
    }

    /// Starts `id` on the CPU (the machine's `dispatch` for this run); returns when its run
    /// ends.
    #[inline(always)]
    fn one_cpu_dispatch(&mut self, id: JobId) -> f64 {
        let now = self.now;
        let m = &self.cfg.machine;
        let j = &mut self.jobs[id.index()];
        let start = j.start_cost(now, m);
        let seq = j.seq;
        self.count_switch(0, seq);
        let cpu = &mut self.cpus[0];
        let overhead = start
            + if cpu.last_seq == seq {
                m.turn_cost
            } else {
                m.context_switch
            };
        let j = &mut self.jobs[id.index()];
        j.cpu = 0;
        j.on_cpu = 0;
        j.waited += now + overhead - j.ready_since;
        let slice = self.rqs[0].policy.slice(&j.view, now);
        let run_len = slice.map_or(j.burst_left, |s| earliest(s, j.burst_left));
        cpu.job = Some(id);
        cpu.dispatched = now;
        cpu.run_start = now + overhead;
        cpu.run_len = run_len;
        cpu.last_seq = seq;
        if cpu.busy_since.is_nan() {
            cpu.busy_since = now;
        }
        now + overhead + run_len
    }

    /// Ends the CPU's run now (the machine's `end_run` for this run): the job is done, or its
    /// slice expired or (`preempted`) a newcomer preempts it. Returns the service it received
    /// in this run, and the job if it is not done (to be queued again).
    #[inline(always)]
    fn one_cpu_end_run(&mut self, preempted: bool) -> (f64, Option<JobId>) {
        let now = self.now;
        let cpu = &mut self.cpus[0];
        let id = cpu.job.take().expect("busy CPU");
        let (ran, overhead) = cpu.ended_run(now, preempted);
        self.acct.overhead += overhead;
        let j = &mut self.jobs[id.index()];
        // One burst: when it is done, the job is.
        let burst_done = j.ran(now, ran, preempted);
        self.rqs[0].policy.charge(&j.view, ran, now);
        if burst_done {
            self.close_busy(0);
            self.job_done(id, Some(0));
            return (ran, None);
        }
        let seq = self.jobs[id.index()].seq;
        self.cpus[0].left_unfinished = Some((id, seq));
        if !preempted {
            self.close_busy(0);
        }
        (ran, Some(id))
    }
}

#[cfg(test)]
mod tests {
    use schedlab_policy::POLICIES;

    use super::super::{Engine, Output};
    use crate::spec::{ClassSpec, SimSpec, WarmupSpec};

    /// A run through the general loop or the one-CPU loop; the second asserts the run is one
    /// it serves (a test of two general runs would prove nothing).
    fn run(spec: &SimSpec, one_cpu: bool) -> Output {
        let cfg = spec.validate().unwrap_or_else(|e| panic!("{e}"));
        let mut e = Engine::new(&cfg, 0).unwrap();
        e.start();
        if one_cpu {
            assert!(e.one_cpu(), "{spec:?} is not a one-CPU run");
            e.one_cpu_run();
        } else {
            e.main_loop();
        }
        e.finish()
    }

    /// The summary, the class rows and the per-job table as JSON (floats written exactly, so
    /// equal text is equal bits).
    fn text(out: &Output) -> String {
        serde_json::to_string(&(&out.summary, &out.classes, &out.jobs)).unwrap()
    }

    fn open(policy: &str) -> SimSpec {
        SimSpec {
            policy: Some(policy.into()),
            load: Some(0.85),
            size: Some("hyperexp:1,3".into()),
            jobs: Some(5_000),
            warmup: Some(WarmupSpec::Jobs(200)),
            seed: Some(21),
            keep_jobs: Some(true),
            // EDF needs deadlines; the others ignore them.
            classes: Some(vec![ClassSpec {
                size: Some("hyperexp:1,3".into()),
                deadline: Some(5.0),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn every_policy_gives_the_same_bits_in_both_loops() {
        let mut fluid = 0;
        for info in POLICIES {
            let spec = open(info.name);
            let (general, one) = (run(&spec, false), run(&spec, true));
            assert_eq!(text(&general), text(&one), "{}", info.name);
            assert!(one.summary.jobs > 4_000, "{}", info.name);
            let cfg = spec.validate().unwrap();
            fluid += usize::from(Engine::new(&cfg, 0).unwrap().fluid);
        }
        // PS, GPS and FB through the fluid loop, the others through the discrete one.
        assert_eq!(fluid, 3);
    }

    #[test]
    fn costs_classes_limits_and_precision_give_the_same_bits_in_both_loops() {
        let two_classes = vec![
            ClassSpec {
                name: Some("short".into()),
                fraction: Some(0.7),
                size: Some("exp:0.5".into()),
                priority: Some(1.0),
                tickets: Some(3.0),
                ..Default::default()
            },
            ClassSpec {
                name: Some("long".into()),
                fraction: Some(0.3),
                size: Some("exp:2".into()),
                priority: Some(2.0),
                tickets: Some(1.0),
                ..Default::default()
            },
        ];
        let cases = [
            // A preemption inside a run's overhead, turns, an idle machine's wake-up.
            SimSpec {
                start_cost: Some(0.05),
                context_switch: Some(0.02),
                turn_cost: Some(0.01),
                idle_wake: Some(0.03),
                ..open("srpt")
            },
            SimSpec {
                params: Some(schedlab_policy::Params(
                    [("quantum".to_string(), schedlab_policy::ParamValue::Num(0.3))].into(),
                )),
                start_cost: Some(0.05),
                turn_cost: Some(0.01),
                context_switch: Some(0.02),
                ..open("rr")
            },
            SimSpec {
                classes: Some(two_classes.clone()),
                ..open("priority")
            },
            SimSpec {
                classes: Some(two_classes),
                ..open("lottery")
            },
            // A time limit that ends the run mid-job, and one that drains.
            SimSpec {
                jobs: None,
                time: Some(3_000.0),
                ..open("psjf")
            },
            SimSpec {
                jobs: None,
                time: Some(3_000.0),
                drain: Some(true),
                ..open("fcfs")
            },
            SimSpec {
                warmup: None,
                warmup_time: Some(300.0),
                ..open("sjf")
            },
            SimSpec {
                precision: Some(0.05),
                max_jobs: Some(100_000),
                ..open("fcfs")
            },
        ];
        for spec in &cases {
            let (general, one) = (run(spec, false), run(spec, true));
            assert_eq!(text(&general), text(&one), "{spec:?}");
            assert!(one.summary.jobs > 1_000, "{spec:?}");
        }
    }

    /// Runs drawn at random from what the loop serves: every discrete policy with its quantum
    /// where it has one, five size distributions, three loads, each cost present or not, one
    /// or two classes, a job count or a time limit, a warm-up by jobs or by time.
    #[test]
    fn random_runs_give_the_same_bits_in_both_loops() {
        use rand::{Rng, SeedableRng};
        use schedlab_policy::{ParamValue, Params};

        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let discrete: Vec<_> = POLICIES
            .iter()
            .filter(|p| !["ps", "gps", "fb"].contains(&p.name))
            .collect();
        let sizes = [
            "exp:1",
            "det:1",
            "det:0.75",
            "hyperexp:1,3",
            "bpareto:1.5,0.1,100",
            "lognormal:1,2",
        ];
        // Poisson arrivals at a load, or arrivals on a grid that, with sizes and quanta of
        // exact binary fractions, fall on the instants where runs end (the order of an
        // instant's events matters only then).
        let arrivals = [None, Some("det:1.25"), Some("det:0.5")];
        let cost = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| {
            rng.random_bool(0.5)
                .then(|| [0.01, 0.05][rng.random_range(0..2)])
        };
        for case in 0..300 {
            let info = discrete[rng.random_range(0..discrete.len())];
            let size = sizes[rng.random_range(0..sizes.len())];
            let arrival = arrivals[rng.random_range(0..arrivals.len())];
            let class = |fraction: f64, priority: f64, tickets: f64| ClassSpec {
                fraction: Some(fraction),
                size: Some(size.into()),
                priority: Some(priority),
                tickets: Some(tickets),
                deadline: Some(4.0 * priority),
                ..Default::default()
            };
            let classes = if rng.random_bool(0.5) {
                vec![class(1.0, 1.0, 1.0)]
            } else {
                vec![class(0.6, 1.0, 3.0), class(0.4, 2.0, 1.0)]
            };
            let mut params = Params::default();
            if info.params.iter().any(|p| p.name == "quantum") {
                let q = [0.1, 0.25, 0.5, 2.0][rng.random_range(0..4)];
                params.0.insert("quantum".into(), ParamValue::Num(q));
            }
            let limited = rng.random_bool(0.2);
            let by_time = rng.random_bool(0.3);
            let spec = SimSpec {
                policy: Some(info.name.into()),
                params: Some(params),
                load: arrival
                    .is_none()
                    .then(|| [0.3, 0.8, 0.97][rng.random_range(0..3)]),
                arrival: arrival.map(String::from),
                allow_unstable: Some(true),
                jobs: (!limited).then_some(3_000),
                time: limited.then_some(2_000.0),
                drain: limited.then(|| rng.random_bool(0.5)),
                classes: Some(classes),
                warmup: Some(WarmupSpec::Jobs(if by_time { 0 } else { 100 })),
                warmup_time: by_time.then_some(100.0),
                start_cost: cost(&mut rng),
                context_switch: cost(&mut rng),
                turn_cost: cost(&mut rng),
                idle_wake: cost(&mut rng),
                seed: Some(case),
                keep_jobs: Some(true),
                ..Default::default()
            };
            let (general, one) = (run(&spec, false), run(&spec, true));
            assert_eq!(text(&general), text(&one), "case {case}: {spec:?}");
            assert!(one.summary.jobs > 100, "case {case}: {spec:?}");
        }
    }

    /// The fluid loop's runs drawn at random: PS, GPS and FB (with its quantum), the same
    /// sizes, Poisson or grid arrivals (a grid meets completions and FB's regroupings), one or two classes
    /// of different weights, a job count or a time limit, a warm-up by jobs or by time, and
    /// costs the fluid ignores in both loops.
    #[test]
    fn random_fluid_runs_give_the_same_bits_in_both_loops() {
        use rand::{Rng, SeedableRng};
        use schedlab_policy::{ParamValue, Params};

        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let sizes = [
            "exp:1",
            "det:1",
            "det:0.75",
            "hyperexp:1,3",
            "bpareto:1.5,0.1,100",
        ];
        // Grids at a load of 1 at most (an overloaded FB completes almost nothing in its time
        // limit); with sizes det:1, every arrival on the grid of 1 meets a completion.
        let arrivals = [None, Some("det:1"), Some("det:1.25")];
        for case in 0..150 {
            let policy = ["ps", "gps", "fb"][rng.random_range(0..3)];
            let size = sizes[rng.random_range(0..sizes.len())];
            let arrival = arrivals[rng.random_range(0..arrivals.len())];
            let class = |fraction: f64, weight: f64| ClassSpec {
                fraction: Some(fraction),
                size: Some(size.into()),
                weight: Some(weight),
                ..Default::default()
            };
            let classes = if rng.random_bool(0.5) {
                vec![class(1.0, 1.0)]
            } else {
                vec![class(0.6, 3.0), class(0.4, 1.0)]
            };
            let mut params = Params::default();
            if policy == "fb" {
                let q = [0.1, 0.25, 0.5, 2.0][rng.random_range(0..4)];
                params.0.insert("quantum".into(), ParamValue::Num(q));
            }
            let limited = rng.random_bool(0.2);
            let by_time = rng.random_bool(0.3);
            let spec = SimSpec {
                policy: Some(policy.into()),
                params: Some(params),
                load: arrival
                    .is_none()
                    .then(|| [0.3, 0.8, 0.97][rng.random_range(0..3)]),
                arrival: arrival.map(String::from),
                allow_unstable: Some(true),
                jobs: (!limited).then_some(3_000),
                time: limited.then_some(2_000.0),
                drain: limited.then(|| rng.random_bool(0.5)),
                classes: Some(classes),
                warmup: Some(WarmupSpec::Jobs(if by_time { 0 } else { 100 })),
                warmup_time: by_time.then_some(100.0),
                context_switch: rng.random_bool(0.3).then_some(0.01),
                seed: Some(case),
                keep_jobs: Some(true),
                ..Default::default()
            };
            let (general, one) = (run(&spec, false), run(&spec, true));
            assert_eq!(text(&general), text(&one), "case {case}: {spec:?}");
            assert!(one.summary.jobs > 100, "case {case}: {spec:?}");
        }
    }
}
