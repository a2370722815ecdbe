//! Lottery scheduling (Waldspurger & Weihl): each turn, a ticket is drawn at random and its
//! holder runs for up to one quantum. A job that used only a fraction f of its quantum holds
//! compensation tickets (its tickets / f) until it runs again, so short runners keep their share.
//!
//! On several CPUs sharing one queue, plain draws are biased: a job already running cannot be
//! drawn again, so the holders of many tickets get less than their share (30/20/10 on two
//! CPUs gives about 42/37/21 instead of 50/33/17). With `balance`, each draw weighs a job's
//! tickets by exp(lag / quantum), where lag is the service the job is owed (its entitled share
//! of all service given since it became runnable, minus what it received), bounded to a few
//! quanta. Jobs behind are favoured until they catch up, so every job converges to its
//! entitlement. The entitled share is water-filled over the CPUs serving the queue
//! (`serving_cpus`): a job runs on one CPU at a time, so one whose tickets would buy more is
//! entitled to one CPU, and the others share the rest by tickets. (Owing a capped job its
//! uncapped share would leave every lag at its bound: 50,50/10,10/1,1,1,1 on 4 CPUs then gave
//! 50/38/12 instead of the entitled 50/42/8.)

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::{
    Carry, Dequeue, Enqueue, JobId, JobView, ParamDefault, ParamInfo, ParamKind, Params, Policy,
    PolicyInfo, SpecError, Unit,
};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "lottery",
    aliases: &[],
    summary: "Lottery: a random ticket picks who runs each quantum; compensation tickets.",
    params: &[
        ParamInfo {
            name: "quantum",
            kind: ParamKind::Positive,
            unit: Unit::Work,
            default: ParamDefault::Num(10.0),
            help: "longest turn on the CPU",
        },
        ParamInfo {
            name: "compensation",
            kind: ParamKind::Bool,
            unit: Unit::Bool,
            default: ParamDefault::Bool(true),
            help: "inflate the tickets of a job that used part of its quantum",
        },
        ParamInfo {
            name: "balance",
            kind: ParamKind::Bool,
            unit: Unit::Bool,
            default: ParamDefault::Bool(false),
            help: "favour jobs behind their entitlement (tickets, one CPU at most): exact \
                   shares on several CPUs",
        },
    ],
    build,
};

/// Lag is bounded to this many quanta, so old debts do not dominate new draws.
const LAG_QUANTA: f64 = 6.0;

fn build(p: &Params, seed: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(Box::new(Lottery::new(p, seed)))
}

impl Lottery {
    fn new(p: &Params, seed: u64) -> Lottery {
        Lottery {
            quantum: p.number("quantum"),
            compensation: p.flag("compensation"),
            balance: p.flag("balance"),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            held: Vec::new(),
            bonus: Vec::new(),
            tree: Vec::new(),
            n: 0,
            per_ticket: 0.0,
            per_capped: 0.0,
            runnable_tickets: 0.0,
            runnable: 0,
            cpus: f64::INFINITY,
            capped: 0,
            uncapped_tickets: 0.0,
            most: 0.0,
            most_n: 0,
            owed: Vec::new(),
        }
    }
}

/// What `balance` keeps per job: the reading of its clock (`per_ticket`, or `per_capped`
/// while it is capped at one CPU) at which it joined, shifted to bound its lag and when it
/// changes clocks; and the service it received since.
#[derive(Clone, Copy, Default)]
struct Owed {
    tickets: f64,
    joined: f64,
    received: f64,
    capped: bool,
}

