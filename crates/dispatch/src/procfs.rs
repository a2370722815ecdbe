//! Readers of the kernel's own counters: `/proc/<pid>/schedstat`, `/proc/<pid>/sched`,
//! `/proc/<pid>/stat` and `/proc/stat`. A counter the kernel does not provide is `None`, and the
//! run reports why; it is never read as 0.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::sys::{self, Fd};

/// One reading of a task's counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// Time on a CPU (schedstat field 1), ns.
    pub cpu_ns: Option<u64>,
    /// Time runnable but waiting on a run queue (schedstat field 2), ns.
    pub run_delay_ns: Option<u64>,
    /// Number of times it was given a CPU (schedstat field 3).
    pub slices: Option<u64>,
    pub nvcsw: Option<u64>,
    pub nivcsw: Option<u64>,
    /// `se.nr_migrations` of /proc/<pid>/sched.
    pub migrations: Option<u64>,
    /// Longest single run-queue wait (schedstats only), ns.
    pub wait_max_ns: Option<u64>,
    /// Wake-ups (schedstats only).
    pub wakeups: Option<u64>,
    /// utime and stime of /proc/<pid>/stat, clock ticks.
    pub utime_ticks: Option<u64>,
    pub stime_ticks: Option<u64>,
    /// CPU it last ran on.
    pub last_cpu: Option<i64>,
}

/// Why each missing counter is missing, keyed by the counter's name in the results.
pub type Missing = BTreeMap<String, String>;

/// Open descriptors on one process's /proc files (kept open: a pread regenerates the text).
pub struct ProcFiles {
    pub schedstat: Option<Fd>,
    pub sched: Option<Fd>,
    pub stat: Option<Fd>,
}

/// Counters the run pretends the kernel lacks (to test the missing-counter path end to end).
#[derive(Clone, Debug, Default)]
pub struct Hide {
    pub schedstat: bool,
    pub sched: bool,
}

impl Hide {
    pub fn from_names(names: &[String]) -> Hide {
        Hide {
            schedstat: names.iter().any(|n| n == "schedstat"),
            sched: names.iter().any(|n| n == "sched"),
        }
    }
}

impl ProcFiles {
    pub fn open(pid: i32, hide: &Hide) -> ProcFiles {
        let f = |name: &str| sys::open(&format!("/proc/{pid}/{name}"), libc::O_RDONLY, 0).ok();
        ProcFiles {
            schedstat: if hide.schedstat { None } else { f("schedstat") },
            sched: if hide.sched { None } else { f("sched") },
            stat: f("stat"),
        }
    }

    /// Reads everything; records in `missing` why a counter could not be had.
    pub fn read(&self, buf: &mut Vec<u8>, missing: &mut Missing) -> Counters {
        if buf.len() < 16384 {
            buf.resize(16384, 0);
        }
        let mut c = Counters::default();
        match self
            .schedstat
            .as_ref()
            .and_then(|fd| sys::pread_text(fd, buf))
        {
            Some(text) => parse_schedstat(text, &mut c),
            None => {
                let why = "/proc/<pid>/schedstat is not available (kernel without \
                           CONFIG_SCHED_INFO, or hidden by pretend_missing)";
                for k in ["cpu_time", "runqueue_wait", "slices"] {
                    missing.entry(k.into()).or_insert_with(|| why.into());
                }
            }
        }
        match self.sched.as_ref().and_then(|fd| sys::pread_text(fd, buf)) {
            Some(text) => parse_sched(text, &mut c, missing),
            None => {
                let why = "/proc/<pid>/sched is not available (kernel without \
                           CONFIG_SCHED_DEBUG, or hidden by pretend_missing)";
                for k in ["migrations", "wait_max", "wakeups"] {
                    missing.entry(k.into()).or_insert_with(|| why.into());
                }
            }
        }
        if let Some(text) = self.stat.as_ref().and_then(|fd| sys::pread_text(fd, buf)) {
            parse_stat(text, &mut c);
        }
        c
    }
}

