//! The emulated service cost: a fixed part per request plus a part per byte, spent packet by
//! packet by sleeping or spinning.
//!
//! On loopback, serving 1 KiB costs about as much as serving 100 KiB: the per-request overhead
//! dominates and a size-based policy has nothing to work with. Both studies therefore added a
//! delay proportional to the file size (study 001: size/10000 ms, which is `0ms+0.1ms/KB`).
//! `--cost 0.05ms+10us/KiB` makes the model explicit: a request of B bytes costs `fixed + B * per_byte` ms of worker time, spent before
//! each packet is written (the fixed part with the first packet).

use std::os::fd::RawFd;

use crate::clock::now_ns;
use schedlab_model::SpecError;

pub const SYNTAX: &str = "TIME[+TIME/SIZE], e.g. 0.05ms+10us/KiB, 0ms+0.1ms/KiB, 1ms, 2us/KiB or \
none; TIME in ns, us, ms or s; SIZE in B, KB, KiB, MB or MiB";

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Milliseconds per request (spent with its first packet).
    pub fixed_ms: f64,
    /// Milliseconds per byte.
    pub per_byte_ms: f64,
}

/// How emulated cost is spent: sleeping leaves the CPU to others (a disk-bound server);
/// spinning burns it (a CPU-bound one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CostMode {
    #[default]
    Sleep,
    Spin,
}

impl CostMode {
    pub fn parse(text: &str) -> Result<CostMode, SpecError> {
        match text.to_ascii_lowercase().as_str() {
            "sleep" => Ok(CostMode::Sleep),
            "spin" => Ok(CostMode::Spin),
            _ => Err(SpecError {
                key: "cost_mode".into(),
                value: text.into(),
                allowed: "sleep or spin".into(),
            }),
        }
    }
}

fn time_unit_ms(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1e-6,
        "us" | "µs" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        _ => return None,
    })
}

fn size_unit_bytes(unit: &str) -> Option<f64> {
    Some(match unit {
        "b" | "byte" => 1.0,
        "kb" => 1e3,
        "kib" => 1024.0,
        "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        _ => return None,
    })
}

impl Cost {
    pub const ZERO: Cost = Cost {
        fixed_ms: 0.0,
        per_byte_ms: 0.0,
    };

    /// Parses `0.05ms+10us/KiB`; errors name the key `cost`.
    pub fn parse(text: &str) -> Result<Cost, SpecError> {
        let bad = |why: &str| SpecError {
            key: "cost".into(),
            value: text.into(),
            allowed: format!("a cost {SYNTAX} ({why})"),
        };
        let t = text.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("none") || t == "0" {
            return Ok(Cost::ZERO);
        }
        let mut cost = Cost::ZERO;
        let (mut fixed_seen, mut per_seen) = (false, false);
        for term in t.split('+') {
            let term = term.trim();
            let (time, size) = match term.split_once('/') {
                Some((a, b)) => (a.trim(), Some(b.trim().to_ascii_lowercase())),
                None => (term, None),
            };
            let split = time
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-'))
                .ok_or_else(|| bad(&format!("'{term}' has no time unit")))?;
            let (num, unit) = time.split_at(split);
            let value: f64 = num.parse().map_err(|_| {
                bad(&if num.is_empty() {
                    format!("'{term}' does not start with a number")
                } else {
                    format!("'{num}' is not a number")
                })
            })?;
            if !(value >= 0.0 && value.is_finite()) {
                return Err(bad("times must be >= 0"));
            }
            let ms = value * time_unit_ms(unit.trim()).ok_or_else(|| bad("unknown time unit"))?;
            match size {
                None if !fixed_seen => {
                    fixed_seen = true;
                    cost.fixed_ms = ms;
                }
                Some(s) if !per_seen => {
                    per_seen = true;
                    let (n, u) = match s.find(|c: char| c.is_ascii_alphabetic()) {
                        Some(0) | None => ("1", s.as_str()),
                        Some(i) => s.split_at(i),
                    };
                    let n: f64 = n.parse().map_err(|_| bad("bad size"))?;
                    let bytes = n * size_unit_bytes(u).ok_or_else(|| bad("unknown size unit"))?;
                    if bytes <= 0.0 {
                        return Err(bad("the size after / must be > 0"));
                    }
                    cost.per_byte_ms = ms / bytes;
                }
                _ => return Err(bad("at most one fixed and one per-size term")),
            }
        }
        Ok(cost)
    }

    pub fn is_zero(&self) -> bool {
        self.fixed_ms == 0.0 && self.per_byte_ms == 0.0
    }

    /// Uncontended service time of a whole request of `bytes` bytes, in ms.
    pub fn of_request(&self, bytes: u64) -> f64 {
        self.fixed_ms + bytes as f64 * self.per_byte_ms
    }

