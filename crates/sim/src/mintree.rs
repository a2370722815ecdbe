//! A tournament tree over event times: the earliest of k slots in O(1), an update in
//! O(log k). The engine keeps one for the CPUs (end of the current run) and one for fluid
//! runqueues (next completion), so 64 CPUs cost no more per event than one.

pub struct MinTree {
    /// Leaves at `size..2 * size`; each inner node holds the smaller of its children.
    node: Vec<f64>,
    size: usize,
}

impl MinTree {
    pub fn new(slots: usize) -> MinTree {
        let size = slots.max(1).next_power_of_two();
        MinTree {
            node: vec![f64::INFINITY; 2 * size],
            size,
        }
    }

    pub fn set(&mut self, slot: usize, value: f64) {
        let mut i = slot + self.size;
        self.node[i] = value;
        while i > 1 {
            i /= 2;
            let m = self.node[2 * i].min(self.node[2 * i + 1]);
            if self.node[i] == m {
                break;
            }
            self.node[i] = m;
        }
    }

    #[cfg(test)]
    pub fn get(&self, slot: usize) -> f64 {
        self.node[slot + self.size]
    }

    pub fn min(&self) -> f64 {
        self.node[1]
    }

    /// The slot holding the minimum (the lowest such slot on ties).
    pub fn argmin(&self) -> usize {
        let mut i = 1;
        while i < self.size {
            i = if self.node[2 * i] <= self.node[2 * i + 1] {
                2 * i
            } else {
                2 * i + 1
            };
        }
        i - self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_the_minimum_through_updates() {
        let mut t = MinTree::new(5);
        assert_eq!(t.min(), f64::INFINITY);
        for (slot, v) in [(0, 5.0), (1, 3.0), (4, 4.0), (2, 3.0)] {
            t.set(slot, v);
        }
        assert_eq!((t.min(), t.argmin()), (3.0, 1));
        t.set(1, 9.0);
        assert_eq!((t.min(), t.argmin()), (3.0, 2));
        t.set(2, f64::INFINITY);
        assert_eq!((t.min(), t.argmin()), (4.0, 4));
        t.set(4, 1.0);
        assert_eq!((t.min(), t.argmin(), t.get(0)), (1.0, 4, 5.0));
    }
}