pub fn parse_schedstat(text: &str, c: &mut Counters) {
    let mut it = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    c.cpu_ns = it.next().flatten();
    c.run_delay_ns = it.next().flatten();
    c.slices = it.next().flatten();
}

/// `key : value` lines; values in ms with a fraction are turned into ns.
pub fn parse_sched(text: &str, c: &mut Counters, missing: &mut Missing) {
    let mut wait_max = None;
    let mut wakeups = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        let last = key.rsplit('.').next().unwrap_or(key);
        match (key, last) {
            ("se.nr_migrations", _) => c.migrations = value.parse().ok(),
            ("nr_voluntary_switches", _) => c.nvcsw = value.parse().ok(),
            ("nr_involuntary_switches", _) => c.nivcsw = value.parse().ok(),
            (_, "wait_max") => wait_max = ms_to_ns(value),
            (_, "nr_wakeups") => wakeups = value.parse().ok(),
            _ => {}
        }
    }
    c.wait_max_ns = wait_max;
    c.wakeups = wakeups;
    if c.migrations.is_none() {
        missing
            .entry("migrations".into())
            .or_insert_with(|| "/proc/<pid>/sched has no se.nr_migrations".into());
    }
    let why = "/proc/<pid>/sched has no schedstats fields (kernel without CONFIG_SCHEDSTATS, \
               or sysctl kernel.sched_schedstats = 0)";
    if wait_max.is_none() {
        missing
            .entry("wait_max".into())
            .or_insert_with(|| why.into());
    }
    if wakeups.is_none() {
        missing
            .entry("wakeups".into())
            .or_insert_with(|| why.into());
    }
}

fn ms_to_ns(v: &str) -> Option<u64> {
    let (whole, frac) = v.split_once('.').unwrap_or((v, "0"));
    let ms: u64 = whole.trim().parse().ok()?;
    let mut frac = frac.trim().to_string();
    frac.truncate(6);
    while frac.len() < 6 {
        frac.push('0');
    }
    let ns: u64 = frac.parse().ok()?;
    Some(ms * 1_000_000 + ns)
}

/// Fields of /proc/<pid>/stat after the command name: state, utime, stime, processor.
pub fn parse_stat(text: &str, c: &mut Counters) {
    let Some(close) = text.rfind(')') else { return };
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] is field 3 (state); field k is rest[k - 3].
    c.utime_ticks = rest.get(11).and_then(|v| v.parse().ok());
    c.stime_ticks = rest.get(12).and_then(|v| v.parse().ok());
    c.last_cpu = rest.get(36).and_then(|v| v.parse().ok());
}

/// State letter and CPU of a process from /proc/<pid>/stat (for placement sampling).
pub fn state_and_cpu(text: &str) -> Option<(u8, i64)> {
    let close = text.rfind(')')?;
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let state = *rest.first()?.as_bytes().first()?;
    let cpu = rest.get(36)?.parse().ok()?;
    Some((state, cpu))
}

/// Per-CPU lines of /proc/stat, in USER_HZ ticks: user nice system idle iowait irq softirq steal.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CpuTimes {
    pub cpu: Vec<String>,
    pub user: Vec<u64>,
    pub nice: Vec<u64>,
    pub system: Vec<u64>,
    pub idle: Vec<u64>,
    pub iowait: Vec<u64>,
    pub irq: Vec<u64>,
    pub softirq: Vec<u64>,
    pub steal: Vec<u64>,
}

pub fn read_cpu_times() -> CpuTimes {
    let mut t = CpuTimes::default();
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return t;
    };
    for line in text.lines().filter(|l| l.starts_with("cpu")) {
        let mut f = line.split_whitespace();
        let name = f.next().unwrap_or("").to_string();
        let v: Vec<u64> = f.map(|x| x.parse().unwrap_or(0)).collect();
        let g = |i: usize| v.get(i).copied().unwrap_or(0);
        t.cpu.push(name);
        t.user.push(g(0));
        t.nice.push(g(1));
        t.system.push(g(2));
        t.idle.push(g(3));
        t.iowait.push(g(4));
        t.irq.push(g(5));
        t.softirq.push(g(6));
        t.steal.push(g(7));
    }
    t
}

