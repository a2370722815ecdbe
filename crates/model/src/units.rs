//! The units a key or a parameter is declared in. A world that measures something in other
//! terms converts by the unit, never by the key's name: the file server turns every `Work`
//! value from ms of service into packets through its cost model, and leaves `Time` alone.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Service: ms of CPU in the simulator and on real processes, packets in the file server.
    Work,
    /// Wall-clock time in ms, in every world.
    Time,
    /// Per ms of wall-clock time (aging: priority points per ms waited).
    Rate,
    /// A whole number of things (jobs, clients, CPUs, levels).
    Count,
    /// A dimensionless number (a load, a weight, a ratio of loads).
    Ratio,
    /// Bytes.
    Bytes,
    Bool,
    /// A word from a fixed set, a file name or a distribution's text.
    Text,
    /// CPU numbers.
    Cpus,
    /// A table or a list of tables (policy parameters, classes, catalogue entries).
    Table,
}

impl Unit {
    pub const ALL: [Unit; 10] = [
        Unit::Work,
        Unit::Time,
        Unit::Rate,
        Unit::Count,
        Unit::Ratio,
        Unit::Bytes,
        Unit::Bool,
        Unit::Text,
        Unit::Cpus,
        Unit::Table,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Unit::Work => "work",
            Unit::Time => "time",
            Unit::Rate => "rate",
            Unit::Count => "count",
            Unit::Ratio => "ratio",
            Unit::Bytes => "bytes",
            Unit::Bool => "bool",
            Unit::Text => "text",
            Unit::Cpus => "cpus",
            Unit::Table => "table",
        }
    }

    /// How a number in this unit is written for users ("ms of service", "ms", ...).
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Work => "ms of service",
            Unit::Time => "ms",
            Unit::Rate => "per ms",
            Unit::Bytes => "B",
            _ => "",
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
