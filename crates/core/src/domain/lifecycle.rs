//! Typed vocabularies of a commitment's life: its business status
//! (scheduled, cancelled, or the order's last notified state) and the
//! operating day a message belongs to.
//!
//! Both are stored as text (the ledger's columns and the JSON output keep
//! their words), but inside the program they are closed sets, so a typo
//! is a compile error and not a status nobody matches.

use std::fmt;

use chrono::NaiveDate;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An order's business state: the states that are notified, plus
/// `actualizado` for an order that only ever got internal updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderState {
    Confirmed,
    Paid,
    Prepared,
    Shipped,
    Exception,
    Delivered,
    Returned,
    Updated,
}

impl OrderState {
    pub const ALL: [OrderState; 8] = [
        Self::Confirmed,
        Self::Paid,
        Self::Prepared,
        Self::Shipped,
        Self::Exception,
        Self::Delivered,
        Self::Returned,
        Self::Updated,
    ];

    /// The stored word, which is also the template purpose of its notice.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirmed => "confirmado",
            Self::Paid => "pagado",
            Self::Prepared => "preparado",
            Self::Shipped => "enviado",
            Self::Exception => "incidencia",
            Self::Delivered => "entregado",
            Self::Returned => "devuelto",
            Self::Updated => "actualizado",
        }
    }
}

/// A commitment's business status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitmentStatus {
    Scheduled,
    Cancelled,
    /// An order, by its last state.
    Order(OrderState),
}

impl CommitmentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Cancelled => "cancelled",
            Self::Order(s) => s.as_str(),
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "scheduled" => Some(Self::Scheduled),
            "cancelled" => Some(Self::Cancelled),
            _ => OrderState::ALL.into_iter().find(|o| o.as_str() == s).map(Self::Order),
        }
    }
}

impl fmt::Display for CommitmentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CommitmentStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CommitmentStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown commitment status {s:?}")))
    }
}

/// The clinic's calendar day a message is due on (in the configured time
/// zone): what a technician reprocesses and the console's Tablero shows.
/// Stored and printed as `YYYY-MM-DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperatingDay(NaiveDate);

impl OperatingDay {
    pub fn new(date: NaiveDate) -> OperatingDay {
        OperatingDay(date)
    }

    pub fn date(self) -> NaiveDate {
        self.0
    }

    /// `YYYY-MM-DD`, strictly (the stored form); the error says what was
    /// expected.
    pub fn parse(s: &str) -> Result<OperatingDay, String> {
        NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
            .map(OperatingDay)
            .map_err(|_| format!("{s:?} is not a day: expected YYYY-MM-DD"))
    }
}

impl Serialize for OperatingDay {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for OperatingDay {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        OperatingDay::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for OperatingDay {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        OperatingDay::parse(s)
    }
}

impl fmt::Display for OperatingDay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.format("%Y-%m-%d"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_back_as_itself_and_unknown_words_are_refused() {
        let all = [CommitmentStatus::Scheduled, CommitmentStatus::Cancelled]
            .into_iter()
            .chain(OrderState::ALL.into_iter().map(CommitmentStatus::Order));
        for s in all {
            assert_eq!(CommitmentStatus::parse(s.as_str()), Some(s));
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<CommitmentStatus>(&json).unwrap(), s);
        }
        assert_eq!(CommitmentStatus::parse("Scheduled"), None);
        assert_eq!(CommitmentStatus::parse(""), None);
        assert!(serde_json::from_str::<CommitmentStatus>("\"shipped\"").is_err());
    }

    #[test]
    fn an_operating_day_is_a_strict_date() {
        let d = OperatingDay::parse("2026-12-01").unwrap();
        assert_eq!(d.to_string(), "2026-12-01");
        assert!(OperatingDay::parse("2026-13-01").is_err());
        assert!(OperatingDay::parse("01/12/2026").unwrap_err().contains("YYYY-MM-DD"));
        assert!(OperatingDay::parse("2026-12-01").unwrap() < OperatingDay::parse("2026-12-02").unwrap());
    }
}
