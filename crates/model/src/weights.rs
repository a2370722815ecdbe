//! The kernel's weights: CFS/EEVDF shares come from nice values through one table
//! (`kernel/sched/core.c`, `sched_prio_to_weight`), 1024 at nice 0, about 1.25x per step.

pub const NICE_TO_WEIGHT: [f64; 40] = [
    88761.0, 71755.0, 56483.0, 46273.0, 36291.0, 29154.0, 23254.0, 18705.0, 14949.0, 11916.0,
    9548.0, 7620.0, 6100.0, 4904.0, 3906.0, 3121.0, 2501.0, 1991.0, 1586.0, 1277.0, 1024.0, 820.0,
    655.0, 526.0, 423.0, 335.0, 272.0, 215.0, 172.0, 137.0, 110.0, 87.0, 70.0, 56.0, 45.0, 36.0,
    29.0, 23.0, 18.0, 15.0,
];

/// The weight of nice 0.
pub const NICE_0_LOAD: f64 = 1024.0;

/// The weight of a SCHED_IDLE task (`WEIGHT_IDLEPRIO`).
pub const WEIGHT_IDLEPRIO: f64 = 3.0;

/// The kernel's weight of a nice value (clamped to -20..=19).
pub fn kernel_weight(nice: f64) -> f64 {
    let i = (nice.round().clamp(-20.0, 19.0) + 20.0) as usize;
    NICE_TO_WEIGHT[i]
}

/// Weight of a nice value relative to nice 0 = 1, as schedlab's classes and policies use it.
pub fn nice_to_weight(nice: f64) -> f64 {
    kernel_weight(nice) / NICE_0_LOAD
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_are_about_ten_percent_of_cpu() {
        assert_eq!(nice_to_weight(0.0), 1.0);
        // Two tasks one nice level apart: the lighter gets about 45% (the kernel's "10%").
        let share = nice_to_weight(1.0) / (1.0 + nice_to_weight(1.0));
        assert!((share - 820.0 / 1844.0).abs() < 1e-12);
        assert_eq!(kernel_weight(-25.0), 88761.0);
        assert_eq!(kernel_weight(30.0), 15.0);
    }
}
