//! Distributions written `name:params`, the same text in the CLI, TOML files and Python.

use rand::Rng;
use rand_distr::{Distribution, Exp1, Gamma, LogNormal};

use crate::SpecError;

pub const SYNTAX: &str = "det:V, exp:MEAN, uniform:LO,HI, erlang:K,MEAN, hyperexp:MEAN,CV, \
lognormal:MEAN,CV, bpareto:ALPHA,LO,HI or empirical:FILE.csv";

/// The largest coefficient of variation of `hyperexp` and `lognormal`: beyond about 1e7 a
/// hyperexponential's rare phase has a probability below the doubles' resolution (its mean
/// became infinite at 1e155 and sampling panicked), and no study needs more than this.
pub const MAX_CV: f64 = 1e4;

#[derive(Clone, Debug)]
pub enum Dist {
    Det(f64),
    Exp(f64),
    Uniform(f64, f64),
    Erlang {
        k: u32,
        mean: f64,
        gamma: Gamma<f64>,
    },
    /// Two phases with balanced means: probability p of mean m1, else mean m2.
    HyperExp {
        mean: f64,
        cv: f64,
        p: f64,
        m1: f64,
        m2: f64,
    },
    LogNormal {
        mean: f64,
        cv: f64,
        inner: LogNormal<f64>,
    },
    BPareto {
        alpha: f64,
        lo: f64,
        hi: f64,
        /// `1 - (lo/hi)^alpha` and `1/alpha`, worked out once: a sample's inverse CDF pays
        /// one `powf` instead of two (the same operations, so the same bits).
        mass: f64,
        inv_alpha: f64,
    },
    Empirical {
        file: String,
        values: Vec<f64>,
    },
}

impl Dist {
    /// Parses `text`; errors name `key` (the spec key holding the text).
    pub fn parse(key: &str, text: &str) -> Result<Dist, SpecError> {
        let bad = |why: &str| SpecError {
            key: key.into(),
            value: text.into(),
            allowed: format!("{why} (syntax: {SYNTAX})"),
        };
        let (name, rest) = text.split_once(':').ok_or_else(|| bad("name:params"))?;
        let name = name.trim().to_ascii_lowercase();
        if name == "empirical" {
            return Dist::empirical(rest.trim()).map_err(|e| bad(&e));
        }
        let nums: Vec<f64> = rest
            .split(',')
            .map(|s| s.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad("numbers after the colon"))?;
        if nums.iter().any(|x| !x.is_finite()) {
            return Err(bad("finite numbers"));
        }
        let want = |n: usize| -> Result<(), SpecError> {
            if nums.len() == n {
                Ok(())
            } else {
                Err(bad(&format!("{n} number(s) for {name}")))
            }
        };
        let d = match name.as_str() {
            "det" | "deterministic" | "const" => {
                want(1)?;
                if nums[0] < 0.0 {
                    return Err(bad("a value >= 0"));
                }
                Dist::Det(nums[0])
            }
            "exp" | "exponential" => {
                want(1)?;
                if nums[0] <= 0.0 {
                    return Err(bad("a mean > 0"));
                }
                Dist::Exp(nums[0])
            }
            "uniform" => {
                want(2)?;
                if !(0.0 <= nums[0] && nums[0] <= nums[1]) {
                    return Err(bad("0 <= LO <= HI"));
                }
                Dist::Uniform(nums[0], nums[1])
            }
            "erlang" => {
                want(2)?;
                if nums[0] < 1.0 || nums[0].fract() != 0.0 || nums[1] <= 0.0 {
                    return Err(bad("a whole K >= 1 and a MEAN > 0"));
                }
                let k = nums[0] as u32;
                let gamma = Gamma::new(k as f64, nums[1] / k as f64).map_err(|_| bad("erlang"))?;
                Dist::Erlang {
                    k,
                    mean: nums[1],
                    gamma,
                }
            }
            "hyperexp" | "h2" => {
                want(2)?;
                let (mean, cv) = (nums[0], nums[1]);
                if mean <= 0.0 || !(1.0..=MAX_CV).contains(&cv) {
                    return Err(bad("MEAN > 0 and 1 <= CV <= 10000"));
                }
                let c2 = cv * cv;
                let p = 0.5 * (1.0 + ((c2 - 1.0) / (c2 + 1.0)).sqrt());
                Dist::HyperExp {
                    mean,
                    cv,
                    p,
                    m1: mean / (2.0 * p),
                    m2: mean / (2.0 * (1.0 - p)),
                }
            }
            "lognormal" => {
                want(2)?;
                let (mean, cv) = (nums[0], nums[1]);
                if mean <= 0.0 || cv <= 0.0 || cv > MAX_CV {
                    return Err(bad("MEAN > 0 and 0 < CV <= 10000"));
                }
                let s2 = (1.0 + cv * cv).ln();
                let inner = LogNormal::new(mean.ln() - s2 / 2.0, s2.sqrt())
                    .map_err(|_| bad("MEAN > 0 and 0 < CV <= 10000"))?;
                Dist::LogNormal { mean, cv, inner }
            }
            "bpareto" => {
                want(3)?;
                let (alpha, lo, hi) = (nums[0], nums[1], nums[2]);
                if alpha <= 0.0 || lo <= 0.0 || hi <= lo || (alpha - 1.0).abs() < 1e-12 {
                    return Err(bad("ALPHA > 0 (not 1), 0 < LO < HI"));
                }
                Dist::BPareto {
                    alpha,
                    lo,
                    hi,
                    mass: 1.0 - (lo / hi).powf(alpha),
                    inv_alpha: 1.0 / alpha,
                }
            }
            _ => return Err(bad(&format!("a known distribution, not '{name}'"))),
        };
        Ok(d)
    }