    /// Cost of one packet in ns; `first` adds the fixed part.
    pub fn of_packet_ns(&self, bytes: u64, first: bool) -> u64 {
        let ms = bytes as f64 * self.per_byte_ms + if first { self.fixed_ms } else { 0.0 };
        (ms * 1e6).round() as u64
    }

    /// The canonical text form, e.g. `0.05ms+0.009765625us/B`.
    pub fn written(&self) -> String {
        format!("{}ms+{}ms/B", self.fixed_ms, self.per_byte_ms)
    }
}

/// The peer went away while cost was being spent.
#[derive(Debug, PartialEq, Eq)]
pub struct Disconnected;

/// Spends cost up to the absolute CLOCK_MONOTONIC time `deadline_ns`, watching `fd` for a
/// hang-up so a client that leaves frees its worker at once, not after the emulated delay.
pub fn spend_until(mode: CostMode, deadline_ns: u64, fd: RawFd) -> Result<(), Disconnected> {
    match mode {
        CostMode::Sleep => loop {
            let now = now_ns();
            if now >= deadline_ns {
                return Ok(());
            }
            if hung_up(fd, deadline_ns - now) {
                return Err(Disconnected);
            }
        },
        CostMode::Spin => {
            let mut next_check = 0;
            loop {
                let now = now_ns();
                if now >= deadline_ns {
                    return Ok(());
                }
                if now >= next_check {
                    if hung_up(fd, 0) {
                        return Err(Disconnected);
                    }
                    next_check = now + 500_000;
                }
                std::hint::spin_loop();
            }
        }
    }
}

/// Waits up to `timeout_ns` for the peer to hang up; true if it did.
pub fn hung_up(fd: RawFd, timeout_ns: u64) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd and a valid timespec, both live for the call; no signal mask.
    let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    n > 0 && pfd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fixed_plus_per_size() {
        let c = Cost::parse("0.05ms+10us/KiB").unwrap();
        assert!((c.fixed_ms - 0.05).abs() < 1e-12);
        assert!((c.per_byte_ms - 0.01 / 1024.0).abs() < 1e-15);
        // 100 KiB: 0.05 + 100 * 0.01 = 1.05 ms.
        assert!((c.of_request(100 * 1024) - 1.05).abs() < 1e-9);
        let study = Cost::parse("0ms+0.1ms/KB").unwrap();
        // Study 001: size/10000 ms; 594,000 bytes -> 59.4 ms.
        assert!((study.of_request(594_000) - 59.4).abs() < 1e-9);
        assert_eq!(Cost::parse("none").unwrap(), Cost::ZERO);
        assert_eq!(Cost::parse("2us/B").unwrap().per_byte_ms, 0.002);
        assert_eq!(Cost::parse("1s").unwrap().fixed_ms, 1000.0);
        assert_eq!(Cost::parse("1ms/4KiB").unwrap().per_byte_ms, 1.0 / 4096.0);
        assert_eq!(c.of_packet_ns(1024, true), 60_000);
        assert_eq!(c.of_packet_ns(1024, false), 10_000);
    }

    #[test]
    fn rejects_bad_text_naming_the_key() {
        for bad in [
            "5",
            "1xs",
            "1ms+2ms",
            "1ms/2parsecs",
            "-1ms",
            "ms",
            "1ms/0KiB",
        ] {
            let e = Cost::parse(bad).unwrap_err();
            assert_eq!(e.key, "cost", "{bad}");
            assert_eq!(e.value, bad);
        }
        assert_eq!(CostMode::parse("nap").unwrap_err().key, "cost_mode");
        // A word says what it lacks, after what a cost is.
        let e = Cost::parse("fast").unwrap_err();
        assert!(
            e.allowed.starts_with("a cost TIME[+TIME/SIZE]"),
            "{}",
            e.allowed
        );
        assert!(
            e.allowed.ends_with("('fast' does not start with a number)"),
            "{}",
            e.allowed
        );
    }

    #[test]
    fn sleeping_reaches_the_deadline_and_sees_a_hang_up() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        let start = now_ns();
        assert_eq!(
            spend_until(CostMode::Sleep, start + 3_000_000, a.as_raw_fd()),
            Ok(())
        );
        assert!(now_ns() >= start + 3_000_000);
        assert_eq!(
            spend_until(CostMode::Spin, now_ns() + 1_000_000, a.as_raw_fd()),
            Ok(())
        );
        drop(b);
        let t = now_ns();
        assert_eq!(
            spend_until(CostMode::Sleep, t + 5_000_000_000, a.as_raw_fd()),
            Err(Disconnected)
        );
        // It returned on the hang-up, long before the 5 s deadline.
        assert!(now_ns() - t < 1_000_000_000);
    }
}
