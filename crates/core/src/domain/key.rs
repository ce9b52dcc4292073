//! Idempotency keys: the *meaning* of a communication, spelled from our own
//! data (`cita-1042:recordatorio-24h:v3`).
//!
//! Never derived from the clock or a random UUID: a retry, a restarted worker
//! or a second process must arrive at the very same key, or the key stops
//! protecting anything. Keys travel to the provider and back in its logs, so
//! they must not carry personal data; we refuse anything that looks like a
//! phone number or an e-mail address.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The engine accepts keys of 1 to 200 characters (engine contract).
pub const MAX_KEY_LEN: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("reference is empty")]
    EmptyRef,
    #[error("reference {0:?} contains characters other than letters, digits, '-', '_', '.' or '/'")]
    BadChars(String),
    #[error("reference {0:?} looks like personal data (a phone number or e-mail); use the booking's own id")]
    PersonalData(String),
    #[error("reference {reference:?} {why}")]
    BadShape { reference: String, why: RefShape },
    #[error("key {0:?} is longer than {MAX_KEY_LEN} characters")]
    TooLong(String),
}

/// Why a reference's shape is refused: a reference is a path of plain
/// segments (`cita-1042`, `serie-7/2027-01-12T1430Z`), never something a
/// file system, a shell or a URL would read as more than a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefShape {
    /// `/cita-1`: a path from the root.
    LeadingSlash,
    /// `-rf`: an option to a command line.
    LeadingDash,
    /// `a//b` or `a/`: a segment with nothing in it.
    EmptySegment,
    /// `.`, `..`, `a/../b`: the current or the parent directory.
    DotSegment,
}

impl fmt::Display for RefShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefShape::LeadingSlash => "starts with '/'",
            RefShape::LeadingDash => "starts with '-'",
            RefShape::EmptySegment => "has an empty segment (\"//\" or a '/' at the end)",
            RefShape::DotSegment => "has a \".\" or \"..\" segment",
        })
    }
}

/// Why we talk to the customer. Its `slug` is part of the key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// "Your appointment is booked" (due when scheduled).
    Booking,
    /// A reminder `minutes` before the appointment.
    Reminder { minutes: u32 },
    /// The appointment changed (time or place): identified as an update.
    Update,
    /// The appointment was cancelled.
    Cancellation,
    /// An order notice for a business state (`confirmado`, `enviado`…).
    Order { event: String },
}

impl Purpose {
    pub fn slug(&self) -> String {
        match self {
            Purpose::Booking => "aviso-reserva".into(),
            Purpose::Reminder { minutes } => format!("recordatorio-{}", offset_label(*minutes)),
            Purpose::Update => "aviso-cambio".into(),
            Purpose::Cancellation => "aviso-cancelacion".into(),
            Purpose::Order { event } => event.clone(),
        }
    }

    /// Inverse of [`Purpose::slug`] for the appointment purposes; anything
    /// else is an order event.
    pub fn from_slug(s: &str) -> Purpose {
        match s {
            "aviso-reserva" => Purpose::Booking,
            "aviso-cambio" => Purpose::Update,
            "aviso-cancelacion" => Purpose::Cancellation,
            _ => match s.strip_prefix("recordatorio-").and_then(parse_offset_label) {
                Some(minutes) => Purpose::Reminder { minutes },
                None => Purpose::Order { event: s.to_string() },
            },
        }
    }

    pub fn is_reminder(&self) -> bool {
        matches!(self, Purpose::Reminder { .. })
    }
}

/// `1440` → `24h`, `90` → `90m`: short, stable, readable in a key.
pub fn offset_label(minutes: u32) -> String {
    if minutes.is_multiple_of(60) {
        format!("{}h", minutes / 60)
    } else {
        format!("{minutes}m")
    }
}

fn parse_offset_label(s: &str) -> Option<u32> {
    if let Some(h) = s.strip_suffix('h') {
        h.parse::<u32>().ok().map(|h| h * 60)
    } else {
        s.strip_suffix('m')?.parse().ok()
    }
}

/// A validated idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IntentionKey(String);

impl IntentionKey {
    /// `{ref}:{purpose}:v{version}` for appointments.
    pub fn for_commitment(reference: &str, purpose: &Purpose, version: i64) -> Result<Self, KeyError> {
        check_ref(reference)?;
        // An order state is outside data too (the property test found a
        // phone passing through here); the other slugs are our own words.
        if let Purpose::Order { event } = purpose {
            check_ref(event)?;
        }
        Self::checked(format!("{reference}:{}:v{version}", purpose.slug()))
    }

    /// `{ref}:{event}:v{version}:{channel}` for orders (docs/design.md, "Idempotency key").
    pub fn for_order(reference: &str, event: &str, version: i64, channel: &str) -> Result<Self, KeyError> {
        check_ref(reference)?;
        check_ref(event)?;
        check_ref(channel)?;
        Self::checked(format!("{reference}:{event}:v{version}:{channel}"))
    }