    fn empirical(file: &str) -> Result<Dist, String> {
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_path(file)
            .map_err(|e| format!("a readable CSV file ({e})"))?;
        let mut values = Vec::new();
        for (i, rec) in rdr.records().enumerate() {
            let rec = rec.map_err(|e| format!("a readable CSV file ({e})"))?;
            let cell = rec.get(0).unwrap_or("").trim();
            match cell.parse::<f64>() {
                Ok(v) if v >= 0.0 && v.is_finite() => values.push(v),
                _ if i == 0 => continue, // a header line
                _ => return Err(format!("numbers >= 0 in the first column (line {})", i + 1)),
            }
        }
        if values.is_empty() {
            return Err("at least one value in the file".into());
        }
        Ok(Dist::Empirical {
            file: file.into(),
            values,
        })
    }

    pub fn mean(&self) -> f64 {
        match self {
            Dist::Det(v) | Dist::Exp(v) => *v,
            Dist::Uniform(a, b) => (a + b) / 2.0,
            Dist::Erlang { mean, .. }
            | Dist::HyperExp { mean, .. }
            | Dist::LogNormal { mean, .. } => *mean,
            Dist::BPareto { alpha, lo, hi, .. } => {
                let a = *alpha;
                let norm = 1.0 - (lo / hi).powf(a);
                a * lo.powf(a) * (lo.powf(1.0 - a) - hi.powf(1.0 - a)) / ((a - 1.0) * norm)
            }
            Dist::Empirical { values, .. } => values.iter().sum::<f64>() / values.len() as f64,
        }
    }

    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            Dist::Det(v) => *v,
            Dist::Exp(m) => {
                let e: f64 = Exp1.sample(rng);
                e * m
            }
            Dist::Uniform(a, b) => a + (b - a) * rng.random::<f64>(),
            Dist::Erlang { gamma, .. } => gamma.sample(rng),
            Dist::HyperExp { p, m1, m2, .. } => {
                let m = if rng.random::<f64>() < *p { m1 } else { m2 };
                let e: f64 = Exp1.sample(rng);
                e * m
            }
            Dist::LogNormal { inner, .. } => inner.sample(rng),
            Dist::BPareto {
                lo,
                mass,
                inv_alpha,
                ..
            } => {
                let u: f64 = rng.random();
                lo / (1.0 - u * mass).powf(*inv_alpha)
            }
            Dist::Empirical { values, .. } => values[rng.random_range(0..values.len())],
        }
    }

    /// The canonical name, as in the syntax.
    pub fn name(&self) -> &'static str {
        match self {
            Dist::Det(_) => "det",
            Dist::Exp(_) => "exp",
            Dist::Uniform(..) => "uniform",
            Dist::Erlang { .. } => "erlang",
            Dist::HyperExp { .. } => "hyperexp",
            Dist::LogNormal { .. } => "lognormal",
            Dist::BPareto { .. } => "bpareto",
            Dist::Empirical { .. } => "empirical",
        }
    }

    /// The numbers after the colon (empty for `empirical`).
    pub fn params(&self) -> Vec<f64> {
        match self {
            Dist::Det(v) | Dist::Exp(v) => vec![*v],
            Dist::Uniform(a, b) => vec![*a, *b],
            Dist::Erlang { k, mean, .. } => vec![*k as f64, *mean],
            Dist::HyperExp { mean, cv, .. } | Dist::LogNormal { mean, cv, .. } => vec![*mean, *cv],
            Dist::BPareto { alpha, lo, hi, .. } => vec![*alpha, *lo, *hi],
            Dist::Empirical { .. } => vec![],
        }
    }

    /// The text form, as a user would write it.
    pub fn written(&self) -> String {
        match self {
            Dist::Det(v) => format!("det:{v}"),
            Dist::Exp(m) => format!("exp:{m}"),
            Dist::Uniform(a, b) => format!("uniform:{a},{b}"),
            Dist::Erlang { k, mean, .. } => format!("erlang:{k},{mean}"),
            Dist::HyperExp { mean, cv, .. } => format!("hyperexp:{mean},{cv}"),
            Dist::LogNormal { mean, cv, .. } => format!("lognormal:{mean},{cv}"),
            Dist::BPareto { alpha, lo, hi, .. } => format!("bpareto:{alpha},{lo},{hi}"),
            Dist::Empirical { file, .. } => format!("empirical:{file}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn sample_mean_and_cv(d: &Dist, n: usize) -> (f64, f64) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let xs: Vec<f64> = (0..n).map(|_| d.sample(&mut rng)).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        (m, v.sqrt() / m)
    }

    #[test]
    fn sampled_moments_match_the_parameters() {
        // 1M samples: standard error of the mean is cv/1000, so 1% is over 10 sigma for cv<=1
        // and about 3 sigma for cv = 3.
        for (text, mean, cv) in [
            ("exp:2", 2.0, 1.0),
            ("uniform:1,3", 2.0, (1.0f64 / 3.0).sqrt() / 2.0),
            ("erlang:4,2", 2.0, 0.5),
            ("hyperexp:1,3", 1.0, 3.0),
            ("lognormal:5,2", 5.0, 2.0),
        ] {
            let d = Dist::parse("size", text).unwrap();
            assert!((d.mean() - mean).abs() < 1e-12);
            let (m, c) = sample_mean_and_cv(&d, 1_000_000);
            assert!((m / mean - 1.0).abs() < 0.01, "{text}: mean {m}");
            assert!((c / cv - 1.0).abs() < 0.05, "{text}: cv {c}");
        }
    }

    #[test]
    fn bounded_pareto_mean_matches_closed_form() {
        // alpha 1.5 on [1, 1000]: mean = 2.90522 (reference table, shared/reference/mg1.csv).
        let d = Dist::parse("size", "bpareto:1.5,1,1000").unwrap();
        assert!((d.mean() - 2.90522).abs() < 1e-4);
        let (m, _) = sample_mean_and_cv(&d, 4_000_000);
        assert!((m / d.mean() - 1.0).abs() < 0.01, "mean {m}");
    }

    #[test]
    fn bounded_pareto_samples_are_the_inverse_cdf_to_the_bit() {
        // The constants worked out at parse give the bits of the inverse CDF written out in
        // full (runs before the change sampled it that way, and their results must not move).
        for text in [
            "bpareto:1.5,1,1000",
            "bpareto:0.7,1,10",
            "bpareto:2.5,0.5,50",
        ] {
            let d = Dist::parse("size", text).unwrap();
            let Dist::BPareto { alpha, lo, hi, .. } = d else {
                panic!("{text} parses to a bounded Pareto")
            };
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
            let mut same = Xoshiro256PlusPlus::seed_from_u64(9);
            for _ in 0..10_000 {
                let u: f64 = same.random();
                let full = lo / (1.0 - u * (1.0 - (lo / hi).powf(alpha))).powf(1.0 / alpha);
                assert_eq!(
                    d.sample(&mut rng).to_bits(),
                    full.to_bits(),
                    "{text} at u = {u}"
                );
            }
        }
    }

    #[test]
    fn bad_text_names_key_and_syntax() {
        for text in [
            "exp",
            "exp:-1",
            "erlang:1.5,2",
            "zipf:1",
            "uniform:3,1",
            "det:x",
        ] {
            let e = Dist::parse("arrival", text).unwrap_err();
            assert_eq!(e.key, "arrival");
            assert_eq!(e.value, text);
            assert!(e.allowed.contains("syntax"), "{}", e.allowed);
        }
    }
}
