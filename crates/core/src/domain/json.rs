//! JSON read strictly, for input that becomes a record: an object that
//! names a key twice is refused, and an array's items keep the exact text
//! they were sent as.
//!
//! Why: JSON parsers disagree on duplicate keys (`serde_json` keeps the
//! last, others the first), so `{"type":"appointment.cancelled",
//! "type":"appointment.scheduled"}` would be a cancellation for the booking
//! system and a booking for us. Refusing it is the only reading both sides
//! share. And the event log keeps what was received, not our re-reading of
//! it, so a person can see exactly what a sender said.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `text` as one JSON value, refusing any object (at any depth)
/// that names a key twice. The error names the key's path and where it
/// is (`duplicate key "contact.phone" at line 1 column 80`).
pub fn parse_strict(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Strict { path: String::new() }.deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// The exact text of each item of a JSON array (`text` is `[…]`), in
/// order; `None` when `text` is not an array. `text` must be valid JSON
/// ([`parse_strict`] first): this only finds where each item ends.
pub fn array_items(text: &str) -> Option<Vec<&str>> {
    let body = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    let bytes = body.as_bytes();
    let mut items = Vec::new();
    let (mut depth, mut in_string, mut escaped, mut start) = (0usize, false, false, 0usize);
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.checked_sub(1)?,
            b',' if depth == 0 => {
                items.push(body[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = body[start..].trim();
    if !last.is_empty() {
        items.push(last);
    }
    Some(items)
}

/// A `serde_json::Value` built by hand, so that a repeated key is an error
/// instead of a silent overwrite. `path` is where the value sits.
struct Strict {
    path: String,
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict {
            path: format!("{}[{}]", self.path, out.len()),
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = match self.path.is_empty() {
                true => key.clone(),
                false => format!("{}.{key}", self.path),
            };
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {path:?}: each key may appear once"
                )));
            }
            let v = map.next_value_seed(Strict { path })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_refused_naming_it_and_where() {
        let e = parse_strict(r#"{"type":"appointment.cancelled","type":"appointment.scheduled"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "duplicate key \"type\": each key may appear once at line 1 column 38"
        );
        let e = parse_strict("{\"contact\":{\"phone\":\"+51987654321\",\n\"phone\":\"+51911222333\"}}").unwrap_err();
        assert!(e.to_string().starts_with("duplicate key \"contact.phone\""), "{e}");
        let e = parse_strict(r#"[{"a":1},{"b":[{"c":1,"c":2}]}]"#).unwrap_err();
        assert!(e.to_string().starts_with("duplicate key \"[1].b[0].c\""), "{e}");
    }

    #[test]
    fn values_read_as_serde_json_reads_them() {
        for text in [
            r#"{"a":1,"b":-2,"c":1.5,"d":"x\"y","e":null,"f":[true,false],"g":{"h":{}}}"#,
            "[]",
            "\"text\"",
            "18446744073709551615",
        ] {
            let strict = parse_strict(text).unwrap();
            assert_eq!(strict, serde_json::from_str::<Value>(text).unwrap(), "{text}");
        }
        assert!(parse_strict("{} {}").is_err(), "trailing data");
        assert!(parse_strict("{\"a\":1,}").is_err());
    }

    #[test]
    fn array_items_keep_their_exact_text() {
        let text = " [ {\"a\" : \"x,]}\\\"\" } ,\n{\"b\":[1,{\"c\":2}]},3 ] ";
        assert_eq!(
            array_items(text).unwrap(),
            ["{\"a\" : \"x,]}\\\"\" }", "{\"b\":[1,{\"c\":2}]}", "3"]
        );
        assert_eq!(array_items("[]").unwrap(), Vec::<&str>::new());
        assert_eq!(array_items("{\"a\":1}"), None);
        for item in array_items(text).unwrap() {
            assert!(parse_strict(item).is_ok(), "{item}");
        }
    }
}
