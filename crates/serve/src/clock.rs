//! One clock for the server and the load generator: CLOCK_MONOTONIC in nanoseconds.
//!
//! Both run on one machine, often in two processes; CLOCK_MONOTONIC is system-wide, so a time
//! stamped by the server and one stamped by the load generator can be subtracted directly. That
//! is what lets the per-request table put the server's queue wait and first run on the client's
//! time line.

/// Nanoseconds of CLOCK_MONOTONIC.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`;
    // CLOCK_MONOTONIC always exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Milliseconds between two stamps (negative when `t` is before `origin`).
pub fn ms_since(origin: u64, t: u64) -> f64 {
    (t as i128 - origin as i128) as f64 / 1e6
}

/// Asks the kernel to wake this thread within `ns` of a timer's expiry (the default slack is
/// 50 us, which would blur emulated costs and send times of tens of microseconds).
pub fn tight_timer_slack(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long by value and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_in_nanoseconds() {
        let a = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = now_ns();
        let ms = ms_since(a, b);
        assert!((5.0..1000.0).contains(&ms), "{ms}");
        assert!(ms_since(b, a) < 0.0);
    }
}
