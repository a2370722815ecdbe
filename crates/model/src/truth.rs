//! A boolean key that takes only a boolean. serde's `bool` asks the input for one, and a
//! Python dict answers with any object's truth: `keep_alive = "false"` read as true. Fields
//! that are booleans deserialize with `#[serde(default, with = "schedlab_model::truth")]`.

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;
use std::fmt;

struct Strict;

impl<'de> Visitor<'de> for Strict {
    type Value = Option<bool>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("true or false")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Strict)
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    d.deserialize_any(Strict)
}

pub fn serialize<S: Serializer>(v: &Option<bool>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(b) => s.serialize_some(b),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Spec {
        #[serde(default, with = "crate::truth")]
        keep: Option<bool>,
    }

    #[test]
    fn only_a_boolean_is_one() {
        let read = |s: &str| serde_json::from_str::<Spec>(s).map(|x| x.keep);
        assert_eq!(read(r#"{"keep": false}"#).unwrap(), Some(false));
        assert_eq!(read(r#"{"keep": null}"#).unwrap(), None);
        assert_eq!(read("{}").unwrap(), None);
        let e = read(r#"{"keep": "false"}"#).unwrap_err().to_string();
        assert!(e.contains("expected true or false"), "{e}");
        assert!(read(r#"{"keep": 1}"#).is_err());
    }
}
