//! How a machine's load settles over time (study 002): from runnable jobs per CPU sampled at a
//! fixed period, the split before and after a pinned start is lifted, and how long the
//! balancer took to reach the balanced split of Linux.1.a (⌈n/m⌉ tasks on n mod m CPUs,
//! ⌊n/m⌋ on the others). One definition for every world: the simulator feeds its
//! `load_sample` series, the os world its placement samples.

use serde::{Deserialize, Serialize};

/// Runnable jobs (queued or running) per CPU at sampling instants, and when the tasks became
/// free to move.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadSamples {
    /// Sampling instants (ms), ascending.
    pub time: Vec<f64>,
    /// Per instant, the runnable jobs of each CPU.
    pub runnable: Vec<Vec<u32>>,
    /// When the pinned start was lifted (ms; 0: free from the start).
    pub release: f64,
    /// Samples after this instant (ms) are left out: the end of the contended run.
    pub end: f64,
}

/// What [`balance`] finds.
#[derive(Clone, Debug, PartialEq)]
pub struct Balance {
    /// Mean runnable jobs per CPU before the release (empty: released from the start).
    pub load_distribution_start: Vec<f64>,
    /// Mean runnable jobs per CPU over the second half of the time after the release.
    pub load_distribution: Vec<f64>,
    /// From the release to the first sample whose split is balanced (ms; NaN: never).
    pub time_to_balance: f64,
    /// Share of the samples after the release whose split is balanced.
    pub balanced_fraction: f64,
}

/// Whether `counts` is the balanced split of its total: sorted, ⌈n/m⌉ on n mod m CPUs and
/// ⌊n/m⌋ on the others. An empty machine has nothing to balance and is not counted balanced.
pub fn is_balanced(counts: &[u32]) -> bool {
    let m = counts.len() as u32;
    let n: u32 = counts.iter().sum();
    if n == 0 || m == 0 {
        return false;
    }
    let (base, extra) = (n / m, n % m);
    let mut sorted = counts.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted
        .iter()
        .enumerate()
        .all(|(i, &c)| c == base + u32::from((i as u32) < extra))
}

fn column_means(rows: &[&Vec<u32>], m: usize) -> Vec<f64> {
    (0..m)
        .map(|c| rows.iter().map(|r| f64::from(r[c])).sum::<f64>() / rows.len() as f64)
        .collect()
}

/// The load split and the time to balance of a sampled run (None: no samples).
pub fn balance(s: &LoadSamples) -> Option<Balance> {
    let m = s.runnable.first()?.len();
    let live: Vec<(f64, &Vec<u32>)> = s
        .time
        .iter()
        .copied()
        .zip(&s.runnable)
        .filter(|(t, _)| *t <= s.end)
        .collect();
    let before: Vec<&Vec<u32>> = live
        .iter()
        .filter(|(t, _)| s.release > 0.0 && *t < s.release)
        .map(|(_, r)| *r)
        .collect();
    let after: Vec<(f64, &Vec<u32>)> = live
        .iter()
        .filter(|(t, _)| *t >= s.release)
        .copied()
        .collect();
    let load_distribution_start = if before.is_empty() {
        Vec::new()
    } else {
        column_means(&before, m)
    };
    let (Some(first), Some(last)) = (after.first(), after.last()) else {
        return Some(Balance {
            load_distribution_start,
            load_distribution: Vec::new(),
            time_to_balance: f64::NAN,
            balanced_fraction: f64::NAN,
        });
    };
    let middle = first.0 + (last.0 - first.0) / 2.0;
    let second_half: Vec<&Vec<u32>> = after
        .iter()
        .filter(|(t, _)| *t >= middle)
        .map(|(_, r)| *r)
        .collect();
    let balanced: Vec<bool> = after.iter().map(|(_, r)| is_balanced(r)).collect();
    let time_to_balance = after
        .iter()
        .zip(&balanced)
        .find(|(_, &b)| b)
        .map_or(f64::NAN, |((t, _), _)| t - s.release);
    Some(Balance {
        load_distribution_start,
        load_distribution: column_means(&second_half, m),
        time_to_balance,
        balanced_fraction: balanced.iter().filter(|&&b| b).count() as f64 / balanced.len() as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balanced_splits_follow_linux_1a() {
        assert!(is_balanced(&[4, 3]));
        assert!(is_balanced(&[3, 4]));
        assert!(is_balanced(&[2, 2, 2, 1]));
        assert!(!is_balanced(&[5, 2]));
        assert!(!is_balanced(&[3, 3, 1, 0]));
        assert!(!is_balanced(&[0, 0]));
    }

    #[test]
    fn time_from_release_to_first_balanced_sample() {
        // Pinned 7/0 until 500 ms, then 6/1, 5/2, 4/3 (balanced at 530 ms), 5/2, 4/3, 3/4.
        let runnable = [
            [7, 0],
            [7, 0],
            [6, 1],
            [5, 2],
            [4, 3],
            [5, 2],
            [4, 3],
            [3, 4],
        ];
        let s = LoadSamples {
            time: vec![480.0, 490.0, 500.0, 510.0, 530.0, 540.0, 550.0, 560.0],
            runnable: runnable.iter().map(|r| r.to_vec()).collect(),
            release: 500.0,
            end: 1e9,
        };
        let b = balance(&s).unwrap();
        assert_eq!(b.load_distribution_start, vec![7.0, 0.0]);
        assert_eq!(b.time_to_balance, 30.0);
        // 6 samples after the release, 3 balanced; the second half starts at 530 ms.
        assert_eq!(b.balanced_fraction, 0.5);
        assert_eq!(b.load_distribution, vec![4.0, 3.0]);
    }

    #[test]
    fn never_balanced_and_samples_past_the_end() {
        let s = LoadSamples {
            time: vec![0.0, 10.0, 20.0],
            runnable: vec![vec![0, 0], vec![6, 1], vec![4, 3]],
            release: 0.0,
            end: 15.0,
        };
        let b = balance(&s).unwrap();
        assert!(b.time_to_balance.is_nan());
        assert_eq!(b.balanced_fraction, 0.0);
        assert!(b.load_distribution_start.is_empty());
        assert!(balance(&LoadSamples::default()).is_none());
    }
}
