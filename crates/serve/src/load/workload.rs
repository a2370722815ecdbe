//! What the load generator asks for: a catalogue of targets (paths with weights and classes),
//! picked by weight or by a Zipf popularity law, and scripted bursts.

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::Rng;
use rand_distr::Zipf;
use serde::{Deserialize, Serialize};

use schedlab_model::shares::class_shares;
use schedlab_model::SpecError;

fn err(key: &str, value: impl ToString, allowed: &str) -> SpecError {
    SpecError {
        key: key.into(),
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

/// One path of the catalogue.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    pub path: String,
    pub weight: Option<f64>,
    pub class: Option<String>,
}

/// A class of requests: sent with the `X-Schedlab-Class: NAME` header.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    pub name: String,
    /// Share of requests (open loop, and closed-loop clients without a fixed class).
    pub fraction: Option<f64>,
    /// Closed loop: clients of this class.
    pub clients: Option<u32>,
}

/// A group of a scripted burst: `count` requests for `path` at `at` ms after the start, each
/// on its own connection.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BurstGroup {
    pub at: f64,
    pub count: u32,
    pub path: String,
    pub class: Option<String>,
}

pub const BURST_SYNTAX: &str = "COUNTxPATH@MS groups separated by commas, e.g. \
5x/large.bin@0,10x/small.bin@50";

/// Parses `5x/large.bin@0,10x/small.bin@50`.
pub fn parse_burst(text: &str) -> Result<Vec<BurstGroup>, SpecError> {
    let bad = || err("burst", text, BURST_SYNTAX);
    text.split(',')
        .map(|g| {
            let (count, rest) = g.trim().split_once('x').ok_or_else(bad)?;
            let (path, at) = rest.rsplit_once('@').ok_or_else(bad)?;
            let count: u32 = count.trim().parse().map_err(|_| bad())?;
            let at: f64 = at.trim().parse().map_err(|_| bad())?;
            if count == 0 || !(at >= 0.0 && at.is_finite()) || !path.starts_with('/') {
                return Err(bad());
            }
            Ok(BurstGroup {
                at,
                count,
                path: path.to_string(),
                class: None,
            })
        })
        .collect()
}

/// Parses a mix file: one target per line, `PATH [WEIGHT [CLASS]]`, separated by spaces or
/// commas; `#` starts a comment. Weights default to 1.
pub fn parse_mix(name: &str, text: &str) -> Result<Vec<TargetSpec>, SpecError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|f| !f.is_empty())
            .collect();
        let bad = |why: &str| err("mix", format!("{name}:{}: {line}", i + 1), why);
        if !fields[0].starts_with('/') || fields.len() > 3 {
            return Err(bad("lines of PATH [WEIGHT [CLASS]], PATH starting with /"));
        }
        let weight = match fields.get(1) {
            Some(w) => Some(
                w.parse::<f64>()
                    .ok()
                    .filter(|w| *w >= 0.0 && w.is_finite())
                    .ok_or_else(|| bad("a weight >= 0"))?,
            ),
            None => None,
        };
        out.push(TargetSpec {
            path: fields[0].to_string(),
            weight,
            class: fields.get(2).map(|c| c.to_string()),
        });
    }
    if out.is_empty() {
        return Err(err(
            "mix",
            name,
            "a file with at least one line PATH [WEIGHT [CLASS]]",
        ));
    }
    Ok(out)
}

#[derive(Clone, Debug)]
pub struct Target {
    pub path: String,
    pub class: i64,
}

#[derive(Clone, Debug)]
enum Chooser {
    One,
    Weighted(WeightedIndex<f64>),
    Zipf(Zipf<f64>),
}

#[derive(Clone, Debug)]
struct Group {
    targets: Vec<usize>,
    chooser: Chooser,
}

