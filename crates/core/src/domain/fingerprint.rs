//! Content fingerprints over a canonical form.
//!
//! Two presentations of the same intention must compare equal even when a
//! different process serialized them (field order, JSON whitespace, a time
//! written as `-05:00` instead of `Z`), while any change to what the customer
//! would receive (recipient, template, parameters, expiry) must not. The
//! WhatsApp engine applies the same rule to its own `Idempotency-Key`, so
//! the simulator reuses [`canonical_json`].

use std::borrow::Cow;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical text of a JSON value: object keys sorted, no insignificant
/// whitespace, strings trimmed with inner whitespace collapsed, and strings
/// that are RFC 3339 instants rewritten in UTC.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    // serde_json writes UTF-8 only.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends the canonical text of `v` (see [`canonical_json`]); written
/// straight into `out`, without a copy of any key or string that is
/// already canonical.
pub fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                // Writing into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *out, k.as_str());
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::String(s) => push_canonical_str(s, out),
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

fn canonical_str(s: &str) -> Cow<'_, str> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s.trim()) {
        return Cow::Owned(t.with_timezone(&Utc).to_rfc3339_opts(SecondsFormat::AutoSi, true));
    }
    // Most text (every rendered body) is already collapsed: kept as it is,
    // without splitting and joining it again.
    if is_collapsed(s) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Whether `s` has no leading, trailing or repeated whitespace and no
/// whitespace other than single spaces: what collapsing would return.
fn is_collapsed(s: &str) -> bool {
    let mut after_space = true;
    for c in s.chars() {
        if c.is_whitespace() {
            if c != ' ' || after_space {
                return false;
            }
            after_space = true;
        } else {
            after_space = false;
        }
    }
    !after_space || s.is_empty()
}

/// Appends `s` as canonical JSON text (collapsed or rewritten as by
/// [`canonical_json`], then escaped as serde_json escapes it).
pub fn push_canonical_str(s: &str, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, canonical_str(s).as_ref());
}

/// `sha256:` + hex of the canonical JSON.
pub fn fingerprint(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    fingerprint_of_canonical(&out)
}

/// `sha256:` + hex of canonical JSON text already written (by
/// [`write_canonical`] and [`push_canonical_str`]).
pub fn fingerprint_of_canonical(canonical: &[u8]) -> String {
    prefixed_hex("sha256:", &Sha256::digest(canonical))
}

/// `prefix` followed by the lowercase hex of `bytes`, written into one
/// buffer: every reservation computes two of these (fingerprint and
/// correlation id), and `hex::encode`'s char-by-char collection into a new
/// string showed in the import's profile.
pub fn prefixed_hex(prefix: &str, bytes: &[u8]) -> String {
    let mut buf = vec![0u8; prefix.len() + bytes.len() * 2];
    buf[..prefix.len()].copy_from_slice(prefix.as_bytes());
    // The slice is exactly twice the input's length, so this cannot fail.
    let _ = hex::encode_to_slice(bytes, &mut buf[prefix.len()..]);
    String::from_utf8(buf).unwrap_or_default()
}

/// The content of one intention that the fingerprint covers.
pub struct ContentRef<'a> {
    pub recipient: &'a str,
    pub template: &'a str,
    pub language: &'a str,
    pub parameters: &'a [String],
    pub body: &'a str,
    pub expires_at: Option<DateTime<Utc>>,
}