pub struct Lottery {
    quantum: f64,
    compensation: bool,
    rng: Xoshiro256PlusPlus,
    /// Tickets each queued slot holds in the draw (0 when not queued).
    held: Vec<f64>,
    /// Compensation factor per slot, reset once the job runs.
    bonus: Vec<f64>,
    /// Fenwick tree over `held`, so a draw costs O(log n).
    tree: Vec<f64>,
    n: usize,
    balance: bool,
    /// Service an uncapped runnable job is entitled to per ticket, summed over the run.
    per_ticket: f64,
    /// Service a job capped at one CPU is entitled to, summed over the run.
    per_capped: f64,
    /// Tickets of the jobs queued or running, and how many they are.
    runnable_tickets: f64,
    runnable: usize,
    /// CPUs serving this queue (infinite until told: no cap).
    cpus: f64,
    /// Runnable jobs capped at one CPU, and the tickets of the others.
    capped: usize,
    uncapped_tickets: f64,
    /// The most tickets a runnable job holds, and how many hold them (a cap needs them).
    most: f64,
    most_n: usize,
    owed: Vec<Owed>,
}

impl Lottery {
    fn grow(&mut self, i: usize) {
        if i >= self.held.len() {
            let size = (i + 1).next_power_of_two();
            let old: Vec<f64> = std::mem::take(&mut self.held);
            self.held = vec![0.0; size];
            self.bonus.resize(size, 1.0);
            self.tree = vec![0.0; size + 1];
            for (j, t) in old.into_iter().enumerate() {
                if t != 0.0 {
                    self.set(j, t);
                }
            }
        }
    }
    fn set(&mut self, i: usize, tickets: f64) {
        let delta = tickets - self.held[i];
        self.held[i] = tickets;
        let mut k = i + 1;
        while k < self.tree.len() {
            self.tree[k] += delta;
            k += k & k.wrapping_neg();
        }
    }
    fn total(&self) -> f64 {
        let mut k = self.held.len();
        let mut sum = 0.0;
        while k > 0 {
            sum += self.tree[k];
            k -= k & k.wrapping_neg();
        }
        sum
    }
    /// The slot holding the ticket at position `u` in [0, total).
    fn find(&self, mut u: f64) -> usize {
        let mut pos = 0;
        let mut step = self.held.len();
        while step > 0 {
            let next = pos + step;
            if next < self.tree.len() && self.tree[next] <= u {
                u -= self.tree[next];
                pos = next;
            }
            step >>= 1;
        }
        pos
    }
}

impl Lottery {
    /// The service job `i` is entitled to since it joined (by its clock's reading).
    #[inline]
    fn entitled(&self, i: usize) -> f64 {
        let o = &self.owed[i];
        if o.capped {
            self.per_capped - o.joined
        } else {
            o.tickets * (self.per_ticket - o.joined)
        }
    }

    /// Sets job `i`'s joining point so that it is entitled to `e` on its clock.
    #[inline]
    fn set_entitled(&mut self, i: usize, e: f64) {
        let (per_ticket, per_capped) = (self.per_ticket, self.per_capped);
        let o = &mut self.owed[i];
        o.joined = if o.capped {
            per_capped - e
        } else {
            per_ticket - e / o.tickets
        };
    }

    /// The job's lag, bounded to ±LAG_QUANTA quanta (the bound moves its joining point).
    #[inline]
    fn lag(&mut self, i: usize) -> f64 {
        let cap = LAG_QUANTA * self.quantum;
        let received = self.owed[i].received;
        let lag = self.entitled(i) - received;
        let bounded = lag.clamp(-cap, cap);
        if bounded != lag {
            self.set_entitled(i, received + bounded);
        }
        bounded
    }