    /// A resend is a new intention related to the original: `…:reenvio:{n}`.
    pub fn resend(original: &IntentionKey, n: u32) -> Result<Self, KeyError> {
        Self::checked(format!("{}:reenvio:{n}", original.0))
    }

    /// Accepts a key read back from storage or typed by an operator.
    pub fn parse(s: &str) -> Result<Self, KeyError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(KeyError::EmptyRef);
        }
        Self::checked(s.to_string())
    }

    fn checked(key: String) -> Result<Self, KeyError> {
        if key.chars().count() > MAX_KEY_LEN {
            return Err(KeyError::TooLong(key));
        }
        Ok(IntentionKey(key))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IntentionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A business reference must be an id, not a person.
pub fn check_ref(reference: &str) -> Result<(), KeyError> {
    if reference.is_empty() {
        return Err(KeyError::EmptyRef);
    }
    if !reference
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
    {
        return Err(KeyError::BadChars(reference.to_string()));
    }
    if let Some(why) = bad_shape(reference) {
        return Err(KeyError::BadShape {
            reference: reference.to_string(),
            why,
        });
    }
    if looks_personal(reference) {
        return Err(KeyError::PersonalData(reference.to_string()));
    }
    Ok(())
}

/// `/` stays: recurring occurrences are `{ref}/{YYYY-MM-DDTHHMMZ}`; the
/// segments it separates must each be a plain name.
fn bad_shape(reference: &str) -> Option<RefShape> {
    if reference.starts_with('/') {
        return Some(RefShape::LeadingSlash);
    }
    if reference.starts_with('-') {
        return Some(RefShape::LeadingDash);
    }
    reference.split('/').find_map(|seg| match seg {
        "" => Some(RefShape::EmptySegment),
        "." | ".." => Some(RefShape::DotSegment),
        _ => None,
    })
}

/// Seven or more digits in a row is a phone number (Peruvian mobiles have
/// nine); booking ids are shorter or carry a prefix.
fn looks_personal(s: &str) -> bool {
    let mut run = 0;
    for c in s.chars() {
        if c.is_ascii_digit() {
            run += 1;
            if run >= 7 {
                return true;
            }
        } else {
            run = 0;
        }
    }
    s.contains('@')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_design_spelling() {
        let k = IntentionKey::for_commitment("cita-1042", &Purpose::Reminder { minutes: 1440 }, 3).unwrap();
        assert_eq!(k.as_str(), "cita-1042:recordatorio-24h:v3");
        let o = IntentionKey::for_order("pedido-88", "enviado", 5, "whatsapp").unwrap();
        assert_eq!(o.as_str(), "pedido-88:enviado:v5:whatsapp");
        assert_eq!(
            IntentionKey::resend(&k, 1).unwrap().as_str(),
            "cita-1042:recordatorio-24h:v3:reenvio:1"
        );
    }

    #[test]
    fn same_meaning_same_key_different_meaning_different_key() {
        let a = IntentionKey::for_commitment("cita-1", &Purpose::Reminder { minutes: 120 }, 1).unwrap();
        let b = IntentionKey::for_commitment("cita-1", &Purpose::Reminder { minutes: 120 }, 1).unwrap();
        let c = IntentionKey::for_commitment("cita-1", &Purpose::Reminder { minutes: 1440 }, 1).unwrap();
        let d = IntentionKey::for_commitment("cita-1", &Purpose::Reminder { minutes: 120 }, 2).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    #[test]
    fn personal_data_is_refused() {
        assert!(matches!(check_ref("987654321"), Err(KeyError::PersonalData(_))));
        assert!(matches!(
            check_ref("ana@example.com"),
            Err(KeyError::BadChars(_)) | Err(KeyError::PersonalData(_))
        ));
        assert!(matches!(check_ref("cita 1"), Err(KeyError::BadChars(_))));
        assert!(matches!(check_ref(""), Err(KeyError::EmptyRef)));
        assert!(check_ref("cita-1042").is_ok());
        assert!(check_ref("pedido-123456").is_ok());
    }

    #[test]
    fn paths_options_and_dot_segments_are_refused_naming_why() {
        let shape = |r: &str| match check_ref(r) {
            Err(KeyError::BadShape { why, .. }) => Some(why),
            Ok(()) => None,
            Err(e) => panic!("{r}: {e}"),
        };
        assert_eq!(shape("../../etc/passwd"), Some(RefShape::DotSegment));
        assert_eq!(shape(".."), Some(RefShape::DotSegment));
        assert_eq!(shape("."), Some(RefShape::DotSegment));
        assert_eq!(shape("serie/../cita-1"), Some(RefShape::DotSegment));
        assert_eq!(shape("serie/."), Some(RefShape::DotSegment));
        assert_eq!(shape("/"), Some(RefShape::LeadingSlash));
        assert_eq!(shape("/cita-1"), Some(RefShape::LeadingSlash));
        assert_eq!(shape("-rf"), Some(RefShape::LeadingDash));
        assert_eq!(shape("-"), Some(RefShape::LeadingDash));
        assert_eq!(shape("serie//x"), Some(RefShape::EmptySegment));
        assert_eq!(shape("serie/"), Some(RefShape::EmptySegment));
        assert_eq!(
            check_ref("../../etc/passwd").unwrap_err().to_string(),
            "reference \"../../etc/passwd\" has a \".\" or \"..\" segment"
        );
        assert_eq!(
            check_ref("-rf").unwrap_err().to_string(),
            "reference \"-rf\" starts with '-'"
        );
        // What stays valid: an occurrence of a series, dots and dashes
        // inside a segment, a trailing dash, underscores.
        for ok in [
            "serie-7/2027-01-12T1430Z",
            "a.b",
            "...x",
            "x..",
            "cita-",
            "_cita",
            "v1.2/x-y_z",
            ".hidden",
        ] {
            assert_eq!(check_ref(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn long_keys_are_refused() {
        let r = "a".repeat(199);
        assert!(matches!(
            IntentionKey::for_commitment(&r, &Purpose::Booking, 1),
            Err(KeyError::TooLong(_))
        ));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// A phone's digits as E.164 writes them: a country code, then 8 to
        /// 12 national digits.
        fn phone_digits() -> impl Strategy<Value = String> {
            "[1-9][0-9]{0,2}[0-9]{8,12}"
        }

        /// What a booking system might send as a ref or an order state,
        /// given the customer's phone: clean ids, and ids built from the
        /// phone (whole, national part, a 7-digit run, with a `+`).
        fn reference(phone: String) -> impl Strategy<Value = String> {
            let national = phone[phone.len() - 8..].to_string();
            let run = phone[..7].to_string();
            prop_oneof![
                "[a-z]{1,8}-[0-9]{1,6}",
                "[a-z]{0,6}[-_./]?".prop_map(move |p| format!("{p}{phone}")),
                ("[a-z]{1,6}-", "[-_./][a-z0-9]{0,4}").prop_map(move |(p, s)| format!("{p}{national}{s}")),
                "[a-z]{1,4}".prop_map(move |p| format!("{p}-{run}-x")),
                "[a-z]{1,4}".prop_map(|p| format!("{p}+51987654321")),
            ]
        }

        fn purpose(event: String) -> impl Strategy<Value = Purpose> {
            prop_oneof![
                Just(Purpose::Booking),
                Just(Purpose::Update),
                Just(Purpose::Cancellation),
                (1u32..=43_200).prop_map(|minutes| Purpose::Reminder { minutes }),
                Just(Purpose::Order { event }),
            ]
        }

        fn case() -> impl Strategy<Value = (String, String, Purpose, String, i64, u32)> {
            phone_digits().prop_flat_map(|phone| {
                let p = phone.clone();
                (
                    Just(phone.clone()),
                    reference(phone.clone()),
                    reference(phone.clone()).prop_flat_map(purpose),
                    reference(p),
                    // Versions and resend counters as the ledger makes them:
                    // small counters. (A version that happens to spell
                    // seven of the phone's digits is the booking system's
                    // number, not the phone: generating it would only test
                    // coincidence.)
                    1i64..1_000_000,
                    0u32..1_000,
                )
            })
        }

        proptest! {
            /// Whatever ref, purpose, order state and channel a booking
            /// system sends, a key that derivation accepts never carries a
            /// run of seven of the customer's phone digits.
            #[test]
            fn keys_never_contain_phone_digits(
                (phone, reference, purpose, channel, version, n) in case(),
            ) {
                let keys = [
                    IntentionKey::for_commitment(&reference, &purpose, version),
                    match &purpose {
                        Purpose::Order { event } => IntentionKey::for_order(&reference, event, version, &channel),
                        _ => IntentionKey::for_order(&reference, "enviado", version, &channel),
                    },
                ];
                for key in keys.into_iter().flatten() {
                    let resent = IntentionKey::resend(&key, n);
                    for k in std::iter::once(key).chain(resent) {
                        for w in 0..=phone.len() - 7 {
                            let run = &phone[w..w + 7];
                            prop_assert!(!k.as_str().contains(run), "key {k} holds {run} of phone +{phone}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn purposes_round_trip_through_slugs() {
        for p in [
            Purpose::Booking,
            Purpose::Update,
            Purpose::Cancellation,
            Purpose::Reminder { minutes: 1440 },
            Purpose::Reminder { minutes: 90 },
            Purpose::Order {
                event: "enviado".into(),
            },
        ] {
            assert_eq!(Purpose::from_slug(&p.slug()), p);
        }
    }
}
