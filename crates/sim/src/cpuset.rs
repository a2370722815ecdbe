//! A set of CPU numbers as a bitmap, walked in ascending order: the engine keeps the CPUs
//! that may need filling, so that an event on a 1,024-CPU machine visits the few idle CPUs
//! with work in reach instead of every CPU.

#[derive(Clone, Debug, Default)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    /// Every CPU of `cpus` in the set.
    pub fn full(cpus: usize) -> CpuSet {
        let mut words = vec![u64::MAX; cpus.div_ceil(64)];
        if !cpus.is_multiple_of(64) {
            if let Some(last) = words.last_mut() {
                *last = (1u64 << (cpus % 64)) - 1;
            }
        }
        CpuSet { words }
    }

    #[inline]
    pub fn insert(&mut self, cpu: usize) {
        self.words[cpu / 64] |= 1 << (cpu % 64);
    }

    #[inline]
    pub fn remove(&mut self, cpu: usize) {
        self.words[cpu / 64] &= !(1 << (cpu % 64));
    }

    /// The smallest CPU in the set that is at least `from`.
    #[inline]
    pub fn first_from(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        if w >= self.words.len() {
            return None;
        }
        let mut bits = self.words[w] & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
            w += 1;
            if w == self.words.len() {
                return None;
            }
            bits = self.words[w];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(s: &CpuSet) -> Vec<usize> {
        let mut out = Vec::new();
        let mut c = 0;
        while let Some(x) = s.first_from(c) {
            out.push(x);
            c = x + 1;
        }
        out
    }

    #[test]
    fn walks_members_in_order_across_words() {
        for n in [1, 2, 63, 64, 65, 130, 1024] {
            let mut s = CpuSet::full(n);
            assert_eq!(members(&s), (0..n).collect::<Vec<_>>(), "{n}");
            for c in (0..n).filter(|c| c % 3 != 0) {
                s.remove(c);
            }
            assert_eq!(members(&s), (0..n).step_by(3).collect::<Vec<_>>(), "{n}");
            s.insert(n - 1);
            assert_eq!(s.first_from(n - 1), Some(n - 1));
            assert_eq!(s.first_from(n), None);
        }
    }
}