    /// Water-fills the CPUs over the runnable jobs: a job whose tickets would buy more than
    /// one CPU of those the capped jobs leave is capped at one; the others share the rest by
    /// tickets. Capping raises what a ticket buys, so the capped set only grows until it
    /// holds (a pass per round, usually one or two, without allocating). A job that changes
    /// clocks keeps what it is entitled to so far.
    fn refill(&mut self) {
        let share_cpus = self.cpus.min(self.runnable as f64);
        let (mut capped, mut rest) = (0usize, self.runnable_tickets);
        loop {
            // A ticket buys (C - k) / rest CPUs: who is above one CPU at that price?
            let (mut k, mut r) = (0usize, self.runnable_tickets);
            for o in self.owed.iter().filter(|o| o.tickets > 0.0) {
                if rest > 0.0 && o.tickets * (share_cpus - capped as f64) > rest {
                    k += 1;
                    r -= o.tickets;
                }
            }
            // The set only grows (in exact arithmetic): stop when it does not.
            if k <= capped {
                break;
            }
            (capped, rest) = (k, r);
        }
        if capped > 0 || self.capped > 0 {
            let price = (share_cpus - capped as f64, rest);
            for i in 0..self.owed.len() {
                let o = self.owed[i];
                let now_capped = o.tickets > 0.0 && price.1 > 0.0 && o.tickets * price.0 > price.1;
                if o.tickets > 0.0 && o.capped != now_capped {
                    let e = self.entitled(i);
                    self.owed[i].capped = now_capped;
                    self.set_entitled(i, e);
                }
            }
        }
        self.capped = capped;
        self.uncapped_tickets = rest;
    }

    /// A draw weighted by tickets × compensation × exp(lag / quantum): a linear pass over the
    /// queued jobs, since every weight changes as service is given. A queued job capped at
    /// one CPU is entitled to run whenever a CPU is free: it goes first, without a draw (the
    /// most owed of them), so that it does not start every job of a closed loop behind.
    fn draw_balanced(&mut self) -> usize {
        if self.capped > 0 {
            let mut first: Option<(usize, f64)> = None;
            for i in 0..self.held.len() {
                if self.held[i] > 0.0 && self.owed.get(i).is_some_and(|o| o.capped) {
                    let lag = self.lag(i);
                    if first.is_none_or(|(_, best)| lag > best) {
                        first = Some((i, lag));
                    }
                }
            }
            if let Some((i, _)) = first {
                return i;
            }
        }
        let mut weights = Vec::with_capacity(self.n);
        let mut total = 0.0;
        for i in 0..self.held.len() {
            if self.held[i] > 0.0 {
                let w = self.held[i] * (self.lag(i) / self.quantum).exp();
                total += w;
                weights.push((i, w));
            }
        }
        let mut u = self.rng.random::<f64>() * total;
        for &(i, w) in &weights {
            if u < w {
                return i;
            }
            u -= w;
        }
        weights.last().expect("n > 0").0
    }

    fn join(&mut self, i: usize, tickets: f64) {
        if i >= self.owed.len() {
            self.owed.resize(i + 1, Owed::default());
        }
        let left = self.owed[i].tickets == 0.0;
        self.owed[i] = Owed {
            tickets,
            joined: self.per_ticket,
            received: 0.0,
            capped: false,
        };
        self.runnable_tickets += tickets;
        self.runnable += usize::from(left);
        if tickets > self.most {
            (self.most, self.most_n) = (tickets, 1);
        } else if tickets == self.most {
            self.most_n += 1;
        }
        self.caps_may_change();
    }

    fn leave(&mut self, i: usize) {
        if let Some(o) = self.owed.get_mut(i) {
            let tickets = o.tickets;
            if tickets > 0.0 {
                self.runnable -= 1;
            }
            self.runnable_tickets = (self.runnable_tickets - tickets).max(0.0);
            // Left: a second leave (a world that reports twice) takes nothing more.
            o.tickets = 0.0;
            if tickets > 0.0 && tickets == self.most {
                self.most_n -= 1;
                if self.most_n == 0 {
                    self.most = self.owed.iter().map(|o| o.tickets).fold(0.0, f64::max);
                    self.most_n = self.owed.iter().filter(|o| o.tickets == self.most).count();
                }
            }
            self.caps_may_change();
        }
    }

    /// The runnable set changed: caps are looked at again when the CPUs are known and more
    /// than one (on one CPU no job's tickets buy more than it) and the largest holder's
    /// tickets would buy more than one, or when there are caps to undo.
    fn caps_may_change(&mut self) {
        // Without caps so far, none binds while the largest holder buys at most one CPU.
        let none_bind = self.capped == 0
            && self.most * self.cpus.min(self.runnable as f64) <= self.runnable_tickets;
        if self.capped > 0 || (self.cpus.is_finite() && self.cpus > 1.0 && !none_bind) {
            self.refill();
        } else {
            self.capped = 0;
            self.uncapped_tickets = self.runnable_tickets;
        }
    }
}