/// The first line of /proc/<pid>/autogroup and the cgroup paths of a process.
pub fn groups_of(pid: i32) -> (Option<String>, Option<String>) {
    let autogroup = std::fs::read_to_string(format!("/proc/{pid}/autogroup"))
        .ok()
        .map(|s| s.trim().to_string());
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()
        .map(|s| s.trim().replace('\n', "; "));
    (autogroup, cgroup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_fields() {
        let mut c = Counters::default();
        parse_schedstat("51125374 80469 7\n", &mut c);
        assert_eq!(c.cpu_ns, Some(51_125_374));
        assert_eq!(c.run_delay_ns, Some(80_469));
        assert_eq!(c.slices, Some(7));
    }

    #[test]
    fn sched_without_schedstats_reports_them_missing() {
        let text = "cat (11146, #threads: 1)\n----\nse.exec_start   :   1182666.866100\n\
                    se.sum_exec_runtime   :   0.138415\nse.nr_migrations   :   3\n\
                    nr_switches   :   9\nnr_voluntary_switches   :   4\n\
                    nr_involuntary_switches   :   5\n";
        let mut c = Counters::default();
        let mut missing = Missing::new();
        parse_sched(text, &mut c, &mut missing);
        assert_eq!(c.migrations, Some(3));
        assert_eq!(c.nvcsw, Some(4));
        assert_eq!(c.nivcsw, Some(5));
        assert_eq!(c.wait_max_ns, None);
        assert!(missing["wait_max"].contains("CONFIG_SCHEDSTATS"));
        assert!(!missing.contains_key("migrations"));
    }

    #[test]
    fn sched_with_schedstats() {
        let text = "se.nr_migrations : 0\nstats.wait_max : 12.500250\nstats.nr_wakeups : 17\n\
                    nr_voluntary_switches : 1\nnr_involuntary_switches : 2\n";
        let mut c = Counters::default();
        let mut missing = Missing::new();
        parse_sched(text, &mut c, &mut missing);
        assert_eq!(c.wait_max_ns, Some(12_500_250));
        assert_eq!(c.wakeups, Some(17));
        assert!(missing.is_empty(), "{missing:?}");
    }

    #[test]
    fn stat_fields_after_a_command_with_spaces() {
        // Field 3 is the state; 14 and 15 utime and stime; 39 the processor.
        let mut fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        fields[0] = "R".into();
        let text = format!("42 (a b) c) {}", fields.join(" "));
        let mut c = Counters::default();
        parse_stat(&text, &mut c);
        assert_eq!(c.utime_ticks, Some(14));
        assert_eq!(c.stime_ticks, Some(15));
        assert_eq!(c.last_cpu, Some(39));
        assert_eq!(state_and_cpu(&text), Some((b'R', 39)));
    }

    #[test]
    fn own_process_counters_are_present_here() {
        let files = ProcFiles::open(sys::getpid(), &Hide::default());
        let mut buf = Vec::new();
        let mut missing = Missing::new();
        let c = files.read(&mut buf, &mut missing);
        // Every Linux this crate supports has schedstat (SCHED_INFO) and nr_migrations.
        assert!(c.cpu_ns.unwrap() > 0);
        assert!(c.migrations.is_some());
        assert!(c.last_cpu.is_some());
        let hidden = ProcFiles::open(sys::getpid(), &Hide::from_names(&["schedstat".into()]));
        let mut missing = Missing::new();
        let c = hidden.read(&mut buf, &mut missing);
        assert_eq!(c.cpu_ns, None);
        assert!(missing.contains_key("runqueue_wait"));
    }
}
