//! Trace workloads: a CSV with columns arrival,size and optional class, priority, tickets,
//! weight, deadline (relative) and task.

use crate::SpecError;

#[derive(Clone, Debug)]
pub struct TraceRow {
    pub arrival: f64,
    pub size: f64,
    pub class: u32,
    pub priority: Option<f64>,
    pub tickets: Option<f64>,
    pub weight: Option<f64>,
    pub deadline: Option<f64>,
    pub task: Option<u32>,
}

pub const COLUMNS: &[&str] = &[
    "arrival", "size", "class", "priority", "tickets", "weight", "deadline", "task",
];

/// Reads a trace; `classes` are the class names a `class` cell may use (or an index).
pub fn read(path: &str, classes: &[&str]) -> Result<Vec<TraceRow>, SpecError> {
    let fail = |allowed: String| SpecError {
        key: "trace".into(),
        value: path.into(),
        allowed,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| fail(format!("a readable CSV file ({e})")))?;
    let headers = rdr
        .headers()
        .map_err(|e| fail(format!("a CSV header ({e})")))?
        .clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    for required in ["arrival", "size"] {
        if col(required).is_none() {
            return Err(fail(format!(
                "a header with columns arrival,size (missing '{required}'; optional: {})",
                COLUMNS[2..].join(",")
            )));
        }
    }
    if let Some(h) = headers.iter().find(|h| !COLUMNS.contains(h)) {
        return Err(fail(format!(
            "only the columns {} (unknown '{h}')",
            COLUMNS.join(",")
        )));
    }
    let mut rows = Vec::new();
    let mut last = f64::NEG_INFINITY;
    for (n, rec) in rdr.records().enumerate() {
        let line = n + 2;
        let rec = rec.map_err(|e| fail(format!("well-formed CSV ({e})")))?;
        let num = |name: &str| -> Result<Option<f64>, SpecError> {
            match col(name).and_then(|i| rec.get(i)).filter(|s| !s.is_empty()) {
                None => Ok(None),
                Some(s) => s
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .map(Some)
                    .ok_or_else(|| {
                        fail(format!(
                            "a number in column {name} at line {line}, not '{s}'"
                        ))
                    }),
            }
        };
        let arrival = num("arrival")?.ok_or_else(|| fail(format!("an arrival at line {line}")))?;
        let size = num("size")?.ok_or_else(|| fail(format!("a size at line {line}")))?;
        if arrival < last {
            return Err(fail(format!("arrivals in increasing order (line {line})")));
        }
        if size < 0.0 {
            return Err(fail(format!("sizes >= 0 (line {line})")));
        }
        last = arrival;
        let class = match col("class")
            .and_then(|i| rec.get(i))
            .filter(|s| !s.is_empty())
        {
            None => 0,
            Some(s) => match classes.iter().position(|c| *c == s) {
                Some(i) => i as u32,
                None => match s.parse::<u32>() {
                    Ok(i) if (i as usize) < classes.len() => i,
                    _ => {
                        return Err(fail(format!(
                            "a class among {} at line {line}, not '{s}'",
                            classes.join(",")
                        )))
                    }
                },
            },
        };
        rows.push(TraceRow {
            arrival,
            size,
            class,
            priority: num("priority")?,
            tickets: num("tickets")?,
            weight: num("weight")?,
            deadline: num("deadline")?,
            task: num("task")?.map(|t| t as u32),
        });
    }
    if rows.is_empty() {
        return Err(fail("at least one job".into()));
    }
    Ok(rows)
}