impl Policy for Lottery {
    fn name(&self) -> &'static str {
        "lottery"
    }
    fn enqueue(&mut self, job: &JobView, _: f64, why: Enqueue<'_>) {
        let i = job.id.index();
        self.grow(i);
        if self.balance
            && matches!(
                why,
                Enqueue::Arrival | Enqueue::Wakeup | Enqueue::Migrated(_)
            )
        {
            self.join(i, job.tickets);
        }
        let tickets = job.tickets * self.bonus[i];
        self.set(i, tickets);
        self.n += 1;
    }
    fn dequeue(&mut self, job: &JobView, _: f64, why: Dequeue) -> Carry {
        let i = job.id.index();
        if self.held.get(i).is_some_and(|t| *t > 0.0) {
            self.set(i, 0.0);
            self.n -= 1;
        }
        if self.balance {
            self.leave(i);
        }
        if why != Dequeue::Sleep {
            // Gone from here: the slot's next job starts without compensation.
            if let Some(b) = self.bonus.get_mut(i) {
                *b = 1.0;
            }
        }
        Carry::NONE
    }
    fn pick_next(&mut self, _: f64) -> Option<JobId> {
        if self.n == 0 {
            return None;
        }
        let i = if self.balance {
            self.draw_balanced()
        } else {
            let u = self.rng.random::<f64>() * self.total();
            let i = self.find(u);
            // Rounding can land on an empty slot at the very end; take the last holder.
            if i >= self.held.len() || self.held[i] == 0.0 {
                self.held.iter().rposition(|t| *t > 0.0).expect("n > 0")
            } else {
                i
            }
        };
        self.set(i, 0.0);
        self.bonus[i] = 1.0;
        self.n -= 1;
        Some(JobId(i as u32))
    }
    fn slice(&self, _: &JobView, _: f64) -> Option<f64> {
        Some(self.quantum)
    }
    fn charge(&mut self, job: &JobView, ran: f64, _: f64) {
        if self.compensation && job.remaining > 0.0 && ran > 0.0 && ran < self.quantum {
            self.bonus[job.id.index()] = self.quantum / ran;
        }
        if self.balance && self.runnable_tickets > 0.0 {
            if self.capped == 0 {
                self.per_ticket += ran / self.runnable_tickets;
            } else {
                // Of `ran`, a capped job is entitled to 1/C (C = CPUs in use), an uncapped
                // one to its tickets' part of what the capped leave: (C - k) / C.
                let share_cpus = self.cpus.min(self.runnable as f64);
                let k = self.capped as f64;
                self.per_capped += ran / share_cpus;
                if self.uncapped_tickets > 0.0 {
                    self.per_ticket +=
                        ran * (share_cpus - k) / (share_cpus * self.uncapped_tickets);
                }
            }
            self.owed[job.id.index()].received += ran;
        }
    }
    fn len(&self) -> usize {
        self.n
    }
    fn entitlement(&self, job: &JobView) -> f64 {
        job.tickets
    }
    fn serving_cpus(&mut self, cpus: usize) {
        self.cpus = cpus as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ParamValue;

    #[test]
    fn draws_follow_tickets() {
        let mut p = crate::build("lottery", &Params::new(), 7).unwrap();
        let mut jobs: Vec<JobView> = [30.0, 20.0, 10.0]
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut j = JobView::new(JobId(i as u32), 0.0, 1e9);
                j.tickets = *t;
                j
            })
            .collect();
        let mut wins = [0usize; 3];
        for j in &jobs {
            p.enqueue(j, 0.0, Enqueue::Arrival);
        }
        let draws = 60_000;
        for _ in 0..draws {
            let id = p.pick_next(0.0).unwrap();
            wins[id.index()] += 1;
            let j = &mut jobs[id.index()];
            p.charge(j, 10.0, 0.0);
            p.enqueue(j, 0.0, Enqueue::Expired);
        }
        // Binomial standard error at n=60000 is at most 0.2 points; allow 4 sigma.
        for (w, share) in wins.iter().zip([0.5, 1.0 / 3.0, 1.0 / 6.0]) {
            let got = *w as f64 / draws as f64;
            assert!((got - share).abs() < 0.008, "{got} vs {share}");
        }
    }

    #[test]
    fn balance_caps_at_one_cpu_the_jobs_whose_tickets_would_buy_more() {
        // Study 004's test 4: 50, 50, 10, 10, 1, 1, 1, 1 tickets. On 4 CPUs the two 50s would
        // buy 4 x 50/124 = 1.6 CPUs each: capped at one, the other six share 2 CPUs by their
        // 24 tickets (10 x 2/24 = 0.83 each: no cap). On 5 CPUs the 10s are capped too
        // (10 x 3/24 = 1.25), and the four 1s share the last CPU. On 2 CPUs nothing is
        // capped (50 x 2/124 = 0.81), and on one CPU nothing can be.
        let tickets = [50.0, 50.0, 10.0, 10.0, 1.0, 1.0, 1.0, 1.0];
        for (cpus, capped, rest) in [(4, 2, 24.0), (5, 4, 4.0), (2, 0, 124.0), (1, 0, 124.0)] {
            let params = Params::new().with("balance", ParamValue::Bool(true));
            let mut p = Lottery::new(&params.with_defaults(INFO.params), 3);
            p.serving_cpus(cpus);
            for (i, t) in tickets.iter().enumerate() {
                let mut j = JobView::new(JobId(i as u32), 0.0, 1e9);
                j.tickets = *t;
                p.enqueue(&j, 0.0, Enqueue::Arrival);
            }
            assert_eq!(
                (p.capped, p.uncapped_tickets),
                (capped, rest),
                "{cpus} CPUs"
            );
            // A capped job goes first: the next picks are the capped ones, most owed first.
            for _ in 0..capped {
                let id = p.pick_next(0.0).unwrap();
                assert!(tickets[id.index()] >= 10.0 && p.owed[id.index()].capped);
            }
        }
    }

    #[test]
    fn each_draw_picks_the_holder_of_the_drawn_ticket_with_compensation() {
        // Job 0 holds 3 tickets and always uses its whole quantum; job 1 holds 1 ticket and
        // runs a quarter quantum each turn (it would block for I/O), so until it runs again it
        // holds 1 / 0.25 = 4 compensation tickets. Ticket ranges are laid out in slot order:
        // job 0 owns [0, 3), job 1 [3, 3 + t1). The same seeded generator replays the draws.
        let one = Params::new().with("quantum", ParamValue::Num(1.0));
        let mut p = crate::build("lottery", &one, 11).unwrap();
        let mut replay = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut jobs: Vec<JobView> = [3.0, 1.0]
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut j = JobView::new(JobId(i as u32), 0.0, 1e9);
                j.tickets = *t;
                j
            })
            .collect();
        for j in &jobs {
            p.enqueue(j, 0.0, Enqueue::Arrival);
        }
        let mut job1_tickets = 1.0;
        let mut wins = [0; 2];
        for _ in 0..200 {
            let u = replay.random::<f64>() * (3.0 + job1_tickets);
            let expected = if u < 3.0 { 0 } else { 1 };
            let got = p.pick_next(0.0).unwrap().index();
            assert_eq!(got, expected, "draw {u}");
            wins[got] += 1;
            let ran = if got == 0 { 1.0 } else { 0.25 };
            let j = &mut jobs[got];
            j.attained += ran;
            j.remaining -= ran;
            p.charge(j, ran, 0.0);
            p.enqueue(j, 0.0, Enqueue::Expired);
            if got == 1 {
                job1_tickets = 4.0;
            }
        }
        // Both kinds of draw happened, so the test saw compensation at work.
        assert!(wins[0] > 20 && wins[1] > 20, "{wins:?}");
    }
}
