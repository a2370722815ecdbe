//! Trace workloads: a CSV with columns arrival,size and optional class, priority, tickets,
//! weight, deadline (relative) and task; or a closed trace, task,think,size[,class]: each task
//! thinks, submits its next row, waits for it, thinks again (a real closed-loop run replayed).

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
pub const CLOSED_COLUMNS: &[&str] = &["task", "think", "size", "class"];
/// The largest task number a trace may give (Linux's largest pid): the engine keeps a slot
/// for every task up to the largest number.
pub const MAX_TASK: f64 = 4_194_304.0;

/// A task number: whole, from 0 to `MAX_TASK`.
fn task_number(t: f64, line: usize) -> Result<u32, String> {
    if t.fract() != 0.0 || !(0.0..=MAX_TASK).contains(&t) {
        return Err(format!(
            "a whole task number from 0 to {MAX_TASK} at line {line}, not '{t}'"
        ));
    }
    Ok(t as u32)
}

/// One request of a closed trace's task: the think before it, and its size.
#[derive(Clone, Copy, Debug)]
pub struct ScriptRow {
    pub think: f64,
    pub size: f64,
}

/// A closed trace's task: its class and its requests in order.
#[derive(Clone, Debug)]
pub struct ScriptTask {
    pub class: u32,
    pub rows: Vec<ScriptRow>,
}

fn failure(path: &str, allowed: String) -> SpecError {
    SpecError {
        key: "trace".into(),
        value: path.into(),
        allowed,
    }
}

/// The trace's CSV reader and its header.
fn open(path: &str) -> Result<(csv::Reader<std::fs::File>, csv::StringRecord), SpecError> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| failure(path, format!("a readable CSV file ({e})")))?;
    let headers = rdr
        .headers()
        .map_err(|e| failure(path, format!("a CSV header ({e})")))?
        .clone();
    Ok((rdr, headers))
}

/// Whether the trace at `path` is a closed one (it has a `think` column).
pub fn is_closed(path: &str) -> bool {
    csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .ok()
        .and_then(|mut r| r.headers().ok().map(|h| h.iter().any(|c| c == "think")))
        .unwrap_or(false)
}

fn class_of(s: Option<&str>, classes: &[&str], line: usize) -> Result<u32, String> {
    match s.filter(|s| !s.is_empty()) {
        None => Ok(0),
        Some(s) => match classes.iter().position(|c| *c == s) {
            Some(i) => Ok(i as u32),
            None => match s.parse::<u32>() {
                Ok(i) if (i as usize) < classes.len() => Ok(i),
                _ => Err(format!(
                    "a class among {} at line {line}, not '{s}'",
                    classes.join(",")
                )),
            },
        },
    }
}

/// Reads a closed trace: tasks numbered 0..n (every one with a row), rows in each task's
/// order, thinks and sizes >= 0, one class per task.
pub fn read_closed(path: &str, classes: &[&str]) -> Result<Vec<ScriptTask>, SpecError> {
    let fail = |allowed: String| failure(path, allowed);
    let (mut rdr, headers) = open(path)?;
    if let Some(h) = headers.iter().find(|h| !CLOSED_COLUMNS.contains(h)) {
        return Err(fail(format!(
            "a closed trace with only the columns {} (unknown '{h}')",
            CLOSED_COLUMNS.join(",")
        )));
    }
    let col = |name: &str| headers.iter().position(|h| h == name);
    for required in ["task", "think", "size"] {
        if col(required).is_none() {
            return Err(fail(format!(
                "a closed trace with columns task,think,size[,class] (missing '{required}')"
            )));
        }
    }
    let mut tasks: Vec<Option<ScriptTask>> = Vec::new();
    for (n, rec) in rdr.records().enumerate() {
        let line = n + 2;
        let rec = rec.map_err(|e| fail(format!("well-formed CSV ({e})")))?;
        let num = |name: &str| -> Result<f64, SpecError> {
            let s = col(name).and_then(|i| rec.get(i)).unwrap_or("");
            s.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    fail(format!(
                        "a number >= 0 in column {name} at line {line}, not '{s}'"
                    ))
                })
        };
        let task = task_number(num("task")?, line).map_err(fail)? as usize;
        let class = class_of(col("class").and_then(|i| rec.get(i)), classes, line).map_err(fail)?;
        let row = ScriptRow {
            think: num("think")?,
            size: num("size")?,
        };
        if tasks.len() <= task {
            tasks.resize(task + 1, None);
        }
        match &mut tasks[task] {
            Some(t) if t.class != class => {
                return Err(fail(format!(
                    "one class per task (task {task} changes class at line {line})"
                )))
            }
            Some(t) => t.rows.push(row),
            slot @ None => {
                *slot = Some(ScriptTask {
                    class,
                    rows: vec![row],
                })
            }
        }
    }
    if tasks.is_empty() {
        return Err(fail("at least one job".into()));
    }
    tasks
        .into_iter()
        .enumerate()
        .map(|(i, t)| t.ok_or_else(|| fail(format!("tasks numbered from 0 (task {i} has no row)"))))
        .collect()
}

/// Reads a trace; `classes` are the class names a `class` cell may use (or an index).
pub fn read(path: &str, classes: &[&str]) -> Result<Vec<TraceRow>, SpecError> {
    let fail = |allowed: String| failure(path, allowed);
    let (mut rdr, headers) = open(path)?;
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
        let class = class_of(col("class").and_then(|i| rec.get(i)), classes, line).map_err(fail)?;
        // As a class's keys: tickets, weights and deadlines above 0.
        let positive = |name: &str| -> Result<Option<f64>, SpecError> {
            match num(name)? {
                Some(x) if x <= 0.0 => Err(fail(format!(
                    "a number > 0 in column {name} at line {line}, not '{x}'"
                ))),
                v => Ok(v),
            }
        };
        rows.push(TraceRow {
            arrival,
            size,
            class,
            priority: num("priority")?,
            tickets: positive("tickets")?,
            weight: positive("weight")?,
            deadline: positive("deadline")?,
            task: num("task")?
                .map(|t| task_number(t, line))
                .transpose()
                .map_err(fail)?,
        });
    }
    if rows.is_empty() {
        return Err(fail("at least one job".into()));
    }
    Ok(rows)
}