impl Group {
    fn new(targets: Vec<usize>, weights: &[f64], zipf: Option<f64>) -> Result<Group, SpecError> {
        let chooser = if targets.len() == 1 {
            Chooser::One
        } else if let Some(s) = zipf {
            Chooser::Zipf(
                Zipf::new(targets.len() as f64, s).map_err(|_| err("zipf", s, "a number >= 0"))?,
            )
        } else {
            let w: Vec<f64> = targets.iter().map(|t| weights[*t]).collect();
            Chooser::Weighted(
                WeightedIndex::new(&w)
                    .map_err(|_| err("mix", "(weights)", "weights >= 0, not all 0"))?,
            )
        };
        Ok(Group { targets, chooser })
    }
    fn pick<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        match &self.chooser {
            Chooser::One => self.targets[0],
            Chooser::Weighted(w) => self.targets[w.sample(rng)],
            // Zipf draws ranks 1..=n; rank 1 is the first target listed.
            Chooser::Zipf(z) => {
                let r = z.sample(rng) as usize;
                self.targets[r.clamp(1, self.targets.len()) - 1]
            }
        }
    }
}

/// The catalogue and how to pick from it.
#[derive(Clone, Debug)]
pub struct Workload {
    pub targets: Vec<Target>,
    pub classes: Vec<String>,
    /// Per class: its targets; with no classes, one group of everything.
    groups: Vec<Group>,
    class_pick: Option<WeightedIndex<f64>>,
    /// Closed loop: the class of each client with a fixed class.
    pub fixed_clients: Vec<u32>,
}

impl Workload {
    pub fn new(
        specs: &[TargetSpec],
        classes: &[ClassSpec],
        zipf: Option<f64>,
    ) -> Result<Workload, SpecError> {
        if specs.is_empty() {
            return Err(err("mix", "(empty)", "at least one target path"));
        }
        if let Some(s) = zipf {
            if !(s >= 0.0 && s.is_finite()) {
                return Err(err("zipf", s, "a number >= 0"));
            }
        }
        let names: Vec<String> = classes.iter().map(|c| c.name.clone()).collect();
        let mut targets = Vec::new();
        let mut weights = Vec::new();
        for t in specs {
            if !t.path.starts_with('/') {
                return Err(err("mix", &t.path, "a path starting with /"));
            }
            let class = match &t.class {
                None => -1,
                Some(c) => match names.iter().position(|n| n == c) {
                    Some(i) => i as i64,
                    None if names.is_empty() => -1,
                    None => {
                        return Err(err(
                            "mix",
                            format!("{} class {c}", t.path),
                            &format!("a class of {}", names.join(", ")),
                        ))
                    }
                },
            };
            targets.push(Target {
                path: t.path.clone(),
                class,
            });
            weights.push(t.weight.unwrap_or(1.0));
        }
        // Targets without a class name keep the class a server assigns them (by prefix), but
        // for the generator's class mix they belong to every class.
        let mut groups = Vec::new();
        let mut class_pick = None;
        if names.is_empty() {
            groups.push(Group::new((0..targets.len()).collect(), &weights, zipf)?);
        } else {
            for (i, c) in classes.iter().enumerate() {
                let mine: Vec<usize> = (0..targets.len())
                    .filter(|t| targets[*t].class == i as i64 || targets[*t].class < 0)
                    .collect();
                if mine.is_empty() {
                    return Err(err(
                        "classes",
                        &c.name,
                        "a class with at least one target (give targets a class)",
                    ));
                }
                groups.push(Group::new(mine, &weights, zipf)?);
            }
            let fractions: Vec<Option<f64>> = classes.iter().map(|c| c.fraction).collect();
            class_pick = WeightedIndex::new(class_shares(&fractions)?).ok();
        }
        let mut fixed_clients = Vec::new();
        for (i, c) in classes.iter().enumerate() {
            for _ in 0..c.clients.unwrap_or(0) {
                fixed_clients.push(i as u32);
            }
        }
        Ok(Workload {
            targets,
            classes: names,
            groups,
            class_pick,
            fixed_clients,
        })
    }

    /// A target for a request of `class` (drawn by the class fractions when `None`); returns
    /// the target and the class sent with it (-1: none).
    pub fn pick<R: Rng + ?Sized>(&self, rng: &mut R, class: Option<u32>) -> (usize, i64) {
        let g = match (class, &self.class_pick) {
            (Some(c), _) if (c as usize) < self.groups.len() => c as usize,
            (_, Some(w)) => w.sample(rng),
            _ => 0,
        };
        let t = self.groups[g].pick(rng);
        let class = if self.classes.is_empty() {
            self.targets[t].class
        } else {
            g as i64
        };
        (t, class)
    }

