//! One error type for every bad input, in every world: the key, the value given and what is
//! allowed.

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub struct SpecError {
    pub key: String,
    pub value: String,
    pub allowed: String,
}

impl SpecError {
    pub fn new(key: impl Into<String>, value: impl ToString, allowed: impl Into<String>) -> Self {
        SpecError {
            key: key.into(),
            value: value.to_string(),
            allowed: allowed.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} = {}: expected {}",
            self.key, self.value, self.allowed
        )
    }
}

impl std::error::Error for SpecError {}
