//! How the `fraction`s of workload classes become shares of arrivals (open workloads), of
//! clients (closed ones) or of requests (the load generator): one rule in every world.
//!
//! A fraction is a share, not a weight: given fractions lie in [0, 1] and add up to at most 1;
//! classes without one share what is left equally; when every class has one they must add up
//! to 1 (to 0.1%, so thirds written 0.333 pass, and are then scaled to add up exactly).

use crate::SpecError;

/// How far from 1 fractions given for every class may add up.
const TOLERANCE: f64 = 1e-3;

/// The share of each class (adding up to 1), from the fractions given (`None`: not given).
pub fn class_shares(fractions: &[Option<f64>]) -> Result<Vec<f64>, SpecError> {
    if fractions.is_empty() {
        return Ok(Vec::new());
    }
    let key = |i: usize| format!("classes[{i}].fraction");
    for (i, f) in fractions.iter().enumerate() {
        if let Some(f) = *f {
            if !(0.0..=1.0).contains(&f) {
                return Err(SpecError::new(key(i), f, "a share from 0 to 1"));
            }
        }
    }
    let given: f64 = fractions.iter().flatten().sum();
    let missing = fractions.iter().filter(|f| f.is_none()).count();
    let last = fractions.len() - 1;
    if missing == 0 {
        if (given - 1.0).abs() > TOLERANCE {
            return Err(SpecError::new(
                key(last),
                fractions[last].unwrap_or_default(),
                format!("fractions that add up to 1 (these add up to {given})"),
            ));
        }
        return Ok(fractions
            .iter()
            .map(|f| f.unwrap_or_default() / given)
            .collect());
    }
    if given > 1.0 + TOLERANCE {
        let i = fractions.iter().rposition(Option::is_some).unwrap_or(last);
        return Err(SpecError::new(
            key(i),
            fractions[i].unwrap_or_default(),
            format!("fractions that add up to at most 1 (these add up to {given})"),
        ));
    }
    let rest = (1.0 - given).max(0.0) / missing as f64;
    Ok(fractions.iter().map(|f| f.unwrap_or(rest)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fractions_share_what_is_left() {
        assert_eq!(class_shares(&[None, None]).unwrap(), vec![0.5, 0.5]);
        assert_eq!(class_shares(&[Some(0.5), None]).unwrap(), vec![0.5, 0.5]);
        assert_eq!(
            class_shares(&[Some(0.4), None, None]).unwrap(),
            vec![0.4, 0.3, 0.3]
        );
        assert_eq!(
            class_shares(&[Some(0.4), Some(0.6)]).unwrap(),
            vec![0.4, 0.6]
        );
        let thirds = class_shares(&[Some(0.333), Some(0.333), Some(0.333)]).unwrap();
        assert!(thirds.iter().all(|s| (s - 1.0 / 3.0).abs() < 1e-12));
        assert!(class_shares(&[]).unwrap().is_empty());
    }

    #[test]
    fn fractions_that_do_not_add_up_are_refused_naming_the_class() {
        let e = class_shares(&[Some(0.7), Some(0.7)]).unwrap_err();
        assert_eq!(e.key, "classes[1].fraction");
        assert!(
            e.allowed.contains("add up to 1 (these add up to 1.4)"),
            "{e}"
        );
        let e = class_shares(&[Some(0.2), Some(0.3)]).unwrap_err();
        assert!(e.allowed.contains("0.5"), "{e}");
        let e = class_shares(&[Some(0.9), Some(0.3), None]).unwrap_err();
        assert_eq!(e.key, "classes[1].fraction");
        let e = class_shares(&[Some(1.5), None]).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.value.as_str()),
            ("classes[0].fraction", "1.5")
        );
        assert!(class_shares(&[Some(-0.1), None]).is_err());
        assert!(class_shares(&[Some(f64::NAN), None]).is_err());
    }
}