    /// The index of a target path, added when new (bursts name their paths).
    pub fn target_of(&mut self, path: &str, class: i64) -> usize {
        if let Some(i) = self
            .targets
            .iter()
            .position(|t| t.path == path && t.class == class)
        {
            return i;
        }
        self.targets.push(Target {
            path: path.to_string(),
            class,
        });
        self.targets.len() - 1
    }
}

/// `n` seeded draws of a distribution written in the simulator's syntax (catalogue sizes).
pub fn sample_dist(key: &str, text: &str, n: usize, seed: u64) -> Result<Vec<f64>, SpecError> {
    use rand::SeedableRng;
    let d = schedlab_model::dist::Dist::parse(key, text)?;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    Ok((0..n).map(|_| d.sample(&mut rng)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn parses_bursts_and_mixes() {
        let b = parse_burst("5x/large.bin@0, 10x/small.bin@50").unwrap();
        assert_eq!(
            (b[0].count, b[0].at, b[0].path.as_str()),
            (5, 0.0, "/large.bin")
        );
        assert_eq!(
            (b[1].count, b[1].at, b[1].path.as_str()),
            (10, 50.0, "/small.bin")
        );
        for bad in ["5/large@0", "x/a@1", "3xa@1", "2x/a@-1", "0x/a@0"] {
            assert_eq!(parse_burst(bad).unwrap_err().key, "burst", "{bad}");
        }
        let m = parse_mix("m.txt", "# catalogue\n/a 3\n/b, 1, big\n\n/c\n").unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].weight, Some(3.0));
        assert_eq!(m[1].class.as_deref(), Some("big"));
        assert_eq!(m[2].weight, None);
        assert_eq!(parse_mix("m.txt", "a 1\n").unwrap_err().key, "mix");
        assert_eq!(parse_mix("m.txt", "/a -1\n").unwrap_err().key, "mix");
    }

    fn spec(path: &str, weight: f64, class: Option<&str>) -> TargetSpec {
        TargetSpec {
            path: path.into(),
            weight: Some(weight),
            class: class.map(String::from),
        }
    }

    #[test]
    fn weights_zipf_and_class_fractions_shape_the_draws() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let w = Workload::new(&[spec("/a", 3.0, None), spec("/b", 1.0, None)], &[], None).unwrap();
        let n = 40_000;
        let a = (0..n).filter(|_| w.pick(&mut rng, None).0 == 0).count() as f64 / n as f64;
        // Binomial s.e. at p = 0.75, n = 40000 is 0.0022; allow 4 s.e.
        assert!((a - 0.75).abs() < 0.009, "{a}");
        let specs: Vec<TargetSpec> = (0..10)
            .map(|i| spec(&format!("/f{i}"), 1.0, None))
            .collect();
        let z = Workload::new(&specs, &[], Some(1.0)).unwrap();
        let mut counts = [0usize; 10];
        for _ in 0..n {
            counts[z.pick(&mut rng, None).0] += 1;
        }
        // Zipf(1) over 10 ranks: P(rank 1) = 1 / H_10 = 0.3414, P(rank 2) = 0.1707.
        let p1 = counts[0] as f64 / n as f64;
        let p2 = counts[1] as f64 / n as f64;
        assert!((p1 - 0.3414).abs() < 0.01, "{p1}");
        assert!((p2 - 0.1707).abs() < 0.008, "{p2}");
        let classes = [
            ClassSpec {
                name: "big".into(),
                fraction: Some(0.2),
                clients: None,
            },
            ClassSpec {
                name: "small".into(),
                fraction: Some(0.8),
                clients: Some(2),
            },
        ];
        let c = Workload::new(
            &[
                spec("/big", 1.0, Some("big")),
                spec("/small", 1.0, Some("small")),
            ],
            &classes,
            None,
        )
        .unwrap();
        let small = (0..n)
            .filter(|_| {
                let (t, class) = c.pick(&mut rng, None);
                assert_eq!(t as i64, class, "a class picks its own target");
                class == 1
            })
            .count() as f64
            / n as f64;
        assert!((small - 0.8).abs() < 0.009, "{small}");
        assert_eq!(c.pick(&mut rng, Some(0)), (0, 0));
        assert_eq!(c.fixed_clients, vec![1, 1]);
    }
}