impl ContentRef<'_> {
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "recipient": self.recipient,
            "template": self.template,
            "language": self.language,
            "parameters": self.parameters,
            "body": self.body,
            "expires_at": self.expires_at.map(|t| t.to_rfc3339()),
        })
    }

    /// The fingerprint of [`ContentRef::to_json`], written straight into
    /// its canonical text (keys in order, strings canonicalised) instead of
    /// building the JSON value and sorting it: an import computes one per
    /// intention.
    pub fn fingerprint(&self) -> String {
        let mut out = Vec::with_capacity(self.body.len() + 256);
        out.extend_from_slice(b"{\"body\":");
        push_canonical_str(self.body, &mut out);
        out.extend_from_slice(b",\"expires_at\":");
        match self.expires_at {
            // What `canonical_str` makes of `to_rfc3339()`: the same
            // instant in UTC, written with `Z`.
            Some(t) => push_canonical_str(&t.to_rfc3339_opts(SecondsFormat::AutoSi, true), &mut out),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"language\":");
        push_canonical_str(self.language, &mut out);
        out.extend_from_slice(b",\"parameters\":[");
        for (i, p) in self.parameters.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_canonical_str(p, &mut out);
        }
        out.extend_from_slice(b"],\"recipient\":");
        push_canonical_str(self.recipient, &mut out);
        out.extend_from_slice(b",\"template\":");
        push_canonical_str(self.template, &mut out);
        out.push(b'}');
        fingerprint_of_canonical(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    #[test]
    fn prefixed_hex_is_the_prefix_and_lowercase_hex() {
        assert_eq!(prefixed_hex("sha256:", &[0x00, 0xab, 0x7f, 0xff]), "sha256:00ab7fff");
        assert_eq!(prefixed_hex("", &[]), "");
        let d = Sha256::digest(b"x");
        assert_eq!(prefixed_hex("uv-", &d), format!("uv-{}", hex::encode(d)));
    }

    fn content(recipient: &str, params: &[&str], expires_h: u32) -> String {
        let params: Vec<String> = params.iter().map(|s| s.to_string()).collect();
        ContentRef {
            recipient,
            template: "cita_recordatorio",
            language: "es_PE",
            parameters: &params,
            body: "Hola Ana",
            expires_at: Some(Utc.with_ymd_and_hms(2026, 12, 1, expires_h, 0, 0).unwrap()),
        }
        .fingerprint()
    }

    #[test]
    fn field_order_and_whitespace_do_not_matter() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"x":"hola  mundo","y":[1,2]}}"#).unwrap();
        let b: Value =
            serde_json::from_str("{ \"b\" : { \"y\" : [1, 2], \"x\" : \" hola mundo \" },\n \"a\" : 1 }").unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
    }

    #[test]
    fn time_zone_spelling_does_not_matter() {
        let a = json!({"expires_at": "2026-10-24T18:00:00Z"});
        let b = json!({"expires_at": "2026-10-24T15:00:00-03:00"});
        let c = json!({"expires_at": "2026-10-24T18:00:00+00:00"});
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(fingerprint(&a), fingerprint(&c));
        assert_ne!(
            fingerprint(&a),
            fingerprint(&json!({"expires_at": "2026-10-24T18:00:01Z"}))
        );
    }

    #[test]
    fn content_changes_change_the_fingerprint() {
        let base = content("+51987654321", &["Ana", "09:30"], 14);
        assert_eq!(base, content("+51987654321", &["Ana", "09:30"], 14));
        assert_ne!(base, content("+51987654322", &["Ana", "09:30"], 14), "recipient");
        assert_ne!(base, content("+51987654321", &["Ana", "10:30"], 14), "parameters");
        assert_ne!(base, content("+51987654321", &["09:30", "Ana"], 14), "parameter order");
        assert_ne!(base, content("+51987654321", &["Ana", "09:30"], 15), "expiry");
        assert!(base.starts_with("sha256:"));
    }

    proptest::proptest! {
        /// The direct canonical writer gives the fingerprint of the JSON
        /// value, whatever the text (whitespace runs, tabs, quotes,
        /// controls, non-ASCII, text that reads as a time) and expiry.
        #[test]
        fn direct_fingerprint_is_the_value_fingerprint(
            recipient in "[+0-9 ]{0,14}",
            template in "[a-z_]{1,12}",
            language in "(es|es_PE| en )",
            parameters in proptest::collection::vec("(\\PC|[ \t\n\"\\\\]){0,12}|2026-10-24T1[0-9]:00:00(Z|-05:00)", 0..4),
            body in "(\\PC|[ \t\n\r\"\\\\\u{1}\u{a0}\u{2003}]){0,40}",
            expires in proptest::option::of((0i64..4_000_000_000, 0u32..2_000_000_000)),
        ) {
            let expires_at = expires.and_then(|(s, n)| DateTime::from_timestamp(s, if n % 2 == 0 { 0 } else { n % 1_000_000_000 }));
            let c = ContentRef {
                recipient: &recipient,
                template: &template,
                language: &language,
                parameters: &parameters,
                body: &body,
                expires_at,
            };
            proptest::prop_assert_eq!(c.fingerprint(), fingerprint(&c.to_json()));
        }
    }

    /// The canonical text as first written (keys and strings copied into
    /// new `Value`s): the reference the direct writer must match.
    fn reference_canonical(v: &Value) -> String {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let items: Vec<String> = keys
                    .into_iter()
                    .map(|k| format!("{}:{}", Value::String(k.clone()), reference_canonical(&map[k])))
                    .collect();
                format!("{{{}}}", items.join(","))
            }
            Value::Array(items) => format!(
                "[{}]",
                items.iter().map(reference_canonical).collect::<Vec<_>>().join(",")
            ),
            Value::String(s) => Value::String(canonical_str(s).into_owned()).to_string(),
            other => other.to_string(),
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e9f64..1e9).prop_map(Value::from),
            "(\\PC|[ \t\n\"\\\\]){0,12}".prop_map(Value::from),
            "2026-10-2[0-9]T1[0-9]:00:00(Z|-05:00| )".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[a-z _\"]{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn direct_canonical_json_is_the_reference(v in json_value()) {
            proptest::prop_assert_eq!(canonical_json(&v), reference_canonical(&v));
        }
    }

    #[test]
    fn collapsed_text_is_recognised() {
        for s in ["", "a", "a b", "Hola Ana, su cita"] {
            assert!(is_collapsed(s), "{s:?}");
        }
        for s in [" ", " a", "a ", "a  b", "a\tb", "a\nb", "a\u{a0}b"] {
            assert!(!is_collapsed(s), "{s:?}");
        }
    }

    #[test]
    fn template_changes_the_fingerprint() {
        let p = vec!["Ana".to_string()];
        let mk = |t| {
            ContentRef {
                recipient: "+51987654321",
                template: t,
                language: "es_PE",
                parameters: &p,
                body: "x",
                expires_at: None,
            }
            .fingerprint()
        };
        assert_ne!(mk("a"), mk("b"));
    }
}
